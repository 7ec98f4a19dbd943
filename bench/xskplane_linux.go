//go:build linux

package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// XSKDataPlane carries a server's UDP streams over AF_XDP: one socket per
// RX queue of Iface, fed by an XDP program that takes only UDP to the
// test's port, so the control connection and everything else stay with
// the kernel. Datagrams it sends (iperf3's stream setup replies, -R tests)
// are built in place in UMEM frames, with checksums filled by package
// offload and the peer's MAC address from the kernel's neighbour table.
//
// A client's streams (Dial) share one set of sockets on Iface, with an XDP
// filter for a block of source ports outside Linux's ephemeral range; each
// stream takes one port, and datagrams are routed to streams by it.
type XSKDataPlane struct {
	// Iface is the interface to bind to.
	Iface string
	// Do, if set, runs the socket setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// Config is the base socket configuration; Open's filter is set by
	// Listen.
	Config xsk.Config
	// OnClose, if set, is called when a server's endpoint or a client's
	// shared sockets close, with what each RX queue's socket received (all
	// frames the filter took, in queue order): the RSS spread of the test.
	OnClose func([]QueueCount)
	// Coalesce, if set, batches each RX queue of a server (Listen) in
	// software, the way NIC interrupt coalescing does (rx-usecs,
	// rx-frames, adaptive; package coalesce); its counters come with the
	// queue's count to OnClose. Nil hands frames over as soon as they are
	// there.
	Coalesce *coalesce.Params
	// OneReader has a server read every RX queue in one goroutine, which
	// waits on all the sockets at once (xsk.Poller; with Coalesce, one
	// coalesce.GroupReceiver for all the queues, whose counters come with
	// the first queue's count) instead of one goroutine per queue. On a
	// machine with fewer CPUs than queues that costs fewer wake-ups.
	OneReader bool
	// Placer, if set, chooses each dialled stream's source port (within
	// the client's block of 256) so it lands on a chosen RX queue of the
	// server's NIC.
	Placer *Placer

	cmu    sync.Mutex
	client *xskShared
}

func (d *XSKDataPlane) run(fn func() error) error {
	if d.Do != nil {
		return d.Do(fn)
	}
	return fn()
}

// txConfig is Config with a TX budget (frames one kick sends in copy
// mode) of at least the engine's batch, so one kick sends a whole batch.
func (d *XSKDataPlane) txConfig() xsk.Config {
	cfg := d.Config
	if cfg.Socket.TxBudget == 0 {
		cfg.Socket.TxBudget = batchSize
	}
	return cfg
}

// Check opens the AF_XDP sockets of Iface once and closes them again, so a
// missing interface, privilege or kernel feature is reported when a
// server starts rather than when its first test arrives. Between the two,
// UDP to the discard port (9) of Iface goes to the sockets.
func (d *XSKDataPlane) Check() error {
	cfg := d.Config
	cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(9)}
	err := d.run(func() error {
		dev, err := xsk.Open(d.Iface, cfg)
		if err != nil {
			return err
		}
		return dev.Close()
	})
	if err != nil {
		return fmt.Errorf("xsk on %s: %w", d.Iface, err)
	}
	return nil
}

// Listen opens sockets on every queue of Iface for UDP to local's port.
func (d *XSKDataPlane) Listen(local netip.AddrPort) (PacketConn, error) {
	cfg := d.txConfig()
	cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(local.Port())}
	c := &xskConn{local: local, onClose: d.OnClose}
	err := d.run(func() error {
		ifi, err := net.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		c.mac = ifi.HardwareAddr
		if c.dev, err = xsk.Open(d.Iface, cfg); err != nil {
			return err
		}
		// Read the neighbour table now, inside the namespace.
		c.ifindex = ifi.Index
		c.neigh, c.neighErr = neighbours(ifi.Index)
		return nil
	})
	c.do = d.run
	if err != nil {
		return nil, fmt.Errorf("xsk listen %s %v: %w", d.Iface, local, err)
	}
	for _, s := range c.dev.Sockets() {
		c.fds = append(c.fds, unix.PollFd{Fd: int32(s.FD())})
		r := rxState{s: s, b: s.NewBatch(64)}
		if d.Coalesce != nil && !d.OneReader {
			if r.rcv, err = coalesce.NewReceiver(s, *d.Coalesce, coalesce.Options{IdleWait: 20 * time.Millisecond}); err != nil {
				c.dev.Close()
				return nil, fmt.Errorf("xsk listen %s %v: %w", d.Iface, local, err)
			}
		}
		c.rx = append(c.rx, r)
	}
	switch {
	case d.OneReader && d.Coalesce != nil:
		if c.grp, err = coalesce.NewGroupReceiver(c.dev.Sockets(), *d.Coalesce, coalesce.Options{IdleWait: 20 * time.Millisecond}); err != nil {
			c.dev.Close()
			return nil, fmt.Errorf("xsk listen %s %v: %w", d.Iface, local, err)
		}
	case d.OneReader:
		c.poller = xsk.NewPoller(c.dev.Sockets()...)
	}
	c.tx = c.dev.Sockets()[0]
	c.txb = c.tx.NewBatch(64)
	return c, nil
}

