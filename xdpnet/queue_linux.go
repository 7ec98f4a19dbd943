//go:build linux

package xdpnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// Queue is one RX queue of a UDPConn (its AF_XDP socket), or the conn's
// kernel socket (ID KernelQueue), as handed out by UDPConn.Queues.
//
// Its read methods (ReadView, Release, ReadBatch) belong to one
// goroutine and take no lock. Its write methods are safe for concurrent
// use: they take the queue's TX lock, uncontended when the reading
// goroutine is the only writer, as in an echo server.
type Queue struct {
	c  *UDPConn
	s  *xsk.Socket // nil for the kernel queue
	id int
	fd int // the socket's descriptor (the kernel socket's for the kernel queue)

	// calls counts calls in progress: Close waits for them to end.
	// views is set while ReadView's views into the UMEM are out: the
	// UMEM stays mapped until they are released.
	calls atomic.Int32
	views atomic.Bool

	// RX side: the owning goroutine (or the conn's reader, under rmu).
	vb      *xsk.Batch         // frames ReadView handed out views of
	holding bool               // vb's views are out
	rcv     *coalesce.Receiver // with Config.Coalesce: vb comes from it
	rb      *xsk.Batch         // frames the copying reads take datagrams from
	rnext   int                // frames of rb looked at
	kbufs   [][]byte           // the kernel queue's buffers for views
	kview   bool               // views into kbufs are held
	kturn   int                // the kernel socket the next read looks at first
	kfds    []unix.PollFd
	kargs   recvArgs           // one non-blocking recvfrom's arguments and results
	kdo     func(uintptr) bool // kargs.do, bound once: no closure per read
	koob    [64]byte           // a write's control message (its ECN bits)

	// TX side, under txmu.
	txmu sync.Mutex
	tb   *xsk.Batch
	ipID uint16
	nap  xsk.Napper // the reader's: nap or wait in poll (Config.RxNap)

	ctr queueCounters
}

type queueCounters struct {
	datagrams, bytes, truncated atomic.Uint64
	drops                       [numCauses]atomic.Uint64
	sent, sentBytes             atomic.Uint64
}

func newQueue(c *UDPConn, s *xsk.Socket) *Queue {
	q := &Queue{c: c, s: s, id: s.Queue(), fd: s.FD(), nap: xsk.NewNapper(c.cfg.RxNap, s)}
	q.tb = s.NewBatch(maxSegments + c.cfg.BatchSize)
	q.ipID = uint16(s.Queue() << 12)
	return q
}

func newKernelQueue(c *UDPConn) *Queue {
	q := &Queue{c: c, id: KernelQueue, fd: c.ksFD, kfds: make([]unix.PollFd, len(c.kss)+1)}
	return q
}

// ID returns the RX queue number, or KernelQueue.
func (q *Queue) ID() int { return q.id }

// acquire marks a call in progress, unless the conn is closed. The
// increment comes before the check and Close sets its flag before it
// looks at the count, so one of the two always sees the other.
func (q *Queue) acquire() bool {
	q.calls.Add(1)
	if q.c.closed.Load() {
		q.calls.Add(-1)
		return false
	}
	return true
}

func (q *Queue) release() { q.calls.Add(-1) }

// Stats returns the queue's counters. It may be called from any
// goroutine.
func (q *Queue) Stats() QueueStats {
	st := QueueStats{Queue: q.id,
		Datagrams: q.ctr.datagrams.Load(), Bytes: q.ctr.bytes.Load(), Truncated: q.ctr.truncated.Load(),
		Sent: q.ctr.sent.Load(), SentBytes: q.ctr.sentBytes.Load()}
	var d [numCauses]uint64
	for i := range d {
		d[i] = q.ctr.drops[i].Load()
	}
	st.Drops = dropsOf(&d)
	if q.s != nil {
		st.Socket, _ = q.s.Stats()
	}
	if q.rcv != nil {
		cs := q.rcv.Stats()
		st.Coalesce = &cs
	}
	return st
}

