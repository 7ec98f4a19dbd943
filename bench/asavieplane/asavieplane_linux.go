//go:build linux

package asavieplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	asavie "github.com/asavie/xdp"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/asaviefix"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xsk"
)

// DataPlane carries a test's UDP streams over AF_XDP sockets of
// github.com/asavie/xdp v0.3.3, the Go AF_XDP library xdpio is compared
// with. It has the shape of xskplane.DataPlane, so the two run the same tests
// side by side: one asavie socket (with its own UMEM) per RX queue of
// Iface, received frames checked and parsed, and replies built, by the
// same checks as xskplane.DataPlane's (package offload's parser, checksum
// verdicts and builder, accepting the same unfinished checksums), and the next
// hop from the kernel's route and neighbour tables (package
// internal/nexthop, as xdpnet's).
//
// The sockets are driven the way asavie's documentation shows: Fill the
// fill ring with GetDescs, Receive, Transmit descriptors from GetDescs,
// Complete, and poll the socket's FD when there is nothing to do. It is
// made as fair as the library allows: the same ring sizes, UMEM size and
// batch (64 descriptors) as xskplane.DataPlane's defaults, the fill ring topped
// up once a batch of slots is free rather than before every receive, and
// poll only when every ring is empty.
//
// The XDP program is xdpio's (xsk.NewProgram), with asavie's sockets put
// into its XSKMAP: asavie's own program (asavie.NewProgram) redirects
// every frame of a queue, the iperf3 control connection, ARP and
// neighbour discovery included, which would break the test; the filtering
// variant of its examples matches on the IP protocol only. It also
// attaches through the legacy netlink call after removing whatever
// program the interface had. With the same program in front of both
// backends, the comparison measures the socket libraries alone; the
// program is attached through a bpf_link, so it goes away with the
// process.
//
// asavie/xdp v0.3.3 leaves its rings mapped when a socket is closed;
// Close releases them with package internal/asaviefix. It also leaks the
// rings (and the UMEM's pinned pages) of a socket whose bind fails, which
// asaviefix.NewSocket cleans up.
type DataPlane struct {
	// Iface is the interface to bind to.
	Iface string
	// Do, if set, runs the socket setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// Options are asavie's per-socket options. Zero fields take
	// xskplane.DataPlane's defaults: 4096 frames of 4096 bytes and rings of 2048
	// descriptors.
	Options asavie.SocketOptions
	// Batch is the most descriptors taken from the RX ring or put on the
	// TX ring at once, and the number of free fill-ring slots that
	// triggers a refill. Default 64, the engine's batch.
	Batch int
	// Attach chooses where the XDP program runs (xsk.AttachAuto: driver
	// mode, else generic).
	Attach xsk.AttachMode
	// OnClose, if set, is called when a server endpoint or the client's
	// shared sockets close, with what each RX queue's socket received
	// (from asavie's Stats: frames taken from the RX ring, and the
	// kernel's rx_dropped + rx_ring_full), in queue order.
	OnClose func([]plane.QueueCount)
	// Placer, if set, chooses each dialled stream's source port (within
	// the client's block of 256) so it lands on a chosen RX queue of the
	// server's NIC, as xskplane.DataPlane.Placer does.
	Placer plane.Placer

	cmu    sync.Mutex
	client *asavieShared
}

