//go:build linux

package xdpnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// xskQueue is a Queue's AF_XDP socket: one RX queue of the conn's
// interface, read in place or by copy, and its TX ring.
type xskQueue struct {
	q  *Queue
	s  *xsk.Socket
	fd int // s's descriptor, for the conn's poll (read once: Close clears the socket's)

	// RX side: the owning goroutine (or the conn's reader, under rmu).
	vb      *xsk.Batch         // frames view handed out views of
	holding bool               // vb's views are out
	rcv     *coalesce.Receiver // with Config.Coalesce: vb comes from it
	ready   *xsk.Batch         // a coalesced batch wait received, for view
	rb      *xsk.Batch         // frames copyOut takes datagrams from
	rnext   int                // frames of rb looked at
	nap     xsk.Napper         // nap or wait in poll (Config.RXNap)

	// TX side, under txmu.
	txmu sync.Mutex
	tb   *xsk.Batch
	ipID uint16
}

func newXSKQueue(c *UDPConn, s *xsk.Socket) *xskQueue {
	x := &xskQueue{s: s, fd: s.FD(), nap: xsk.NewNapper(c.cfg.RXNap, s)}
	x.q = &Queue{c: c, id: s.Queue(), io: x}
	x.tb = s.NewBatch(maxSegments + c.cfg.BatchSize)
	x.ipID = uint16(s.Queue() << 12)
	return x
}

func (x *xskQueue) stats(st *QueueStats) {
	st.Socket, _ = x.s.Stats() // kept by the socket after Close
	if x.rcv != nil {
		cs := x.rcv.Stats()
		st.Coalesce = &cs
	}
}

// parse finds the datagram for the conn in a received frame; with
// deferred, the payload's checksum is left to the copy (rxDatagram).
func (x *xskQueue) parse(f []byte, d *rxDatagram, deferred bool) cause {
	c := x.q.c
	p := &c.parser
	if deferred {
		p = &c.copyParser
	}
	why := p.parse(f, d)
	if why == causeOK && c.raddr.IsValid() && d.src != c.raddr {
		why = causeOtherPeer
	}
	return why
}

// sockErr is the error a read reports for an error of the socket.
func (x *xskQueue) sockErr(err error) error {
	if errors.Is(err, xsk.ErrClosed) || x.q.c.closed.Load() {
		return net.ErrClosed
	}
	return err
}

// view takes a batch of frames without waiting and turns them into views
// (frames that carry no datagram for the conn are counted and given
// back, and the next batch is taken).
func (x *xskQueue) view(msgs []Message) (int, error) {
	if x.q.c.cfg.Coalesce != nil {
		return x.coalescedView(msgs)
	}
	n := min(len(msgs), maxBatch)
	if x.vb == nil || x.vb.Cap() != n {
		x.vb = x.s.NewBatch(n)
	}
	for {
		k := x.s.Receive(x.vb)
		if k == 0 {
			return 0, nil
		}
		x.nap.Received(k)
		if k := x.viewsOf(msgs); k > 0 {
			x.holding = true
			return k, nil
		}
		x.s.Release(x.vb)
	}
}

// wait naps while datagrams flow (Config.RXNap), else waits in poll.
func (x *xskQueue) wait(timeout time.Duration) error {
	if x.q.c.cfg.Coalesce != nil {
		return x.coalescedWait(timeout)
	}
	if d := x.nap.Idle(); d > 0 {
		if timeout > 0 {
			d = min(d, timeout)
		}
		if err := x.s.Sleep(d); err != nil {
			return net.ErrClosed
		}
		return nil
	}
	if _, err := x.s.Wait(timeout, false); err != nil {
		return x.sockErr(err)
	}
	return nil
}