type rxState struct {
	s    *xsk.Socket
	b    *xsk.Batch
	next int // frames of b already handed out
	// With coalescing, the queue readers take batches from rcv (cb,
	// cnext) once b, which ReadBatch fills during stream setup, is empty.
	rcv   *coalesce.Receiver
	cb    *xsk.Batch
	cnext int
}

type xskConn struct {
	dev      *xsk.Device
	local    netip.AddrPort
	mac      net.HardwareAddr
	ifindex  int
	do       func(func() error) error // runs fn in the interface's namespace
	neigh    map[netip.Addr]net.HardwareAddr
	neighErr error
	rx       []rxState
	fds      []unix.PollFd // the sockets', for ReadBatch (one caller at a time)
	// With OneReader, one reader for every queue takes its batches from
	// grp when coalescing, else waits on poller.
	poller *xsk.Poller
	grp    *coalesce.GroupReceiver
	turn   int
	tx     *xsk.Socket
	txb    *xsk.Batch

	mu       sync.Mutex
	deadline time.Time
	closed   atomic.Bool
	// life keeps Close from unmapping the UMEM while ReadBatch or
	// WriteBatch reads or writes frames in it.
	life    sync.RWMutex
	onClose func([]QueueCount)
	// NotUDP counts frames the sockets got that were not UDP to our port
	// (none should come: the XDP filter selects them).
	notUDP atomic.Uint64
}

// neighbours reads the kernel's neighbour table of an interface (in the
// calling thread's namespace): the MAC of every usable entry.
func neighbours(ifindex int) (map[netip.Addr]net.HardwareAddr, error) {
	m := map[netip.Addr]net.HardwareAddr{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		ns, err := netlink.NeighList(ifindex, fam)
		if err != nil {
			return m, fmt.Errorf("neighbour table: %w", err)
		}
		for _, n := range ns {
			ip, ok := netip.AddrFromSlice(n.IP)
			if ok && len(n.HardwareAddr) == 6 && n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) == 0 {
				m[ip.Unmap()] = n.HardwareAddr
			}
		}
	}
	return m, nil
}

func (c *xskConn) LocalAddr() netip.AddrPort { return c.local }

func (c *xskConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// ReadBatch takes datagrams from the sockets in turn, copying each UDP
// payload into msgs, and waits in poll on all of them when none has any.
func (c *xskConn) ReadBatch(msgs []Message) (int, error) {
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		n := 0
		for i := 0; i < len(c.rx) && n < len(msgs); i++ {
			r := &c.rx[(c.turn+i)%len(c.rx)]
			if r.next == r.b.Len() {
				r.s.Release(r.b)
				r.next = 0
				r.s.Receive(r.b)
			}
			for ; r.next < r.b.Len() && n < len(msgs); r.next++ {
				if c.parse(r.b.Frame(r.next), &msgs[n]) {
					n++
				} else {
					c.notUDP.Add(1)
				}
			}
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
			return 0, fmt.Errorf("xsk read: poll: %w", err)
		}
	}
}

// QueueReaders returns a reader per RX queue's socket: the engine reads
// the queues in parallel and counts datagrams in the UMEM frames.
func (c *xskConn) QueueReaders() []QueueReader {
	if c.poller != nil || c.grp != nil {
		return []QueueReader{&xskGroupReader{viewReader: viewReader{c: c}}}
	}
	qs := make([]QueueReader, len(c.rx))
	for i := range c.rx {
		qs[i] = &xskQueueReader{viewReader: viewReader{c: c}, r: &c.rx[i]}
	}
	return qs
}