func (d *DataPlane) options() (asavie.SocketOptions, int, error) {
	o := d.Options
	def := func(v *int, n int) {
		if *v == 0 {
			*v = n
		}
	}
	def(&o.NumFrames, 4096)
	def(&o.FrameSize, 4096)
	def(&o.FillRingNumDescs, 2048)
	def(&o.CompletionRingNumDescs, 2048)
	def(&o.RxRingNumDescs, 2048)
	def(&o.TxRingNumDescs, 2048)
	batch := d.Batch
	if batch == 0 {
		batch = plane.BatchSize
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"fill ring", o.FillRingNumDescs}, {"completion ring", o.CompletionRingNumDescs}, {"RX ring", o.RxRingNumDescs}, {"TX ring", o.TxRingNumDescs}} {
		if f.v < 0 || f.v&(f.v-1) != 0 {
			return o, 0, fmt.Errorf("asavie: %s size %d: must be a power of two: %w", f.name, f.v, errs.ErrNotSupported)
		}
	}
	if o.FrameSize < 2048 || o.FrameSize > os.Getpagesize() || o.FrameSize&(o.FrameSize-1) != 0 {
		return o, 0, fmt.Errorf("asavie: frame size %d: must be a power of two from 2048 to the page size: %w", o.FrameSize, errs.ErrNotSupported)
	}
	if o.NumFrames < o.FillRingNumDescs+batch {
		return o, 0, fmt.Errorf("asavie: %d frames: need at least the fill ring (%d) plus a batch (%d): %w", o.NumFrames, o.FillRingNumDescs, batch, errs.ErrNotSupported)
	}
	if batch <= 0 || batch > o.RxRingNumDescs || batch > o.TxRingNumDescs {
		return o, 0, fmt.Errorf("asavie: batch %d: must be between 1 and the RX and TX ring sizes: %w", batch, errs.ErrNotSupported)
	}
	return o, batch, nil
}

// asavieSock is one asavie socket and what this package keeps about it.
// mu serialises every use of s: asavie's frame bookkeeping is shared by
// its RX and TX paths and not safe for concurrent use.
type asavieSock struct {
	s     *asavie.Socket
	fd    int
	queue int
	batch int
	txMax int

	mu sync.Mutex
	// rx holds the descriptors of the last Receive; next of them have
	// been handed out. asavie counts a frame free as soon as Receive
	// returns it, so frames in rx are kept out of Fill (by refilling only
	// before the next Receive) and out of TX (by skipping them).
	rx    []asavie.Desc
	next  int
	bytes uint64
}

// receive tops the fill ring up and takes up to max frames from the RX
// ring. The caller holds a.mu and has handed out all of a.rx.
func (a *asavieSock) receive(max int) {
	if free := a.s.NumFreeFillSlots(); free >= a.batch {
		a.s.Fill(a.s.GetDescs(free))
	}
	a.rx = append(a.rx[:0], a.s.Receive(max)...)
	a.next = 0
	for _, d := range a.rx {
		a.bytes += uint64(d.Len)
	}
}

// receiving reports whether frame addr is one of a.rx's.
func (a *asavieSock) receiving(addr uint64, frameSize uint64) bool {
	for _, d := range a.rx {
		if d.Addr/frameSize == addr/frameSize {
			return true
		}
	}
	return false
}

// send builds up to len(msgs) frames with build and transmits them, a
// batch at a time; it returns how many were queued for the kernel. The
// caller holds a.mu.
func (a *asavieSock) send(n int, frameSize uint64, build func(i int, frame []byte) (int, error)) (sent int, err error) {
	defer func() {
		// asavie panics when sendto fails with anything but EINTR,
		// EAGAIN or EBUSY.
		if p := recover(); p != nil {
			err = fmt.Errorf("asavie transmit on queue %d: %v", a.queue, p)
		}
	}()
	if c := a.s.NumCompleted(); c > 0 {
		a.s.Complete(c)
	}
	for sent < n {
		k := min(n-sent, a.batch, a.s.NumFreeTxSlots())
		if k == 0 {
			return sent, plane.ErrBackpressure
		}
		descs := a.s.GetDescs(k + len(a.rx))
		j := 0
		for _, d := range descs {
			if j < k && (len(a.rx) == 0 || !a.receiving(d.Addr, frameSize)) {
				descs[j] = d
				j++
			}
		}
		descs = descs[:j]
		if len(descs) == 0 {
			return sent, plane.ErrBackpressure // every frame is in flight
		}
		for i := range descs {
			l, err := build(sent+i, a.s.GetFrame(descs[i]))
			if err != nil {
				return sent, err
			}
			descs[i].Len = uint32(l)
		}
		// Transmit kicks once; in copy mode a kick sends at most the
		// kernel's TX budget (32 frames). Kick on while the kernel takes
		// frames, so that the batch leaves now: with one kick per batch
		// (xsk.Socket.Transmit's behaviour without TXBudget) the rest
		// waits for the next send, which a paced sender makes late and
		// the last batch of a test makes too late for the peer (it
		// arrives after iperf3 closed its socket), and a sender at full
		// speed fills the TX ring and backs off.
		done := a.s.Transmit(descs)
		a.kick()
		sent += done
		if done < len(descs) {
			return sent, plane.ErrBackpressure
		}
	}
	return sent, nil
}