// parseDeferred is parse for a copying read: the UDP checksum of the
// payload is left to the copy (rxDatagram.deferred).
func (q *Queue) parseDeferred(f []byte, d *rxDatagram) cause {
	c := q.c
	why := c.copyParser.parse(f, d)
	if why == causeOK && c.raddr.IsValid() && d.src != c.raddr {
		why = causeOtherPeer
	}
	return why
}

// parse finds the datagram for this conn in a received frame.
func (q *Queue) parse(f []byte, d *rxDatagram) cause {
	c := q.c
	why := c.parser.parse(f, d)
	if why == causeOK && c.raddr.IsValid() && d.src != c.raddr {
		why = causeOtherPeer
	}
	return why
}

// ReadView fills msgs with up to len(msgs) datagrams of the queue
// without copying them: each Buf is a view of the payload in the received
// frame, valid until the next ReadView or Release on this queue, which
// give the frames back to the kernel in one batch. It blocks up to
// timeout for the first datagram (a negative timeout: without limit) and
// returns 0 and a nil error when the timeout passes. Frames that carry no
// datagram for the conn are counted (Stats().Drops) and given back.
//
// After Close it returns an error matching net.ErrClosed; the views of
// the last call stay valid until Release (the conn keeps the UMEM mapped
// until then). When the device goes away it returns an error matching
// xsk.ErrNoDevice. For the kernel queue the views are of the queue's own
// buffers, and at most 8 datagrams are read per call.
func (q *Queue) ReadView(msgs []Message, timeout time.Duration) (int, error) {
	q.Release()
	if err := q.c.claim(readQueues); err != nil {
		return 0, q.c.opErr("read", netip.AddrPort{}, err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if q.s == nil {
		return q.kernelView(msgs, timeout)
	}
	if !q.acquire() {
		return 0, q.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
	}
	defer q.release()
	if q.c.cfg.Coalesce != nil {
		return q.coalescedView(msgs, timeout)
	}
	n := min(len(msgs), maxBatch)
	if q.vb == nil || q.vb.Cap() != n {
		q.vb = q.s.NewBatch(n)
	}
	var deadline time.Time
	for {
		if k := q.s.Receive(q.vb); k > 0 {
			q.nap.Received(k)
			if k := q.viewsOf(msgs); k > 0 {
				q.holding = true
				q.views.Store(true)
				return k, nil
			}
			q.s.Release(q.vb)
			continue
		}
		left := timeout
		if timeout > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(timeout)
			}
			if left = time.Until(deadline); left <= 0 {
				return 0, nil
			}
		} else if timeout == 0 {
			return 0, nil
		}
		if d := q.nap.Idle(); d > 0 {
			if left > 0 {
				d = min(d, left)
			}
			if err := q.s.Sleep(d); err != nil {
				return 0, q.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
			}
			continue
		}
		if _, err := q.s.Wait(left, false); err != nil {
			if errors.Is(err, xsk.ErrClosed) || q.c.closed.Load() {
				return 0, q.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
			}
			return 0, q.c.opErr("read", netip.AddrPort{}, err)
		}
	}
}

// coalescedView is ReadView through the queue's coalescing Receiver:
// the batch it hands over is vb, and at most len(msgs) datagrams of it are
// turned into views (the receiver's BatchSize should not exceed it).
func (q *Queue) coalescedView(msgs []Message, timeout time.Duration) (int, error) {
	if q.rcv == nil {
		p := *q.c.cfg.Coalesce
		if p.BatchSize == 0 {
			p.BatchSize = q.c.cfg.BatchSize
		}
		r, err := coalesce.NewReceiver(q.s, p, coalesce.Options{IdleWait: readSlice})
		if err != nil {
			return 0, q.c.opErr("read", netip.AddrPort{}, err)
		}
		q.rcv = r
	}
	if b := q.rcv.Params().BatchSize; len(msgs) < b {
		// A coalesced batch is handed over whole.
		return 0, q.c.opErr("read", netip.AddrPort{}, fmt.Errorf("%w: %d messages for coalesced batches of %d", ErrInvalidConfig, len(msgs), b))
	}
	ctx := context.Background()
	if timeout >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		b, err := q.rcv.Next(ctx)
		if err != nil {
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				return 0, nil
			case errors.Is(err, xsk.ErrClosed) || q.c.closed.Load():
				return 0, q.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
			}
			return 0, q.c.opErr("read", netip.AddrPort{}, err)
		}
		q.vb = b
		if k := q.viewsOf(msgs); k > 0 {
			q.holding = true
			q.views.Store(true)
			return k, nil
		}
		q.rcv.Release()
	}
}