// viewReader is what the queue readers share: the hold on c.life while
// the caller has frames, the thread lock a coalescing policy wants, and
// the ReadView loop.
type viewReader struct {
	c      *xskConn
	held   bool
	unlock func() // undoes coalesce.LockThread
}

// viewSource is a reader's own part of ReadView: take datagrams (under
// c.life) and wait for more (outside it).
type viewSource interface {
	takeView(msgs []Message) int
	waitView(left time.Duration) error
}

func (v *viewReader) Done() {
	v.giveBack()
	if v.unlock != nil {
		v.unlock()
		v.unlock = nil
	}
}

// giveBack ends the caller's hold on the frames of the last ReadView.
func (v *viewReader) giveBack() {
	if v.held {
		v.held = false
		v.c.life.RUnlock()
	}
}

// readView is ReadView for src: it takes datagrams while holding c.life
// for reading (kept while the caller has them) and waits, up to timeout,
// until some come or the conn closes. lockThread wires the goroutine to
// its thread with a tight timer slack first, which a coalescing policy's
// timed sleeps want. queue names the queue in errors (-1: all).
func (v *viewReader) readView(src viewSource, msgs []Message, timeout time.Duration, lockThread bool, queue int) (int, error) {
	v.giveBack()
	c := v.c
	if lockThread && v.unlock == nil {
		if unlock, err := coalesce.LockThread(); err == nil {
			v.unlock = unlock
		}
	}
	var deadline time.Time
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		if n := src.takeView(msgs); n > 0 {
			v.held = true
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
		if err := src.waitView(left); err != nil {
			if c.closed.Load() || errors.Is(err, xsk.ErrClosed) {
				return 0, net.ErrClosed
			}
			if queue < 0 {
				return 0, fmt.Errorf("xsk read: %w", err)
			}
			return 0, fmt.Errorf("xsk read queue %d: %w", queue, err)
		}
	}
}

// xskQueueReader reads one queue's socket in place. While it holds frames
// it holds c.life for reading, so Close waits until they are given back.
type xskQueueReader struct {
	viewReader
	r *rxState
}

func (q *xskQueueReader) Queue() int { return q.r.s.Queue() }

func (q *xskQueueReader) ReadView(msgs []Message, timeout time.Duration) (int, error) {
	return q.readView(q, msgs, timeout, q.r.rcv != nil, q.r.s.Queue())
}

func (q *xskQueueReader) takeView(msgs []Message) int {
	r := q.r
	if r.rcv != nil && r.next == r.b.Len() {
		return q.takeCoalesced(msgs)
	}
	if r.next == r.b.Len() {
		r.s.Release(r.b)
		r.next = 0
		r.s.Receive(r.b)
	}
	return q.c.take(r.b, &r.next, msgs)
}

func (q *xskQueueReader) waitView(left time.Duration) error {
	if q.r.rcv != nil && q.r.next == q.r.b.Len() {
		return q.nextCoalesced(left)
	}
	_, err := q.r.s.Wait(left, false)
	return err
}

// take fills msgs with the UDP datagrams to our port among b's frames
// from *next on, advancing *next.
func (c *xskConn) take(b *xsk.Batch, next *int, msgs []Message) int {
	n := 0
	for ; *next < b.Len() && n < len(msgs); *next++ {
		src, dport, payload, ok := parseUDP(b.Frame(*next))
		if !ok || dport != c.local.Port() {
			c.notUDP.Add(1)
			continue
		}
		msgs[n] = Message{Buf: payload, N: len(payload), Addr: src}
		n++
	}
	return n
}

// xskGroupReader reads every queue's socket in place, in one goroutine
// (XSKDataPlane.OneReader). Like xskQueueReader it holds c.life for
// reading while it holds frames.
type xskGroupReader struct {
	viewReader
	turn  int
	cbs   []*xsk.Batch // the group receiver's batches being handed out
	ci    int          // the one being handed out
	cnext int          // its frames already handed out
}

// Queue is -1: the reader reads every queue.
func (q *xskGroupReader) Queue() int { return -1 }

func (q *xskGroupReader) ReadView(msgs []Message, timeout time.Duration) (int, error) {
	return q.readView(q, msgs, timeout, q.c.grp != nil, -1)
}