// kick has the kernel send what is on the TX ring. In copy mode one
// sendto sends at most a budget of frames (32 by default) and asavie's
// Transmit kicks once: without more kicks the rest of a batch would wait
// for the next Transmit. Transmit of no descriptors is asavie's kick.
func (a *asavieSock) kick() {
	for free := a.s.NumFreeTxSlots(); free < a.txMax; {
		a.s.Transmit(nil)
		now := a.s.NumFreeTxSlots()
		if now == free {
			return // the device is busy; the next send kicks again
		}
		free = now
	}
}

// openAsavie opens one asavie socket per RX queue of iface and xdpio's XDP
// program with filter, registering the sockets in its XSKMAP. The caller
// runs it in the interface's namespace.
func (d *DataPlane) openAsavie(ifi *net.Interface, filter []xsk.Rule) (_ *asavieSet, err error) {
	opts, batch, err := d.options()
	if err != nil {
		return nil, err
	}
	nq, err := nic.RXQueues(ifi.Name)
	if err != nil {
		return nil, err
	}
	set := &asavieSet{frameSize: uint64(opts.FrameSize)}
	defer func() {
		if err != nil {
			set.close()
		}
	}()
	for q := 0; q < nq; q++ {
		s, err := openAsavieSocket(ifi.Index, q, &opts)
		if err != nil {
			return nil, fmt.Errorf("asavie socket on queue %d: %w", q, err)
		}
		set.socks = append(set.socks, &asavieSock{s: s, fd: s.FD(), queue: q, batch: batch, txMax: opts.TxRingNumDescs})
		// Frames for the kernel to receive into before the first read.
		s.Fill(s.GetDescs(s.NumFreeFillSlots()))
	}
	set.prog, err = xsk.NewProgram(ifi.Index, xsk.ProgramConfig{Filter: filter, Attach: d.Attach})
	if err != nil {
		return nil, err
	}
	set.xsks, err = xskMapOf(set.prog)
	if err != nil {
		return nil, err
	}
	for _, a := range set.socks {
		if err := set.xsks.Put(uint32(a.queue), uint32(a.fd)); err != nil {
			return nil, fmt.Errorf("register asavie socket of queue %d in the XSKMAP: %w", a.queue, err)
		}
	}
	return set, nil
}

// openAsavieSocket is asavie.NewSocket (through asaviefix, which cleans up
// after a failed call), retried for up to 3 s while bind says EBUSY: the
// kernel releases the previous socket on the queue (of another backend,
// or of Check, just before) from a work queue, which a loaded machine
// runs late. Each attempt maps, populates and registers a whole UMEM, so
// the waits double from 20 ms. asavie formats its errors with %v, so the
// errno is only in the text: a refused privilege becomes
// xsk.ErrPermission, a queue that stays busy xsk.ErrBusy, here and
// nowhere else.
func openAsavieSocket(ifindex, queue int, opts *asavie.SocketOptions) (*asavie.Socket, error) {
	deadline := time.Now().Add(3 * time.Second)
	wait := 20 * time.Millisecond
	for {
		s, err := asaviefix.NewSocket(ifindex, queue, opts)
		if err == nil {
			return s, nil
		}
		text := err.Error()
		switch {
		case strings.Contains(text, unix.EPERM.Error()), strings.Contains(text, unix.EACCES.Error()):
			return nil, fmt.Errorf("%w: %w", xsk.ErrPermission, err)
		case strings.Contains(text, unix.EBUSY.Error()):
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("another AF_XDP socket holds the queue: %w: %w", xsk.ErrBusy, err)
			}
			time.Sleep(min(wait, time.Until(deadline)+time.Millisecond))
			wait = min(2*wait, 500*time.Millisecond)
		default:
			return nil, err
		}
	}
}

