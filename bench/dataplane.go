package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/xdpio/xdpio/coalesce"
)

// Message is one UDP datagram in a batch: the payload (without IP and UDP
// headers) and the peer's address.
type Message struct {
	// Buf holds the payload: on write the first N bytes are sent; on read
	// the datagram is copied into it and N set.
	Buf []byte
	N   int
	// Addr is the peer: the destination on write (ignored by a connected
	// PacketConn), the source on read.
	Addr netip.AddrPort
}

// PacketConn is one endpoint of the data plane: UDP datagrams in batches.
// A PacketConn is used by one goroutine at a time, except Close, which
// unblocks a blocked call.
type PacketConn interface {
	// ReadBatch receives up to len(msgs) datagrams, blocking until at
	// least one arrives or the read deadline passes (an error satisfying
	// os.ErrDeadlineExceeded).
	ReadBatch(msgs []Message) (int, error)
	// WriteBatch sends msgs in order and returns how many were sent. A
	// full queue returns the count so far with a nil error or
	// ErrBackpressure, and the caller retries the rest later; or the call
	// waits until there is room (XSKDataPlane), which Close ends.
	WriteBatch(msgs []Message) (int, error)
	// SetReadDeadline bounds ReadBatch calls; the zero time removes it.
	SetReadDeadline(t time.Time) error
	// LocalAddr is the endpoint's own address.
	LocalAddr() netip.AddrPort
	// Close releases the endpoint.
	Close() error
}

// DataPlane opens the endpoints a test's UDP streams run on. The kernel
// socket implementation is SocketDataPlane; an AF_XDP one plugs in here.
type DataPlane interface {
	// Listen opens the server's endpoint on local (the port of the
	// control connection). All streams of a test arrive on it and are
	// told apart by their source address.
	Listen(local netip.AddrPort) (PacketConn, error)
	// Dial opens a client stream's endpoint towards remote, with its own
	// source port.
	Dial(remote netip.AddrPort) (PacketConn, error)
}

// MultiQueueConn is a PacketConn whose datagrams arrive on several
// receive queues that can each be read on their own, without copying:
// AF_XDP, with one socket per RX queue. A receiving end runs one goroutine
// per reader over it instead of one ReadBatch loop, so the queues are read
// in parallel and each datagram is looked at where the kernel put it.
// ReadBatch reads the same readers (copying), so that a conn can be read
// with ReadBatch first (stream setup) and with its QueueReaders then.
type MultiQueueConn interface {
	PacketConn
	// QueueReaders returns the conn's readers: one per receive queue, in
	// queue order, and after them, if the conn has one, the reader of
	// its kernel socket (KernelSocketQueue); or a single reader of
	// everything (Queue -1). Every reader must be read: datagrams of one
	// that is not are not received.
	QueueReaders() []QueueReader
}

// KernelSocketQueue is QueueReader.Queue of the reader of the kernel UDP
// socket an AF_XDP endpoint holds on its address (package xdpnet's): the
// datagrams that reach the kernel instead of an AF_XDP socket (IPv4
// fragments, which the kernel reassembles; datagrams on queues without a
// socket) are read from it.
const KernelSocketQueue = -2

// QueueReader reads the datagrams of one receive queue in place. It is
// used by one goroutine.
type QueueReader interface {
	// Queue is the receive queue's number, -1 for a reader of every
	// queue, or KernelSocketQueue.
	Queue() int
	// ReadView fills msgs with up to len(msgs) datagrams, blocking up to
	// timeout until one arrives (0 datagrams and a nil error when it
	// passes). Buf of each message aliases the receive ring's frame: it
	// stays valid until the next ReadView or Done call on this reader,
	// which give the frames back to the kernel. After the conn is closed
	// it returns an error matching net.ErrClosed.
	ReadView(msgs []Message, timeout time.Duration) (int, error)
	// Done gives back the frames of the last ReadView. The frames a
	// reader holds stay valid, also across the conn's Close, until Done
	// or the next ReadView.
	Done()
}

// QueueCount is what one RX queue's socket received during a test.
type QueueCount struct {
	Queue int `json:"queue"`
	// Packets and Bytes are the frames the socket took from its RX ring
	// (what RSS and the XDP filter steered to the queue), delivered or
	// not.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Dropped is what the kernel could not deliver to the socket
	// (rx_dropped + rx_ring_full).
	Dropped uint64 `json:"dropped"`
	// Refused is the frames the socket took that carried no datagram for
	// the endpoint and were not delivered (package xdpnet's Drops: bad
	// or unfinished checksums, malformed frames, other ports), when the
	// data plane checks them.
	Refused uint64 `json:"refused,omitempty"`
	// Coalesce is the queue's software coalescing counters (batches,
	// frames per batch, wake-ups, the delay frames waited), when the data
	// plane coalesced.
	Coalesce *coalesce.RxStats `json:"coalesce,omitempty"`
}

// ErrBackpressure reports that a send queue is full.
var ErrBackpressure = errors.New("send queue full")