// takeView hands out the frames ReadBatch took during stream setup first;
// without coalescing, each queue's batch is refilled from its ring in
// turn, and with it the group receiver's batches follow.
func (q *xskGroupReader) takeView(msgs []Message) int {
	c := q.c
	n := 0
	for i := 0; i < len(c.rx) && n < len(msgs); i++ {
		r := &c.rx[(q.turn+i)%len(c.rx)]
		if r.next == r.b.Len() && (c.grp == nil || r.b.Len() > 0) {
			r.s.Release(r.b)
			r.next = 0
			if c.grp == nil {
				r.s.Receive(r.b)
			}
		}
		n += c.take(r.b, &r.next, msgs[n:])
	}
	q.turn++
	for c.grp != nil && n < len(msgs) && q.ci < len(q.cbs) {
		n += c.take(q.cbs[q.ci], &q.cnext, msgs[n:])
		if q.cnext == q.cbs[q.ci].Len() {
			q.ci, q.cnext = q.ci+1, 0
		}
	}
	return n
}

func (q *xskGroupReader) waitView(left time.Duration) error {
	if q.c.grp != nil {
		return q.nextCoalesced(left)
	}
	_, err := q.c.poller.WaitRX(left)
	return err
}

// nextCoalesced gives the group receiver's finished batch back and waits
// up to timeout for its next one, holding c.life for reading meanwhile.
func (q *xskGroupReader) nextCoalesced(timeout time.Duration) error {
	c := q.c
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	if q.cbs != nil {
		c.grp.Release()
		q.cbs, q.ci, q.cnext = nil, 0, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bs, err := c.grp.Next(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	q.cbs = bs
	return err
}

// takeCoalesced hands out the rest of the coalesced batch.
func (q *xskQueueReader) takeCoalesced(msgs []Message) int {
	r := q.r
	if r.cb == nil {
		return 0
	}
	return q.c.take(r.cb, &r.cnext, msgs)
}

// nextCoalesced gives the finished batch back and waits up to timeout for
// the receiver's next one, holding c.life for reading meanwhile (a Close
// waits for it: at most timeout).
func (q *xskQueueReader) nextCoalesced(timeout time.Duration) error {
	r := q.r
	q.c.life.RLock()
	defer q.c.life.RUnlock()
	if q.c.closed.Load() {
		return net.ErrClosed
	}
	if r.cb != nil {
		r.rcv.Release()
		r.cb, r.cnext = nil, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b, err := r.rcv.Next(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	r.cb = b
	return err
}

// parse copies the UDP payload of frame (to our port) into m.
func (c *xskConn) parse(f []byte, m *Message) bool {
	src, dport, payload, ok := parseUDP(f)
	if !ok || dport != c.local.Port() {
		return false
	}
	m.N = copy(m.Buf, payload)
	m.Addr = src
	return true
}

// parseUDP reads an Ethernet/IPv4-or-IPv6/UDP frame (IPv6 without
// extension headers, as iperf3 sends; no IP fragments): the source, the
// destination port and the payload, which aliases f.
func parseUDP(f []byte) (src netip.AddrPort, dport uint16, payload []byte, ok bool) {
	if len(f) < 14 {
		return
	}
	var srcIP netip.Addr
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case unix.ETH_P_IP:
		ip := f[14:]
		// A fragment is not a datagram: even the first one carries only
		// part of the payload the UDP header describes.
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return
		}
		ihl := int(ip[0]&0xf) * 4
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		if ihl < 20 || tot < ihl || tot > len(ip) {
			return
		}
		srcIP = netip.AddrFrom4([4]byte(ip[12:16]))
		l4 = ip[ihl:tot]
	case unix.ETH_P_IPV6:
		ip := f[14:]
		if len(ip) < 40 || ip[0]>>4 != 6 || ip[6] != unix.IPPROTO_UDP {
			return
		}
		pl := int(binary.BigEndian.Uint16(ip[4:]))
		if 40+pl > len(ip) {
			return
		}
		srcIP = netip.AddrFrom16([16]byte(ip[8:24]))
		l4 = ip[40 : 40+pl]
	default:
		return
	}
	if len(l4) < 8 {
		return
	}
	ul := int(binary.BigEndian.Uint16(l4[4:]))
	if ul < 8 || ul > len(l4) {
		return
	}
	return netip.AddrPortFrom(srcIP, binary.BigEndian.Uint16(l4[0:])), binary.BigEndian.Uint16(l4[2:]), l4[8:ul], true
}

// WriteBatch builds each datagram in a UMEM frame of queue 0's socket and
// transmits them.
func (c *xskConn) WriteBatch(msgs []Message) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	c.tx.Complete()
	sent := 0
	for sent < len(msgs) {
		k := c.tx.Alloc(c.txb, min(len(msgs)-sent, c.txb.Cap()))
		if k == 0 {
			return sent, ErrBackpressure
		}
		for i := 0; i < k; i++ {
			m := msgs[sent+i]
			n, err := c.build(c.txb.Buffer(i), m)
			if err != nil {
				c.tx.Free(c.txb)
				return sent, err
			}
			c.txb.SetLen(i, n)
		}
		done, err := c.tx.Transmit(c.txb)
		sent += done
		if err != nil {
			c.tx.Free(c.txb)
			return sent, err
		}
		if c.txb.Len() > 0 {
			c.tx.Free(c.txb)
			return sent, ErrBackpressure
		}
	}
	return sent, nil
}

// build writes an Ethernet/IP/UDP frame carrying m into buf and returns its
// length.
func (c *xskConn) build(buf []byte, m Message) (int, error) {
	dst := m.Addr.Addr().Unmap()
	mac, ok := c.neigh[dst]
	if !ok {
		// Not in the table read at Listen: route and resolve it now (once;
		// the answer is kept).
		err := c.do(func() (err error) {
			_, mac, err = nextHopMAC(c.ifindex, dst, resolveTimeout)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("xsk write to %v: %w", m.Addr, err)
		}
		c.neigh[dst] = mac
	}
	return buildUDP(buf, c.mac, mac, c.local, m.Addr, m.Buf[:m.N])
}

// buildUDP writes an Ethernet/IP/UDP frame from src to dst carrying
// payload into buf, with checksums, and returns its length.
func buildUDP(buf []byte, srcMAC, dstMAC net.HardwareAddr, srcAP, dstAP netip.AddrPort, payload []byte) (int, error) {
	src, dst := srcAP.Addr().Unmap(), dstAP.Addr().Unmap()
	if src.Is4() != dst.Is4() || src.IsUnspecified() {
		return 0, fmt.Errorf("xsk write to %v from %v: %w", dstAP, srcAP, ErrUnsupported)
	}
	l3 := 20
	if dst.Is6() {
		l3 = 40
	}
	size := 14 + l3 + 8 + len(payload)
	if size > len(buf) {
		return 0, fmt.Errorf("xsk write: %d-byte datagram does not fit a %d-byte frame", len(payload), len(buf))
	}
	f := buf[:size]
	clear(f[:14+l3+8])
	copy(f[0:], dstMAC)
	copy(f[6:], srcMAC)
	ip := f[14:]
	if dst.Is4() {
		binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
		ip[8] = 64
		ip[9] = unix.IPPROTO_UDP
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
	} else {
		binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IPV6)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(8+len(payload)))
		ip[6] = unix.IPPROTO_UDP
		ip[7] = 64
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:], s16[:])
		copy(ip[24:], d16[:])
	}
	udp := ip[l3:]
	binary.BigEndian.PutUint16(udp[0:], srcAP.Port())
	binary.BigEndian.PutUint16(udp[2:], dstAP.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(udp[8:], payload)
	if _, err := offload.FillChecksum(f); err != nil {
		return 0, fmt.Errorf("xsk write: %w", err)
	}
	return size, nil
}

func (c *xskConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.life.Lock()
	defer c.life.Unlock()
	drainTX([]*xsk.Socket{c.tx})
	if c.onClose != nil {
		var qs []QueueCount
		for _, r := range c.rx {
			qc, ok := queueCount(r.s)
			if !ok {
				continue
			}
			if r.rcv != nil {
				cs := r.rcv.Stats()
				qc.Coalesce = &cs
			}
			if c.grp != nil && len(qs) == 0 {
				cs := c.grp.Stats()
				qc.Coalesce = &cs
			}
			qs = append(qs, qc)
		}
		c.onClose(qs)
	}
	return c.dev.Close()
}

// queueCount is what s's RX queue took: the frames and bytes it received,
// and what the kernel could not deliver to it.
func queueCount(s *xsk.Socket) (QueueCount, bool) {
	st, err := s.Stats()
	if err != nil {
		return QueueCount{}, false
	}
	return QueueCount{Queue: s.Queue(), Packets: st.RxFrames, Bytes: st.RxBytes, Dropped: st.RxDropped + st.RxRingFull}, true
}