// xskMapOf returns the XSKMAP of a loaded program, as the kernel lists the
// program's maps. (xsk.Program registers only xsk.Sockets.)
func xskMapOf(p *xsk.Program) (*ebpf.Map, error) {
	id, err := p.ProgramID()
	if err != nil {
		return nil, fmt.Errorf("XDP program ID: %w", err)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("XDP program %d: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("XDP program %d info: %w", id, err)
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return nil, fmt.Errorf("map %d of XDP program %d: %w", mid, id, err)
		}
		if m.Type() == ebpf.XSKMap {
			return m, nil
		}
		m.Close()
	}
	return nil, fmt.Errorf("XDP program %d has no XSKMAP", id)
}

// asavieSet is the sockets of all queues and the program feeding them.
type asavieSet struct {
	socks     []*asavieSock
	prog      *xsk.Program
	xsks      *ebpf.Map
	frameSize uint64
}

// counts returns each queue's counts. No socket may be in use.
func (set *asavieSet) counts() []plane.QueueCount {
	var qs []plane.QueueCount
	for _, a := range set.socks {
		st, err := a.s.Stats()
		if err != nil {
			continue
		}
		qs = append(qs, plane.QueueCount{Queue: a.queue, Packets: st.Received, Bytes: a.bytes,
			Dropped: st.KernelStats.Rx_dropped + st.KernelStats.Rx_ring_full})
	}
	return qs
}

// drain kicks the kernel until everything transmitted has completed, or
// for at most 100 ms. The TX ring being empty is not enough: in copy mode
// the kernel may have taken a frame off the ring into an skb that the
// device refused for now (veth with a full peer ring answers busy), which
// it sends at the next kick; closing the socket first loses that frame
// without a trace in any counter.
func (a *asavieSock) drain() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("asavie transmit on queue %d: %v", a.queue, p)
		}
	}()
	done := func() bool {
		if c := a.s.NumCompleted(); c > 0 {
			a.s.Complete(c)
		}
		st, err := a.s.Stats()
		return err != nil || st.Completed >= st.Transmitted
	}
	for deadline := time.Now().Add(100 * time.Millisecond); !done() && time.Now().Before(deadline); {
		a.s.Transmit(nil) // a kick
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// close sends what is left on the TX rings, detaches the program and
// closes the sockets. No socket may be in use.
func (set *asavieSet) close() error {
	var errs []error
	for _, a := range set.socks {
		errs = append(errs, a.drain())
	}
	if set.prog != nil {
		errs = append(errs, set.prog.Close())
	}
	if set.xsks != nil {
		errs = append(errs, set.xsks.Close())
	}
	for _, a := range set.socks {
		errs = append(errs, asaviefix.Close(a.s))
	}
	return errors.Join(errs...)
}

// Check opens the asavie sockets and the XDP program on Iface once and
// closes them again, so that a missing interface, privilege or kernel
// feature, or queues held by another program, is reported when a server
// starts rather than when its first test arrives. Between the two, UDP to
// the discard port (9) of Iface goes to the sockets.
func (d *DataPlane) Check() error {
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		set, err := d.openAsavie(ifi, []xsk.Rule{xsk.UDPPort(9)})
		if err != nil {
			return err
		}
		return set.close()
	})
	if err != nil {
		return fmt.Errorf("asavie on %s: %w", d.Iface, err)
	}
	return nil
}

