//go:build linux

package xskplane

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// DataPlane carries a test's UDP streams over AF_XDP with package
// xdpnet: one socket per RX queue of Iface, fed by an XDP program that
// takes only UDP to the test's address and port, so the control
// connection and everything else stay with the kernel. xdpnet checks each
// received frame (checksums included), builds the datagrams it sends
// (iperf3's stream setup replies, -R tests) in UMEM frames, to the next
// hop the kernel's route and neighbour tables give, and holds a kernel
// UDP socket on the address, which reserves the port and receives what
// reaches the kernel instead (IPv4 fragments; queues without a socket).
//
// A client's streams (Dial) share one xdpnet conn on Iface, on a block of
// 256 ports below Linux's ephemeral range; each stream takes one port, and
// datagrams are routed to streams by it.
type DataPlane struct {
	// Iface is the interface to bind to.
	Iface string
	// Do, if set, runs the socket setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// Config is the base socket configuration. The UDP endpoints (Listen,
	// Dial) take Queues, UMEM.NumFrames, Socket.Bind, Socket.RXNap and
	// Program.Attach from it (xdpnet sets the rest, the XDP filter
	// included).
	Config xsk.Config
	// OnClose, if set, is called when a server's endpoint or a client's
	// shared sockets close, with what each RX queue's socket received (all
	// frames the filter took, in queue order): the RSS spread of the test.
	// The kernel socket's datagrams are not in it.
	OnClose func([]plane.QueueCount)
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
	Placer plane.Placer

	cmu    sync.Mutex
	client *xskShared
}

// ServerFrames is the UMEM frames per queue a server's endpoint takes
// when Config.UMEM.NumFrames is 0 (falling back to xdpnet's default when
// locked memory is short): 16384 (64 MiB per queue), so that its fill
// and RX rings hold 8192 frames each. A benchmark's receiver shares the
// machine with senders that keep every core busy; while it waits for a
// CPU, only the frames already lent to the kernel take packets, and the
// default 2048 last 13 ms at 150k packets/s per queue. In the demo on two
// cores, with client and server in one process, the default rings lost
// 23–41% of the frames for want of fill entries, 8192-entry rings
// 0.2–1.6%.
const ServerFrames = 16384

// netConfig is the xdpnet configuration of the UDP endpoints: the fields
// of Config that apply, the engine's batch, and checksums verified but
// for the ones left unfinished by a sender on this host. The peers of
// these tests are kernel sockets (iperf3) on the same machine, behind a
// veth whose TX checksum offload is on: their UDP checksums arrive as
// CHECKSUM_PARTIAL (the pseudo-header sum only), which the kernel accepts
// for packets that never left the host, and so must we (see package
// xdpnet's doc, "veth and checksums").
func (d *DataPlane) netConfig() xdpnet.Config {
	return xdpnet.Config{
		Queues:         d.Config.Queues,
		FramesPerQueue: d.Config.UMEM.NumFrames,
		Bind:           d.Config.Socket.Bind,
		Attach:         d.Config.Program.Attach,
		RXNap:          d.Config.Socket.RXNap,
		BatchSize:      plane.BatchSize,
		RXChecksum:     xdpnet.RXChecksumAcceptPartial,
	}
}