// viewsOf turns the frames of vb into messages, at most len(msgs) of
// them.
func (q *Queue) viewsOf(msgs []Message) int {
	var drops [numCauses]uint64
	n := 0
	var bytes uint64
	var d rxDatagram
	for i := 0; i < q.vb.Len() && n < len(msgs); i++ {
		why := q.parse(q.vb.Frame(i), &d)
		if why != causeOK {
			drops[why]++
			continue
		}
		msgs[n] = Message{Buf: d.payload, N: len(d.payload), Addr: d.src, LocalPort: d.dst.Port(), ECN: d.ecn}
		bytes += uint64(len(d.payload))
		n++
	}
	q.count(n, bytes, 0, &drops)
	return n
}

func (q *Queue) count(datagrams int, bytes, truncated uint64, drops *[numCauses]uint64) {
	if datagrams > 0 {
		q.ctr.datagrams.Add(uint64(datagrams))
		q.ctr.bytes.Add(bytes)
	}
	if truncated > 0 {
		q.ctr.truncated.Add(truncated)
	}
	for i, v := range drops {
		if v > 0 {
			q.ctr.drops[i].Add(v)
		}
	}
}

// Release gives the frames of the last ReadView back to the kernel. The
// views become invalid.
func (q *Queue) Release() {
	if q.kview {
		q.kview = false
		return
	}
	if !q.holding {
		return
	}
	q.holding = false
	if q.rcv != nil {
		q.rcv.Release()
	} else {
		q.s.Release(q.vb)
	}
	q.views.Store(false)
	if q.c.closed.Load() {
		q.c.freeUMEM()
	}
}

// ReadBatch reads up to len(msgs) datagrams of the queue, copying each
// into its message's Buf (with Config.GRO, consecutive datagrams of a
// flow into one message, SegSize set), and blocks up to timeout for the
// first (negative: without limit; 0 and a nil error when it passes).
func (q *Queue) ReadBatch(msgs []Message, timeout time.Duration) (int, error) {
	q.Release()
	if err := q.c.claim(readQueues); err != nil {
		return 0, q.c.opErr("read", netip.AddrPort{}, err)
	}
	var deadline time.Time
	for {
		n, err := q.copyOut(msgs, q.c.cfg.GRO)
		if n > 0 || err != nil {
			if err != nil {
				err = q.c.opErr("read", netip.AddrPort{}, err)
			}
			return n, err
		}
		left := timeout
		if timeout > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(timeout)
			}
			if left = time.Until(deadline); left <= 0 {
				return 0, nil
			}
		} else if timeout == 0 {
			return 0, nil
		}
		if err := q.wait(left); err != nil {
			return 0, q.c.opErr("read", netip.AddrPort{}, err)
		}
	}
}

// wait blocks until the queue may have a datagram or timeout passed.
func (q *Queue) wait(timeout time.Duration) error {
	if q.s == nil {
		return q.kernelWait(timeout)
	}
	if !q.acquire() {
		return net.ErrClosed
	}
	defer q.release()
	if d := q.nap.Idle(); d > 0 {
		if timeout > 0 {
			d = min(d, timeout)
		}
		if err := q.s.Sleep(d); err != nil {
			return net.ErrClosed
		}
		return nil
	}
	if _, err := q.s.Wait(timeout, false); err != nil {
		if errors.Is(err, xsk.ErrClosed) || q.c.closed.Load() {
			return net.ErrClosed
		}
		return err
	}
	return nil
}