// newResolver opens a next-hop resolver for ifi in the calling thread's
// namespace.
func newResolver(ifi *net.Interface) (*nexthop.Resolver, error) {
	r, err := nexthop.New(ifi.Index, nexthop.Options{})
	if err != nil {
		return nil, fmt.Errorf("next-hop resolver for %s: %w", ifi.Name, err)
	}
	return r, nil
}

// asavieHop returns the cached hop to dst, or asks the kernel for it.
func asavieHop(r *nexthop.Resolver, dst netip.Addr) (nexthop.Hop, error) {
	if hop, ok := r.Lookup(dst); ok {
		return hop, nil
	}
	return r.Resolve(context.Background(), dst) // bounded by the resolver's ResolveTimeout
}

// Listen opens asavie sockets on every queue of Iface for UDP to local's
// port.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	c := &asavieConn{local: local, onClose: d.OnClose}
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		c.mac = ifi.HardwareAddr
		if c.res, err = newResolver(ifi); err != nil {
			return err
		}
		if c.set, err = d.openAsavie(ifi, []xsk.Rule{xsk.UDPPort(local.Port())}); err != nil {
			c.res.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("asavie listen %s %v: %w", d.Iface, local, err)
	}
	for _, a := range c.set.socks {
		c.fds = append(c.fds, unix.PollFd{Fd: int32(a.fd)})
	}
	return c, nil
}

// asavieConn is a server endpoint: datagrams from every queue's socket,
// replies through queue 0's.
type asavieConn struct {
	set   *asavieSet
	local netip.AddrPort
	mac   net.HardwareAddr
	res   *nexthop.Resolver // the next hops of replies
	macs  []net.HardwareAddr
	fds   []unix.PollFd
	turn  int

	mu       sync.Mutex
	deadline time.Time
	closed   atomic.Bool
	// life keeps Close from unmapping the sockets while a call, or a
	// queue reader's view, uses them.
	life    sync.RWMutex
	onClose func([]plane.QueueCount)
	notUDP  atomic.Uint64
}

func (c *asavieConn) LocalAddr() netip.AddrPort { return c.local }

func (c *asavieConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// ReadBatch takes datagrams from the sockets in turn, copying each UDP
// payload into msgs, and waits in poll on all of them when none has any.
func (c *asavieConn) ReadBatch(msgs []plane.Message) (int, error) {
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		n := 0
		socks := c.set.socks
		for i := 0; i < len(socks) && n < len(msgs); i++ {
			a := socks[(c.turn+i)%len(socks)]
			a.mu.Lock()
			if a.next == len(a.rx) {
				a.receive(min(a.batch, len(msgs)-n))
			}
			for ; a.next < len(a.rx) && n < len(msgs); a.next++ {
				d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
				ok = ok && d.dst.Port() == c.local.Port()
				if !ok {
					c.notUDP.Add(1)
					continue
				}
				msgs[n].N = copy(msgs[n].Buf, d.payload)
				msgs[n].Addr = d.src
				n++
			}
			a.mu.Unlock()
		}
		c.turn++
		c.life.RUnlock()
		if n > 0 {
			return n, nil
		}
		c.mu.Lock()
		deadline := c.deadline
		c.mu.Unlock()
		wait, err := readWait(deadline, 20*time.Millisecond)
		if err != nil {
			return 0, err
		}
		if err := pollIn(c.fds, wait); err != nil {
			if c.closed.Load() {
				return 0, net.ErrClosed
			}
			return 0, fmt.Errorf("asavie read: poll: %w", err)
		}
	}
}

// QueueReaders returns a reader per RX queue's socket, so that the engine
// reads asavie's queues in parallel and in place, as it reads
// xskplane.DataPlane's.
func (c *asavieConn) QueueReaders() []plane.QueueReader {
	qs := make([]plane.QueueReader, len(c.set.socks))
	for i, a := range c.set.socks {
		qs[i] = &asavieQueueReader{c: c, a: a}
	}
	return qs
}