// SocketDataPlane is the kernel UDP data plane: one socket per endpoint,
// batches through recvmmsg and sendmmsg.
type SocketDataPlane struct {
	// Do, if set, runs the socket creation (for example in a network
	// namespace, as netnstest.Host.Do). Nil runs it directly.
	Do func(func() error) error
	// BufferSize is the SO_RCVBUF and SO_SNDBUF wanted; 0 means 4 MiB. As
	// root the kernel's rmem_max/wmem_max limits are bypassed.
	BufferSize int
	// Placer, if set, chooses each dialled stream's source port so it
	// lands on a chosen RX queue of the server's NIC.
	Placer *Placer
}

func (d *SocketDataPlane) run(fn func() error) error {
	if d.Do != nil {
		return d.Do(fn)
	}
	return fn()
}

// Listen opens an unconnected UDP socket bound to local.
func (d *SocketDataPlane) Listen(local netip.AddrPort) (PacketConn, error) {
	var c *net.UDPConn
	err := d.run(func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen udp %v: %w", local, err)
	}
	return newSocketConn(c, false, d.BufferSize), nil
}

// Dial opens a UDP socket connected to remote.
func (d *SocketDataPlane) Dial(remote netip.AddrPort) (PacketConn, error) {
	var c *net.UDPConn
	err := d.run(func() error {
		var err error
		var laddr *net.UDPAddr
		if d.Placer != nil {
			// The source address is the route's: learn it from a socket
			// the kernel binds, then bind the placed port on it.
			probe, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(remote))
			if err != nil {
				return err
			}
			src := probe.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
			probe.Close()
			port, _, err := d.Placer.port(src, remote, 0, 0)
			if err != nil {
				return err
			}
			laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, port))
		}
		c, err = net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(remote))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial udp %v: %w", remote, err)
	}
	return newSocketConn(c, true, d.BufferSize), nil
}

type batcher interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

type socketConn struct {
	c         *net.UDPConn
	b         batcher
	connected bool
	local     netip.AddrPort
	rms, wms  []ipv4.Message
	addrs     map[netip.AddrPort]*net.UDPAddr
	closeOnce sync.Once
}

func newSocketConn(c *net.UDPConn, connected bool, bufSize int) *socketConn {
	if bufSize <= 0 {
		bufSize = 4 << 20
	}
	setBuffers(c, bufSize)
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	s := &socketConn{c: c, connected: connected, local: local, addrs: map[netip.AddrPort]*net.UDPAddr{}}
	if local.Addr().Unmap().Is4() {
		s.b = ipv4.NewPacketConn(c)
	} else {
		s.b = ipv6.NewPacketConn(c)
	}
	return s
}

// setBuffers asks for size bytes of socket buffer, forcing past the sysctl
// limits when privileged, else taking what the kernel allows.
func setBuffers(c *net.UDPConn, size int) {
	rc, err := c.SyscallConn()
	if err == nil {
		rc.Control(func(fd uintptr) {
			if forceBuffer(fd, true, size) != nil {
				c.SetReadBuffer(size)
			}
			if forceBuffer(fd, false, size) != nil {
				c.SetWriteBuffer(size)
			}
		})
	}
}

func (s *socketConn) ReadBatch(msgs []Message) (int, error) {
	if len(s.rms) < len(msgs) {
		s.rms = make([]ipv4.Message, len(msgs))
		for i := range s.rms {
			s.rms[i].Buffers = make([][]byte, 1)
		}
	}
	ms := s.rms[:len(msgs)]
	for i := range ms {
		ms[i].Buffers[0] = msgs[i].Buf
	}
	n, err := s.b.ReadBatch(ms, 0)
	for i := 0; i < n; i++ {
		msgs[i].N = ms[i].N
		if a, ok := ms[i].Addr.(*net.UDPAddr); ok {
			msgs[i].Addr = a.AddrPort()
		}
	}
	if err != nil {
		return n, fmt.Errorf("recvmmsg: %w", err)
	}
	return n, nil
}

func (s *socketConn) WriteBatch(msgs []Message) (int, error) {
	if len(s.wms) < len(msgs) {
		s.wms = make([]ipv4.Message, len(msgs))
		for i := range s.wms {
			s.wms[i].Buffers = make([][]byte, 1)
		}
	}
	ms := s.wms[:len(msgs)]
	for i := range ms {
		ms[i].Buffers[0] = msgs[i].Buf[:msgs[i].N]
		ms[i].Addr = nil
		if !s.connected {
			a, ok := s.addrs[msgs[i].Addr]
			if !ok {
				a = net.UDPAddrFromAddrPort(msgs[i].Addr)
				s.addrs[msgs[i].Addr] = a
			}
			ms[i].Addr = a
		}
	}
	n, err := s.b.WriteBatch(ms, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) {
			return n, ErrBackpressure
		}
		return n, fmt.Errorf("sendmmsg: %w", err)
	}
	return n, nil
}

func (s *socketConn) SetReadDeadline(t time.Time) error { return s.c.SetReadDeadline(t) }
func (s *socketConn) LocalAddr() netip.AddrPort         { return s.local }
func (s *socketConn) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.c.Close() })
	return err
}