// copyOut copies the queue's datagrams into msgs without waiting and
// returns how many messages it filled.
func (q *Queue) copyOut(msgs []Message, gro bool) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if q.s == nil {
		return q.kernelCopy(msgs)
	}
	if !q.acquire() {
		return 0, net.ErrClosed
	}
	defer q.release()
	if q.rb == nil {
		q.rb = q.s.NewBatch(q.c.cfg.BatchSize)
	}
	var drops [numCauses]uint64
	var bytes, truncated uint64
	var d rxDatagram
	datagrams := 0
	n := 0
	for n < len(msgs) {
		if q.rnext == q.rb.Len() {
			if q.rb.Len() > 0 {
				q.s.Release(q.rb)
				q.rnext = 0
			}
			k := q.s.Receive(q.rb)
			if k == 0 {
				break
			}
			q.nap.Received(k)
		}
		for q.rnext < q.rb.Len() && n < len(msgs) {
			why := q.parseDeferred(q.rb.Frame(q.rnext), &d)
			q.rnext++
			if why != causeOK {
				drops[why]++
				continue
			}
			if d.deferred && (gro && n > 0 && canMerge(&msgs[n-1], &d) || len(msgs[n].Buf) < len(d.payload)) {
				// Merged or cut short, the payload is not copied whole in
				// one go: finish the checksum on its own.
				if why = q.c.parser.finishSum(&d, offload.Checksum(d.payload, 0)); why != causeOK {
					drops[why]++
					continue
				}
				d.deferred = false
			}
			if gro && n > 0 && merge(&msgs[n-1], &d) {
				datagrams++
				bytes += uint64(len(d.payload))
				continue
			}
			m := &msgs[n]
			var k int
			if d.deferred {
				var ps uint16
				k, ps = offload.CopyChecksum(m.Buf, d.payload)
				if why = q.c.parser.finishSum(&d, ps); why != causeOK {
					drops[why]++ // a drop, not a datagram: counted once
					continue
				}
			} else {
				k = copy(m.Buf, d.payload)
			}
			datagrams++
			bytes += uint64(len(d.payload))
			m.N, m.Addr, m.SegSize, m.LocalPort, m.ECN = k, d.src, 0, d.dst.Port(), d.ecn
			m.Truncated = k < len(d.payload)
			if m.Truncated {
				truncated++
			}
			n++
		}
	}
	if q.rnext == q.rb.Len() && q.rb.Len() > 0 {
		// Everything looked at: the frames go back to the kernel now.
		q.s.Release(q.rb)
		q.rnext = 0
	}
	q.count(datagrams, bytes, truncated, &drops)
	return n, nil
}

// maxGROSegments is the most datagrams one message holds, as Linux's UDP
// GRO.
const maxGROSegments = 64

// merge appends d to m, as UDP GRO would, when it comes from the same
// peer, m's datagrams so far are all of one size and d is no larger, and
// m's buffer has room; it reports whether it did.
func merge(m *Message, d *rxDatagram) bool {
	if !canMerge(m, d) {
		return false
	}
	seg := m.SegSize
	if seg == 0 {
		seg = m.N
	}
	copy(m.Buf[m.N:], d.payload)
	m.N += len(d.payload)
	m.SegSize = seg
	return true
}

// canMerge reports whether merge would take d.
func canMerge(m *Message, d *rxDatagram) bool {
	if m.Truncated || m.Addr != d.src || m.LocalPort != d.dst.Port() || m.ECN != d.ecn || len(d.payload) == 0 {
		return false
	}
	seg := m.SegSize
	if seg == 0 {
		seg = m.N
	}
	return seg != 0 && len(d.payload) <= seg && m.N%seg == 0 && m.N/seg < maxGROSegments && m.N+len(d.payload) <= len(m.Buf)
}