// asavieQueueReader reads one queue's socket in place. While it holds
// frames it holds c.life for reading, so Close waits until they are given
// back.
type asavieQueueReader struct {
	c    *asavieConn
	a    *asavieSock
	held bool
	fds  [1]unix.PollFd
}

func (q *asavieQueueReader) Queue() int { return q.a.queue }

func (q *asavieQueueReader) Done() {
	if q.held {
		q.held = false
		q.c.life.RUnlock()
	}
}

func (q *asavieQueueReader) ReadView(msgs []plane.Message, timeout time.Duration) (int, error) {
	q.Done()
	c, a := q.c, q.a
	var deadline time.Time
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		a.mu.Lock()
		if a.next == len(a.rx) {
			a.receive(a.batch)
		}
		n := 0
		for ; a.next < len(a.rx) && n < len(msgs); a.next++ {
			d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
			ok = ok && d.dst.Port() == c.local.Port()
			if !ok {
				c.notUDP.Add(1)
				continue
			}
			msgs[n] = plane.Message{Buf: d.payload, N: len(d.payload), Addr: d.src}
			n++
		}
		a.mu.Unlock()
		if n > 0 {
			q.held = true
			return n, nil
		}
		c.life.RUnlock()
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, nil
		}
		q.fds[0].Fd = int32(a.fd)
		if err := pollIn(q.fds[:], min(left, 20*time.Millisecond)); err != nil {
			if c.closed.Load() {
				return 0, net.ErrClosed
			}
			return 0, fmt.Errorf("asavie read queue %d: poll: %w", a.queue, err)
		}
	}
}

// WriteBatch builds each datagram in a UMEM frame of queue 0's socket and
// transmits them.
func (c *asavieConn) WriteBatch(msgs []plane.Message) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	// The next hops first (from the resolver's cache; a missing one is
	// resolved by the kernel), before queue 0's socket is taken from its
	// reader.
	c.macs = c.macs[:0]
	for _, m := range msgs {
		hop, err := asavieHop(c.res, m.Addr.Addr())
		if err != nil {
			return 0, fmt.Errorf("asavie write to %v: %w", m.Addr, err)
		}
		c.macs = append(c.macs, hop.MAC)
	}
	a := c.set.socks[0]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.send(len(msgs), c.set.frameSize, func(i int, frame []byte) (int, error) {
		m := msgs[i]
		return buildFrame(frame, c.mac, c.macs[i], c.local, m.Addr, m.Buf[:m.N])
	})
}

func (c *asavieConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.life.Lock()
	defer c.life.Unlock()
	if c.onClose != nil {
		c.onClose(c.set.counts())
	}
	defer c.res.Close()
	return c.set.close()
}

// Client ports of the asavie data plane: a block of asaviePorts below
// Linux's default ephemeral range (32768-60999), so the XDP filter does
// not take the kernel's own sockets' replies. (xskplane.DataPlane's client has
// xdpnet pick and reserve its block.)
const (
	asaviePortLow  = 20000
	asaviePortHigh = 32000
	asaviePorts    = 256
)

// asaviePortBlock is what the asavie client's streams share apart from
// the sockets: the interface's MAC and the block of source ports its XDP
// filter takes, handed out one per stream.
type asaviePortBlock struct {
	iface string
	mac   net.HardwareAddr
	base  uint16
	next  int
}

// newAsaviePortBlock picks a block of asaviePorts ports at random between
// asaviePortLow and asaviePortHigh.
func newAsaviePortBlock(iface string) asaviePortBlock {
	return asaviePortBlock{iface: iface,
		base: uint16(asaviePortLow + rand.IntN((asaviePortHigh-asaviePortLow)/asaviePorts)*asaviePorts)}
}

// filter is the XDP rule that takes UDP to the block.
func (b *asaviePortBlock) filter() []xsk.Rule {
	return []xsk.Rule{{Protocol: unix.IPPROTO_UDP, DstPortMin: b.base, DstPortMax: b.base + asaviePorts - 1}}
}