// done is an ended context: Receiver.Next with it hands over what is
// there (an open batch) without waiting.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// coalescedView is view through the queue's coalescing Receiver: the
// batch wait received, or what Next hands over without waiting. At most
// len(msgs) datagrams of the batch become views (the receiver's BatchSize
// should not exceed it).
func (x *xskQueue) coalescedView(msgs []Message) (int, error) {
	if err := x.receiver(len(msgs)); err != nil {
		return 0, err
	}
	b := x.ready
	x.ready = nil
	if b == nil {
		var err error
		if b, err = x.rcv.Next(done); err != nil {
			if errors.Is(err, context.Canceled) {
				return 0, nil
			}
			return 0, x.sockErr(err)
		}
	}
	x.vb = b
	if k := x.viewsOf(msgs); k > 0 {
		x.holding = true
		return k, nil
	}
	x.rcv.Release()
	return 0, nil
}

// coalescedWait waits for the Receiver's next batch, which the next view
// takes.
func (x *xskQueue) coalescedWait(timeout time.Duration) error {
	ctx := context.Background()
	if timeout >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	b, err := x.rcv.Next(ctx)
	switch {
	case err == nil:
		x.ready = b
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return x.sockErr(err)
}

// receiver makes the queue's coalescing Receiver on first use.
func (x *xskQueue) receiver(room int) error {
	if x.rcv == nil {
		p := *x.q.c.cfg.Coalesce
		if p.BatchSize == 0 {
			p.BatchSize = x.q.c.cfg.BatchSize
		}
		r, err := coalesce.NewReceiver(x.s, p, coalesce.Options{IdleWait: readSlice})
		if err != nil {
			return err
		}
		x.rcv = r
	}
	if b := x.rcv.Params().BatchSize; room < b {
		// A coalesced batch is handed over whole.
		return fmt.Errorf("%w: %d messages for coalesced batches of %d", ErrInvalidConfig, room, b)
	}
	return nil
}

// viewsOf turns the frames of vb into messages, at most len(msgs) of
// them.
func (x *xskQueue) viewsOf(msgs []Message) int {
	var drops [numCauses]uint64
	n := 0
	var bytes uint64
	var d rxDatagram
	for i := 0; i < x.vb.Len() && n < len(msgs); i++ {
		why := x.parse(x.vb.Frame(i), &d, false)
		if why != causeOK {
			drops[why]++
			continue
		}
		msgs[n] = Message{Buf: d.payload, N: len(d.payload), Addr: d.src, LocalPort: d.dst.Port(), ECN: d.ecn}
		bytes += uint64(len(d.payload))
		n++
	}
	x.q.count(n, bytes, 0, &drops)
	return n
}

func (x *xskQueue) release() bool {
	if !x.holding {
		return false
	}
	x.holding = false
	if x.rcv != nil {
		x.rcv.Release()
	} else {
		x.s.Release(x.vb)
	}
	return true
}

// copyOut copies the queue's datagrams into msgs without waiting and
// returns how many messages it filled.
func (x *xskQueue) copyOut(msgs []Message, gro bool) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if x.rb == nil {
		x.rb = x.s.NewBatch(x.q.c.cfg.BatchSize)
	}
	var drops [numCauses]uint64
	var bytes, truncated uint64
	var d rxDatagram
	datagrams := 0
	n := 0
	for n < len(msgs) {
		if x.rnext == x.rb.Len() {
			if x.rb.Len() > 0 {
				x.s.Release(x.rb)
				x.rnext = 0
			}
			k := x.s.Receive(x.rb)
			if k == 0 {
				break
			}
			x.nap.Received(k)
		}
		for x.rnext < x.rb.Len() && n < len(msgs) {
			why := x.parse(x.rb.Frame(x.rnext), &d, true)
			x.rnext++
			if why != causeOK {
				drops[why]++
				continue
			}
			if d.deferred && (gro && n > 0 && canMerge(&msgs[n-1], &d) || len(msgs[n].Buf) < len(d.payload)) {
				// Merged or cut short, the payload is not copied whole in
				// one go: finish the checksum on its own.
				if why = x.q.c.parser.finishSum(&d, offload.Checksum(d.payload, 0)); why != causeOK {
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
				if why = x.q.c.parser.finishSum(&d, ps); why != causeOK {
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
	if x.rnext == x.rb.Len() && x.rb.Len() > 0 {
		// Everything looked at: the frames go back to the kernel now.
		x.s.Release(x.rb)
		x.rnext = 0
	}
	x.q.count(datagrams, bytes, truncated, &drops)
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