// WriteTo sends p to addr through this queue's TX ring (for a connected
// conn, addr is ignored: the datagram goes to its peer).
func (q *Queue) WriteTo(p []byte, addr netip.AddrPort) (int, error) {
	m := [1]Message{{Buf: p, N: len(p), Addr: addr}}
	if _, err := q.WriteBatch(m[:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteBatch sends msgs in order through this queue's TX ring, each
// message's Buf[:N] to its Addr (cut into datagrams of SegSize bytes when
// set), and returns how many messages went out. It blocks while the ring
// is full, until the conn's write deadline. It is safe for concurrent
// use. On an error, the count is of the messages known to be on the ring.
func (q *Queue) WriteBatch(msgs []Message) (int, error) {
	if q.s == nil {
		return q.kernelWrite(msgs)
	}
	c := q.c
	q.txmu.Lock()
	defer q.txmu.Unlock()
	if !q.acquire() {
		return 0, c.opErr("write", netip.AddrPort{}, net.ErrClosed)
	}
	defer q.release()
	done := 0 // messages wholly on the ring
	// Consecutive messages to one address look its hop up once.
	var last netip.Addr
	var hop nexthop.Hop
	for i := range msgs {
		m := &msgs[i]
		dst := c.peer(c.dstOf(m))
		if dst.Addr() != last {
			if err := c.checkDst(dst); err != nil {
				return q.failAt(i, done, c.opErr("write", dst, err))
			}
			var ok bool
			if hop, ok = c.res.Lookup(dst.Addr()); ok {
				last = dst.Addr()
			} else {
				last = netip.Addr{}
			}
		} else if dst.Port() == 0 {
			return q.failAt(i, done, c.opErr("write", dst, c.checkDst(dst)))
		}
		if !last.IsValid() || c.overFrame(m, dst) {
			// Not resolved yet (a new peer, or the tables changed): the
			// resolver starts on it, and the kernel sends this message as
			// it sends its own, queueing it while it resolves the
			// neighbour. Nothing blocks; a failure the resolver remembers
			// (nobody answered) is this write's error. A datagram longer
			// than a UMEM frame holds (jumbo MTU) goes the same way.
			mtu := hop.MTU
			if !last.IsValid() {
				if err := c.res.Start(dst.Addr()); err != nil {
					return q.failAt(i, done, c.opErr("write", dst, err))
				}
				mtu = c.mtu
			}
			if err := c.checkSize(m, dst, mtu, false); err != nil {
				return q.failAt(i, done, c.opErr("write", dst, err))
			}
			if err := q.flushTX(); err != nil {
				return done, c.opErr("write", dst, err)
			}
			if _, err := c.kernel.kernelWrite(msgs[i : i+1]); err != nil {
				return i, err
			}
			done = i + 1
			continue
		}
		if err := q.queueMessage(m, dst, hop); err != nil {
			return q.failAt(i, done, c.opErr("write", dst, err))
		}
		if q.tb.Cap()-q.tb.Len() < maxSegments {
			if err := q.flushTX(); err != nil {
				return done, c.opErr("write", dst, err)
			}
			done = i + 1
		}
	}
	if err := q.flushTX(); err != nil {
		return done, c.opErr("write", netip.AddrPort{}, err)
	}
	return len(msgs), nil
}

// failAt ends a WriteBatch whose message i failed with err: the messages
// before it, queued on tb, still go out.
func (q *Queue) failAt(i, done int, err error) (int, error) {
	if q.flushTX() == nil {
		done = i
	}
	return done, err
}

// checkDst refuses destinations a datagram cannot go to.
func (c *UDPConn) checkDst(dst netip.AddrPort) error {
	switch {
	case !dst.IsValid() || dst.Addr().IsUnspecified():
		return fmt.Errorf("%w: destination %v", ErrInvalidConfig, dst)
	case dst.Port() == 0:
		return fmt.Errorf("%w: destination %v: port 0", ErrInvalidConfig, dst)
	case dst.Addr().IsLoopback():
		return fmt.Errorf("destination %v is a loopback address, which the conn's interface %s does not reach: %w", dst, c.ifname, syscall.ENETUNREACH)
	case dst.Addr().Zone() != "" && dst.Addr().Zone() != c.ifname:
		return fmt.Errorf("destination %v is on another link than the conn's interface %s: %w", dst, c.ifname, syscall.ENETUNREACH)
	case c.laddr.Addr().Is4() && dst.Addr().Is6():
		return fmt.Errorf("IPv6 destination %v from IPv4 address %v: %w", dst, c.laddr, syscall.EAFNOSUPPORT)
	}
	if a := c.laddr.Addr(); a.Is6() && !a.IsUnspecified() && dst.Addr().Is4() {
		return fmt.Errorf("IPv4 destination %v from IPv6 address %v: %w", dst, c.laddr, syscall.EAFNOSUPPORT)
	}
	return nil
}

// queueMessage writes m's datagrams into frames on q.tb (the caller holds
// txmu and flushes).
func (q *Queue) queueMessage(m *Message, dst netip.AddrPort, hop nexthop.Hop) error {
	c := q.c
	if m.N < 0 || m.N > len(m.Buf) {
		return fmt.Errorf("%w: message N %d beyond its %d-byte Buf", ErrInvalidConfig, m.N, len(m.Buf))
	}
	payload := m.Buf[:m.N]
	src := c.laddr.Addr()
	if src.IsUnspecified() {
		src = hop.Src
	}
	if !src.IsValid() || src.Is4() != dst.Addr().Is4() {
		return fmt.Errorf("no %s source address for %v on %s: %w", family(dst.Addr()), dst, c.ifname, syscall.EADDRNOTAVAIL)
	}
	seg := len(payload)
	segs := 1
	if m.SegSize > 0 && len(payload) > m.SegSize {
		seg = m.SegSize
		segs = (len(payload) + seg - 1) / seg
		if segs > maxSegments {
			return fmt.Errorf("%w: %d bytes in segments of %d make %d datagrams, at most %d", ErrInvalidConfig, len(payload), seg, segs, maxSegments)
		}
	} else if m.SegSize < 0 {
		return fmt.Errorf("%w: SegSize %d", ErrInvalidConfig, m.SegSize)
	}
	hlen := headerLen(dst.Addr())
	if err := c.checkSize(m, dst, hop.MTU, true); err != nil {
		return err
	}
	sport, err := c.sourcePort(m)
	if err != nil {
		return err
	}
	tos := uint8(c.cfg.TOS)
	if m.ECN != 0 {
		tos = tos&^3 | m.ECN&3
	}
	h := offload.Headers{SrcMAC: c.mac, DstMAC: hop.MAC, Src: netip.AddrPortFrom(src, sport), Dst: dst, TTL: uint8(c.cfg.TTL), TOS: tos}
	// Frames for every segment first: a message goes out whole.
	if q.tb.Cap()-q.tb.Len() < segs {
		if err := q.flushTX(); err != nil {
			return err
		}
	}
	for {
		start := q.tb.Len()
		got := q.s.Alloc(q.tb, segs)
		if got == segs {
			break
		}
		q.s.FreeTail(q.tb, start)
		if err := q.flushTX(); err != nil {
			return err
		}
		if err := q.waitTX(); err != nil {
			return err
		}
	}
	base := q.tb.Len() - segs
	for i := 0; i < segs; i++ {
		p := payload[i*seg : min(len(payload), (i+1)*seg)]
		if segs == 1 {
			p = payload
		}
		fi := base + i
		buf := q.tb.Buffer(fi)
		var n int
		var err error
		if c.cfg.TxChecksum == TxChecksumOffload {
			n, err = h.BuildUDPPartial(buf, q.ipID, p)
			q.tb.RequestChecksum(fi, uint16(hlen-udpLen), offload.UDPChecksumOffset)
		} else {
			n, err = h.BuildUDP(buf, q.ipID, p)
		}
		if err != nil {
			// checkSize and the conn's configuration rule this out.
			q.s.FreeTail(q.tb, base)
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		q.ipID++
		q.tb.SetLen(fi, n)
	}
	q.ctr.sent.Add(uint64(segs))
	q.ctr.sentBytes.Add(uint64(len(payload)))
	return nil
}

// flushTX puts every frame of tb on the TX ring, waiting (until the write
// deadline) while the ring is full.
func (q *Queue) flushTX() error {
	for q.tb.Len() > 0 {
		_, err := q.s.Transmit(q.tb)
		if err != nil {
			q.s.Free(q.tb)
			if errors.Is(err, xsk.ErrClosed) {
				return net.ErrClosed
			}
			if errors.Is(err, xsk.ErrLinkDown) {
				return fmt.Errorf("%w: %w", err, syscall.ENETDOWN)
			}
			return err
		}
		if q.tb.Len() == 0 {
			break
		}
		q.s.Complete()
		if err := q.waitTX(); err != nil {
			q.s.Free(q.tb)
			return err
		}
	}
	q.s.Complete()
	return nil
}

// waitTX waits a moment for the kernel to make room (copy mode sends when
// kicked; Transmit kicks), bounded by the write deadline and Close.
func (q *Queue) waitTX() error {
	c := q.c
	if c.closed.Load() {
		return net.ErrClosed
	}
	if dl := c.wdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return os.ErrDeadlineExceeded
	}
	if err := q.s.Sleep(50 * time.Microsecond); err != nil {
		if errors.Is(err, xsk.ErrClosed) {
			return net.ErrClosed
		}
		return err
	}
	if q.s.Complete() == 0 {
		if err := q.s.Kick(); err != nil && !errors.Is(err, xsk.ErrLinkDown) {
			return err
		}
	}
	return nil
}

// checkSize refuses a message whose datagrams (each segment, with
// SegSize) are larger than mtu allows or, for a frame of its own (inFrame),
// than a UMEM frame holds: the package never fragments.
func (c *UDPConn) checkSize(m *Message, dst netip.AddrPort, mtu int, inFrame bool) error {
	seg := segLen(m)
	hlen := headerLen(dst.Addr())
	room := min(mtu-(hlen-ethLen), 65507)
	if inFrame {
		room = min(room, c.frameRoom(dst))
	}
	if seg > room {
		return fmt.Errorf("%d-byte datagram to %v: the path MTU %d allows %d bytes of UDP payload: %w", seg, dst, mtu, room, syscall.EMSGSIZE)
	}
	return nil
}

// segLen is the length of a message's datagrams (its segments', with
// SegSize).
func segLen(m *Message) int {
	if m.SegSize > 0 && m.SegSize < m.N {
		return m.SegSize
	}
	return m.N
}

// frameRoom is the longest payload a UMEM frame holds for dst.
func (c *UDPConn) frameRoom(dst netip.AddrPort) int {
	return c.dev.Sockets()[0].UMEM().FrameSize() - headerLen(dst.Addr()) - txMetaRoom(c.cfg)
}

// overFrame reports whether m's datagrams are longer than a frame holds:
// they go out through the kernel socket.
func (c *UDPConn) overFrame(m *Message, dst netip.AddrPort) bool {
	return segLen(m) > c.frameRoom(dst)
}

// sourcePort is the port a message is sent from: its LocalPort, one of
// the conn's (0: the first).
func (c *UDPConn) sourcePort(m *Message) (uint16, error) {
	first := c.laddr.Port()
	if m.LocalPort == 0 {
		return first, nil
	}
	if m.LocalPort < first || int(m.LocalPort-first) >= c.cfg.Ports {
		return 0, fmt.Errorf("%w: source port %d is not one of the conn's (%d-%d)", ErrInvalidConfig, m.LocalPort, first, int(first)+c.cfg.Ports-1)
	}
	return m.LocalPort, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func txMetaRoom(cfg Config) int {
	if cfg.TxChecksum == TxChecksumOffload {
		return 24 // struct xsk_tx_metadata
	}
	return 0
}