// port gives the next stream from src towards remote its port and the
// socket (TX queue, of queues) it sends from: the block's next port, or
// the plane.Placer's, whose queue it then sends from too (where a device has no
// RSS, as veth, the peer receives on the queue a frame was sent from).
// inUse reports ports streams hold.
func (b *asaviePortBlock) port(src netip.Addr, remote netip.AddrPort, queues int, placer plane.Placer, inUse func(uint16) bool) (port uint16, txq int, err error) {
	if b.next >= asaviePorts {
		return 0, 0, fmt.Errorf("all %d client ports in use: %w", asaviePorts, errs.ErrNotSupported)
	}
	port, txq = b.base+uint16(b.next), b.next%queues
	if placer != nil {
		p, q, err := placer.Port(src, remote, b.base, b.base+asaviePorts-1)
		if err != nil {
			return 0, 0, err
		}
		if inUse(p) {
			return 0, 0, fmt.Errorf("placed port %d is in use", p)
		}
		port, txq = p, int(q)%queues
	}
	b.next++
	return port, txq, nil
}

// asavieShared is the sockets a client's streams share, as xskShared is
// for xskplane.DataPlane: a block of source ports, each stream one of them.
type asavieShared struct {
	asaviePortBlock
	mu      sync.Mutex
	set     *asavieSet
	res     *nexthop.Resolver // the server's next hop
	fds     []unix.PollFd
	conns   map[uint16]*asavieClientConn
	stray   uint64
	refs    int
	closed  bool
	onClose func([]plane.QueueCount)
}

// Dial gives a client stream its own source port on the shared sockets,
// opening them on first use.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.client == nil {
		sh, err := d.openShared()
		if err != nil {
			return nil, fmt.Errorf("asavie dial %v: %w", remote, err)
		}
		d.client = sh
	}
	sh := d.client
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, err := d.dial(sh, remote)
	if err != nil && sh.refs == 0 {
		// No stream uses the sockets this call opened: close them, so
		// that no XDP program stays attached.
		sh.closed = true
		d.client = nil
		sh.close()
	}
	if err != nil {
		return nil, fmt.Errorf("asavie dial %v: %w", remote, err)
	}
	return c, nil
}

// dial adds a stream to sh, whose lock the caller holds.
func (d *DataPlane) dial(sh *asavieShared, remote netip.AddrPort) (plane.PacketConn, error) {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	// The server's next hop and the source address towards it: from the
	// kernel's route and neighbour tables, resolved through the kernel
	// when it has no entry yet.
	hop, err := sh.res.Resolve(context.Background(), remote.Addr())
	if err != nil {
		return nil, err
	}
	port, txq, err := sh.port(hop.Src, remote, len(sh.set.socks), d.Placer, func(p uint16) bool { return sh.conns[p] != nil })
	if err != nil {
		return nil, err
	}
	c := &asavieClientConn{d: d, sh: sh, local: netip.AddrPortFrom(hop.Src, port),
		remote: remote, txq: txq, fds: append([]unix.PollFd(nil), sh.fds...)}
	sh.refs++
	sh.conns[port] = c
	return c, nil
}