// Check opens the AF_XDP sockets of Iface once and closes them again, so a
// missing interface, privilege or kernel feature is reported when a
// server starts rather than when its first test arrives. Between the two,
// UDP to the discard port (9) of Iface goes to the sockets.
func (d *DataPlane) Check() error {
	cfg := d.Config
	cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(9)}
	err := link.Run(d.Do, func() error {
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

// Listen opens an xdpnet conn on Iface for UDP to local: a socket on every
// queue of Iface (or Config.Queues) and a kernel socket on local.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	cfg := d.netConfig()
	cfg.Coalesce = d.Coalesce
	if cfg.FramesPerQueue == 0 {
		cfg.FramesPerQueue = ServerFrames
	}
	var conn *xdpnet.UDPConn
	err := link.Run(d.Do, func() (err error) {
		conn, err = xdpnet.ListenUDP(d.Iface, local, cfg)
		if err != nil && d.Config.UMEM.NumFrames == 0 {
			// Locked memory too small for the deep rings: the defaults.
			cfg.FramesPerQueue = 0
			conn, err = xdpnet.ListenUDP(d.Iface, local, cfg)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("xsk listen %s %v: %w", d.Iface, local, err)
	}
	c := &xskConn{conn: conn, local: local, onClose: d.OnClose, queues: conn.Queues(), lock: d.Coalesce != nil}
	// How the conn is read is decided now, for ReadBatch (stream setup)
	// and the queue readers (the test) alike: xdpnet lets a conn be read
	// one way only.
	batch := plane.BatchSize
	if d.Coalesce != nil && d.Coalesce.BatchSize > 0 {
		batch = d.Coalesce.BatchSize
	}
	if d.OneReader {
		if c.group, err = conn.Group(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("xsk listen %s %v: %w", d.Iface, local, err)
		}
		// With coalescing, a Group read takes a whole batch of every
		// queue at once.
		c.srcs = []*viewSource{newViewSource(c.group, -1, batch*(len(c.queues)-1))}
	} else {
		for _, q := range c.queues {
			id := q.ID()
			if id == xdpnet.KernelQueue {
				id = plane.KernelSocketQueue
			}
			// A coalesced read takes the receiver's whole batch.
			c.srcs = append(c.srcs, newViewSource(q, id, batch))
		}
	}
	return c, nil
}

// xskConn is a server's endpoint: an xdpnet conn read through its Queues
// (or its Group, with OneReader) by ReadBatch and the queue readers
// alike, and written with its own WriteBatch.
type xskConn struct {
	conn    *xdpnet.UDPConn
	local   netip.AddrPort
	queues  []*xdpnet.Queue // the AF_XDP queues, then the kernel socket's
	group   *xdpnet.Group   // with OneReader
	srcs    []*viewSource   // what ReadBatch and the queue readers read
	lock    bool            // queue readers wire their thread (coalescing)
	onClose func([]plane.QueueCount)

	deadline readDeadline // ReadBatch's
	turn     int          // ReadBatch's first source
	wmsgs    []xdpnet.Message

	closeOnce sync.Once
	closeErr  error
}

// viewReader is what reads an xdpnet conn in place: a Queue, or the Group.
type viewReader interface {
	ReadView(msgs []xdpnet.Message, timeout time.Duration) (int, error)
	Release()
}

// viewSource is one viewReader with the views of its last read that were
// not handed out yet: a coalesced read returns a whole batch, which may
// be more datagrams than the caller asked for, and those must not be
// lost. Its views stay valid until the next read or done.
type viewSource struct {
	r       viewReader
	queue   int // bench's number of the queue (plane.QueueReader.Queue)
	views   []xdpnet.Message
	n, next int // views of the last read; handed out
}

func newViewSource(r viewReader, queue, views int) *viewSource {
	return &viewSource{r: r, queue: queue, views: make([]xdpnet.Message, max(views, plane.BatchSize))}
}

// pending is how many views of the last read are still to hand out.
func (s *viewSource) pending() int { return s.n - s.next }

// read gives the frames of the last read back and reads again, waiting
// up to timeout (0: not at all).
func (s *viewSource) read(timeout time.Duration) error {
	s.n, s.next = 0, 0
	n, err := s.r.ReadView(s.views, max(timeout, 0))
	s.n = n
	return err
}

// view hands out up to len(msgs) pending datagrams in place.
func (s *viewSource) view(msgs []plane.Message) int {
	k := 0
	for ; k < len(msgs) && s.next < s.n; k++ {
		v := &s.views[s.next]
		msgs[k] = plane.Message{Buf: v.Buf, N: v.N, Addr: v.Addr}
		s.next++
	}
	return k
}

// copyOut copies up to len(msgs) pending datagrams into msgs' buffers.
func (s *viewSource) copyOut(msgs []plane.Message) int {
	k := 0
	for ; k < len(msgs) && s.next < s.n; k++ {
		v := &s.views[s.next]
		msgs[k].N = copy(msgs[k].Buf, v.Buf[:v.N])
		msgs[k].Addr = v.Addr
		s.next++
	}
	return k
}

// done gives the frames back.
func (s *viewSource) done() {
	s.n, s.next = 0, 0
	s.r.Release()
}

func (c *xskConn) LocalAddr() netip.AddrPort { return c.local }

// SetReadDeadline bounds ReadBatch (the queue readers take timeouts).
func (c *xskConn) SetReadDeadline(t time.Time) error {
	c.deadline.set(t)
	return nil
}

// readDeadline is a conn's read deadline, set by one goroutine and read
// by another.
type readDeadline struct{ ns atomic.Int64 } // Unix nanoseconds; 0: none

func (d *readDeadline) set(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = max(t.UnixNano(), 1)
	}
	d.ns.Store(ns)
}

// bound returns wait cut to what is left until the deadline, or
// os.ErrDeadlineExceeded once it has passed.
func (d *readDeadline) bound(now time.Time, wait time.Duration) (time.Duration, error) {
	ns := d.ns.Load()
	if ns == 0 {
		return wait, nil
	}
	left := time.Duration(ns - now.UnixNano())
	if left <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return min(wait, left), nil
}

// readSlice is how long ReadBatch waits on one of several sources before
// it looks at the others: their datagrams wait at most that much longer.
const readSlice = 2 * time.Millisecond

// ReadBatch copies datagrams from the conn's readers into msgs: whatever
// each has, in turn, and when none has any it waits on them one after the
// other, a slice at a time, until the deadline. It does not allocate.
func (c *xskConn) ReadBatch(msgs []plane.Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	for {
		c.turn++
		n := 0
		for i := 0; i < len(c.srcs) && n < len(msgs); i++ {
			s := c.srcs[(c.turn+i)%len(c.srcs)]
			if s.pending() == 0 {
				if err := s.read(0); err != nil {
					if n > 0 {
						return n, nil
					}
					return 0, fmt.Errorf("xsk read: %w", err)
				}
			}
			n += s.copyOut(msgs[n:])
		}
		if n > 0 {
			return n, nil
		}
		wait := 100 * time.Millisecond
		if len(c.srcs) > 1 {
			wait = readSlice
		}
		wait, err := c.deadline.bound(time.Now(), wait)
		if err != nil {
			return 0, err
		}
		if err := c.srcs[c.turn%len(c.srcs)].read(wait); err != nil {
			return 0, fmt.Errorf("xsk read: %w", err)
		}
	}
}

// QueueReaders returns the readers the engine reads the conn with, in
// place: one per AF_XDP queue and one of the kernel socket, or with
// OneReader one of everything.
func (c *xskConn) QueueReaders() []plane.QueueReader {
	qs := make([]plane.QueueReader, len(c.srcs))
	for i, s := range c.srcs {
		qs[i] = &xskQueueReader{src: s, lock: c.lock && s.queue != plane.KernelSocketQueue}
	}
	return qs
}

// xskQueueReader reads one viewSource in place. The frames it holds stay
// valid after Close until Done (xdpnet keeps the UMEM mapped).
type xskQueueReader struct {
	src    *viewSource
	lock   bool   // wire the goroutine to its thread first
	unlock func() // undoes coalesce.LockThread
}

func (q *xskQueueReader) Queue() int { return q.src.queue }

// ReadView hands out what the last read left first, then reads again.
// With coalescing it first wires the goroutine to its thread with a tight
// timer slack, which the coalescing policy's timed sleeps want.
func (q *xskQueueReader) ReadView(msgs []plane.Message, timeout time.Duration) (int, error) {
	if q.lock && q.unlock == nil {
		if unlock, err := coalesce.LockThread(); err == nil {
			q.unlock = unlock
		}
	}
	if n := q.src.view(msgs); n > 0 {
		return n, nil
	}
	if err := q.src.read(timeout); err != nil {
		return 0, fmt.Errorf("xsk read: %w", err) // the engine names the queue
	}
	return q.src.view(msgs), nil
}

func (q *xskQueueReader) Done() {
	q.src.done()
	if q.unlock != nil {
		q.unlock()
		q.unlock = nil
	}
}

// WriteBatch sends msgs with the conn's WriteBatch, which builds each
// datagram in a UMEM frame of the queue a hash of its destination picks.
//
// bench's contract lets a full queue return early (plane.ErrBackpressure);
// xdpnet's WriteBatch instead waits while the TX ring is full (the kernel
// drains it within microseconds) and while a missing next hop is
// resolved, until its write deadline. No deadline is set: one would also
// cut the resolution short (a first reply to a peer without a neighbour
// entry). So a call blocks until every message is on a ring, or fails;
// the sender's pacing counts only what was sent, and a call that blocked
// just makes the next batch come later and fuller. Close ends a blocked
// call.
func (c *xskConn) WriteBatch(msgs []plane.Message) (int, error) {
	c.wmsgs = toNetMessages(c.wmsgs, msgs, netip.AddrPort{}, 0)
	n, err := c.conn.WriteBatch(c.wmsgs)
	if err != nil {
		return n, fmt.Errorf("xsk write: %w", err)
	}
	return n, nil
}

// toNetMessages makes msgs xdpnet messages in buf (grown as needed, so
// that a warm caller does not allocate): to dst from port local when dst
// is valid, else to each message's Addr from the conn's port.
func toNetMessages(buf []xdpnet.Message, msgs []plane.Message, dst netip.AddrPort, local uint16) []xdpnet.Message {
	if cap(buf) < len(msgs) {
		buf = make([]xdpnet.Message, len(msgs))
	}
	buf = buf[:len(msgs)]
	for i := range msgs {
		to := dst
		if !to.IsValid() {
			to = msgs[i].Addr
		}
		buf[i] = xdpnet.Message{Buf: msgs[i].Buf, N: msgs[i].N, Addr: to, LocalPort: local}
	}
	return buf
}

// Close reports the queues' counts to OnClose and closes the conn, once
// what is on its TX rings has gone out.
func (c *xskConn) Close() error {
	c.closeOnce.Do(func() {
		drainTX(c.queues)
		if c.onClose != nil {
			c.onClose(c.counts())
		}
		c.closeErr = c.conn.Close()
	})
	return c.closeErr
}

// counts is what each AF_XDP queue took, with the coalescing counters of
// each queue's reader, or the Group's with the first queue.
func (c *xskConn) counts() []plane.QueueCount {
	var qs []plane.QueueCount
	for _, st := range c.conn.Stats().Queues {
		if st.Queue == xdpnet.KernelQueue {
			continue
		}
		qc := queueCount(st)
		switch {
		case c.group == nil:
			qc.Coalesce = st.Coalesce
		case len(qs) == 0:
			if cs, ok := c.group.CoalesceStats(); ok {
				qc.Coalesce = &cs
			}
		}
		qs = append(qs, qc)
	}
	return qs
}

// queueCount is what a queue's socket took: the frames and bytes it
// received, what the kernel could not deliver to it, and what xdpnet
// refused.
func queueCount(st xdpnet.QueueStats) plane.QueueCount {
	return plane.QueueCount{Queue: st.Queue, Packets: st.Socket.RXFrames, Bytes: st.Socket.RXBytes,
		Dropped: st.Socket.RXDropped + st.Socket.RXRingFull, Refused: st.Drops.Total()}
}

// drainTX lets the kernel send what is still on the queues' TX rings
// (copy mode sends a budget of frames per kick) before the conn closes,
// for at most 100ms: the last datagrams of a test are not dropped with the
// sockets. A write of no messages reclaims the completed frames and kicks
// the kernel when frames wait.
func drainTX(qs []*xdpnet.Queue) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for _, q := range qs {
		if q.ID() == xdpnet.KernelQueue {
			continue
		}
		for q.Stats().Socket.FramesTX > 0 && time.Now().Before(deadline) {
			if _, err := q.WriteBatch(nil); err != nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}
