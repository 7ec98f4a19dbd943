//go:build linux

package wireguard

import (
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"

	"github.com/xdpio/xdpio/xdpnet"
)

// Options configure a Bind. The zero value listens on every address of
// the interface (IPv4 and IPv6) with xdpnet's defaults.
type Options struct {
	// Addr is the local address to listen on; the zero value is [::],
	// every address of both families.
	Addr netip.Addr
	// Config configures the xdpnet conn (queues, batching, checksums).
	// Ports is ignored: a Bind has one port.
	Config xdpnet.Config
	// Do, if set, runs Open's socket setup (for example inside a network
	// namespace); nil runs it directly.
	Do func(func() error) error
}

// Bind is a conn.Bind over AF_XDP. Its methods are safe for concurrent
// use, as wireguard-go requires.
type Bind struct {
	ifname string
	opts   Options

	mu sync.Mutex
	c  *xdpnet.UDPConn

	msgs sync.Pool // *[]xdpnet.Message for Send
}

// NewBind returns a Bind on the interface ifname. It opens nothing until
// wireguard-go calls Open.
func NewBind(ifname string, opts Options) *Bind {
	b := &Bind{ifname: ifname, opts: opts}
	b.msgs.New = func() any {
		m := make([]xdpnet.Message, conn.IdealBatchSize)
		return &m
	}
	return b
}

var (
	_ conn.Bind               = (*Bind)(nil)
	_ conn.PeekLookAtSocketFd = (*Bind)(nil)
)

// Open listens on port (0: a free one) and returns one ReceiveFunc per RX
// queue of the interface and one for the conn's kernel socket.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	addr := b.opts.Addr
	if !addr.IsValid() {
		addr = netip.IPv6Unspecified()
	}
	cfg := b.opts.Config
	cfg.Ports = 1
	if cfg.BatchSize == 0 {
		cfg.BatchSize = conn.IdealBatchSize
	}
	open := func() error {
		var err error
		b.c, err = xdpnet.ListenUDP(b.ifname, netip.AddrPortFrom(addr, port), cfg)
		return err
	}
	var err error
	if b.opts.Do != nil {
		err = b.opts.Do(open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("wireguard over AF_XDP on %s: %w", b.ifname, err)
	}
	var fns []conn.ReceiveFunc
	for _, q := range b.c.Queues() {
		fns = append(fns, newReceiver(q).receive)
	}
	return fns, b.c.LocalAddrPort().Port(), nil
}

// receiver is one ReceiveFunc: a queue read by one goroutine of
// wireguard-go's, copying datagrams into its buffers.
type receiver struct {
	q    *xdpnet.Queue
	msgs []xdpnet.Message
	eps  map[netip.AddrPort]*Endpoint
}

// maxEndpoints bounds a receiver's endpoint cache: beyond it, the cache
// starts again (an endpoint is a few bytes; peers are few).
const maxEndpoints = 4096

func newReceiver(q *xdpnet.Queue) *receiver {
	return &receiver{q: q, eps: map[netip.AddrPort]*Endpoint{}}
}

func (r *receiver) receive(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	if len(r.msgs) < len(packets) {
		r.msgs = make([]xdpnet.Message, len(packets))
	}
	msgs := r.msgs[:len(packets)]
	for i := range msgs {
		msgs[i].Buf = packets[i]
	}
	n, err := r.q.ReadBatch(msgs, -1)
	if err != nil {
		return 0, err
	}
	for i, m := range msgs[:n] {
		sizes[i] = m.N
		if m.Truncated {
			sizes[i] = 0 // wireguard-go ignores it; counted in the queue's stats
		}
		ep := r.eps[m.Addr]
		if ep == nil {
			if len(r.eps) >= maxEndpoints {
				clear(r.eps)
			}
			ep = &Endpoint{AddrPort: m.Addr}
			r.eps[m.Addr] = ep
		}
		eps[i] = ep
	}
	return n, nil
}

// Close closes the conn: every ReceiveFunc returns an error matching
// net.ErrClosed.
func (b *Bind) Close() error {
	b.mu.Lock()
	c := b.c
	b.c = nil
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

// SetMark sets SO_MARK on the kernel socket the conn holds (datagrams
// sent through it carry the mark); AF_XDP frames have no socket mark.
func (b *Bind) SetMark(mark uint32) error {
	b.mu.Lock()
	c := b.c
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)) }); err != nil {
		return err
	}
	return serr
}

// Send writes bufs to ep, in order, as one batch. It returns the first
// error: a packet larger than the path MTU allows fails with an error
// matching syscall.EMSGSIZE.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(*Endpoint)
	if !ok {
		return conn.ErrWrongEndpointType
	}
	b.mu.Lock()
	c := b.c
	b.mu.Unlock()
	if c == nil {
		return net.ErrClosed
	}
	mp := b.msgs.Get().(*[]xdpnet.Message)
	defer b.msgs.Put(mp)
	if len(*mp) < len(bufs) {
		*mp = make([]xdpnet.Message, len(bufs))
	}
	msgs := (*mp)[:len(bufs)]
	for i, buf := range bufs {
		msgs[i] = xdpnet.Message{Buf: buf, N: len(buf), Addr: e.AddrPort}
	}
	_, err := c.WriteBatch(msgs)
	for i := range msgs {
		msgs[i].Buf = nil
	}
	return err
}

// ParseEndpoint parses "ip:port" ("[ipv6]:port").
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, fmt.Errorf("wireguard endpoint %q: %w", s, err)
	}
	return &Endpoint{AddrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
}

// BatchSize is the most packets a ReceiveFunc fills, and Send takes.
func (b *Bind) BatchSize() int {
	if n := b.opts.Config.BatchSize; n > 0 {
		return n
	}
	return conn.IdealBatchSize
}

// PeekLookAtSocketFd4 returns the kernel socket's descriptor, which the
// conn holds on its port (for tools that look at the socket).
func (b *Bind) PeekLookAtSocketFd4() (int, error) { return b.peekFD() }

// PeekLookAtSocketFd6 is PeekLookAtSocketFd4: the socket is dual-stack.
func (b *Bind) PeekLookAtSocketFd6() (int, error) { return b.peekFD() }

func (b *Bind) peekFD() (int, error) {
	b.mu.Lock()
	c := b.c
	b.mu.Unlock()
	if c == nil {
		return -1, net.ErrClosed
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	err = rc.Control(func(f uintptr) { fd = int(f) })
	return fd, err
}

// Stats returns the conn's counters (zero when not open).
func (b *Bind) Stats() xdpnet.Stats {
	b.mu.Lock()
	c := b.c
	b.mu.Unlock()
	if c == nil {
		return xdpnet.Stats{}
	}
	return c.Stats()
}