func (d *DataPlane) openShared() (*asavieShared, error) {
	sh := &asavieShared{asaviePortBlock: newAsaviePortBlock(d.Iface), conns: map[uint16]*asavieClientConn{}, onClose: d.OnClose}
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		sh.mac = ifi.HardwareAddr
		if sh.res, err = newResolver(ifi); err != nil {
			return err
		}
		if sh.set, err = d.openAsavie(ifi, sh.filter()); err != nil {
			sh.res.Close()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, a := range sh.set.socks {
		sh.fds = append(sh.fds, unix.PollFd{Fd: int32(a.fd)})
	}
	return sh, nil
}

// close closes the sockets and the resolver. No stream may use them.
func (sh *asavieShared) close() error {
	defer sh.res.Close()
	return sh.set.close()
}

// asavieClientConn is one client stream: a source port on the shared
// sockets, sending through the socket of queue txq, receiving what is
// routed to its port.
type asavieClientConn struct {
	d        *DataPlane
	sh       *asavieShared
	local    netip.AddrPort
	remote   netip.AddrPort
	txq      int
	in       link.Inbox
	fds      []unix.PollFd // the shared sockets', polled by this stream's reader
	deadline time.Time
	closed   bool
}

func (c *asavieClientConn) LocalAddr() netip.AddrPort { return c.local }

func (c *asavieClientConn) SetReadDeadline(t time.Time) error {
	c.sh.mu.Lock()
	c.deadline = t
	c.sh.mu.Unlock()
	return nil
}

// pump receives from every socket and routes datagrams to their streams.
// The caller holds sh.mu.
func (sh *asavieShared) pump() {
	for _, a := range sh.set.socks {
		a.mu.Lock()
		if a.next == len(a.rx) {
			a.receive(a.batch)
		}
		for ; a.next < len(a.rx); a.next++ {
			d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
			if !ok {
				sh.stray++
				continue
			}
			c := sh.conns[d.dst.Port()]
			if c == nil {
				sh.stray++
				continue
			}
			c.in.Push(d.src, d.payload)
		}
		a.mu.Unlock()
	}
}

func (c *asavieClientConn) ReadBatch(msgs []plane.Message) (int, error) {
	sh := c.sh
	for {
		sh.mu.Lock()
		if c.closed || sh.closed {
			sh.mu.Unlock()
			return 0, net.ErrClosed
		}
		if c.in.Len() == 0 {
			sh.pump()
		}
		n := c.in.Pop(msgs)
		deadline := c.deadline
		sh.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		wait, err := readWait(deadline, 5*time.Millisecond) // other streams' readers may take our frames
		if err != nil {
			return 0, err
		}
		if err := pollIn(c.fds, wait); err != nil {
			return 0, fmt.Errorf("asavie read: poll: %w", err)
		}
	}
}

func (c *asavieClientConn) WriteBatch(msgs []plane.Message) (int, error) {
	sh := c.sh
	// The next hop from the resolver's cache (the kernel's, when the
	// tables changed), before the shared sockets are taken.
	hop, err := asavieHop(sh.res, c.remote.Addr())
	if err != nil {
		return 0, fmt.Errorf("asavie write to %v: %w", c.remote, err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed || sh.closed {
		return 0, net.ErrClosed
	}
	a := sh.set.socks[c.txq]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.send(len(msgs), sh.set.frameSize, func(i int, frame []byte) (int, error) {
		m := msgs[i]
		return buildFrame(frame, sh.mac, hop.MAC, c.local, c.remote, m.Buf[:m.N])
	})
}

// Close releases the stream's port; the last one closes the sockets.
func (c *asavieClientConn) Close() error {
	c.d.cmu.Lock()
	defer c.d.cmu.Unlock()
	sh := c.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	delete(sh.conns, c.local.Port())
	sh.refs--
	if sh.refs > 0 {
		return nil
	}
	sh.closed = true
	if c.d.client == sh {
		c.d.client = nil
	}
	if sh.onClose != nil {
		sh.onClose(sh.set.counts())
	}
	return sh.close()
}

// pollIn waits up to d for any of fds to become readable.
func pollIn(fds []unix.PollFd, d time.Duration) error {
	for i := range fds {
		fds[i].Events, fds[i].Revents = unix.POLLIN, 0
	}
	ts := unix.NsecToTimespec(int64(d))
	if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	return nil
}

// readWait is how long a ReadBatch may wait in poll before it looks again:
// at most most, and no later than deadline (zero: none). A deadline that
// has passed gives os.ErrDeadlineExceeded.
func readWait(deadline time.Time, most time.Duration) (time.Duration, error) {
	if deadline.IsZero() {
		return most, nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return min(most, left), nil
}
