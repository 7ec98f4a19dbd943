//go:build linux

package xdpnet

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"
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
	id int
	io queueIO // *xskQueue or *kernelQueue

	// calls counts calls in progress: Close waits for them to end.
	// views is set while ReadView's views into the UMEM are out: the
	// UMEM stays mapped until they are released.
	calls atomic.Int32
	views atomic.Bool

	ctr queueCounters
}

// queueIO is what a Queue reads and writes through: an AF_XDP socket
// (xskQueue) or the conn's kernel sockets (kernelQueue). The read side
// belongs to one goroutine; its methods run inside a call the Queue
// marked (acquire).
type queueIO interface {
	// view fills msgs with views of the datagrams waiting, without
	// blocking; the views stay valid until release.
	view(msgs []Message) (int, error)
	// copyOut copies the datagrams waiting into msgs, without blocking
	// (with gro, consecutive ones of a flow into one message).
	copyOut(msgs []Message, gro bool) (int, error)
	// wait blocks until a datagram may be waiting, timeout passed
	// (negative: no limit) or the conn was closed.
	wait(timeout time.Duration) error
	// release gives back what the last view handed out, and reports
	// whether it held anything.
	release() bool
	// write sends msgs (safe for concurrent use).
	write(msgs []Message) (int, error)
	// stats adds the socket's own counters to st.
	stats(st *QueueStats)
}

type queueCounters struct {
	datagrams, bytes, truncated atomic.Uint64
	drops                       [numCauses]atomic.Uint64
	sent, sentBytes             atomic.Uint64
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
// goroutine, also after Close.
func (q *Queue) Stats() QueueStats {
	st := QueueStats{Queue: q.id,
		Datagrams: q.ctr.datagrams.Load(), Bytes: q.ctr.bytes.Load(), Truncated: q.ctr.truncated.Load(),
		Sent: q.ctr.sent.Load(), SentBytes: q.ctr.sentBytes.Load()}
	var d [numCauses]uint64
	for i := range d {
		d[i] = q.ctr.drops[i].Load()
	}
	st.Drops = dropsOf(&d)
	q.io.stats(&st)
	return st
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
// xsk.ErrNoDevice, and when someone detached the conn's XDP program one
// matching xsk.ErrDetached (the kernel queue goes on). For the kernel
// queue the views are of the queue's own buffers, and at most 8
// datagrams are read per call.
func (q *Queue) ReadView(msgs []Message, timeout time.Duration) (int, error) {
	q.Release()
	return read(q, msgs, timeout, (*viewing)(q))
}

// ReadBatch reads up to len(msgs) datagrams of the queue, copying each
// into its message's Buf (with Config.GRO, consecutive datagrams of a
// flow into one message, SegSize set), and blocks up to timeout for the
// first (negative: without limit; 0 and a nil error when it passes).
func (q *Queue) ReadBatch(msgs []Message, timeout time.Duration) (int, error) {
	q.Release()
	return read(q, msgs, timeout, (*copying)(q))
}

// read is ReadView and ReadBatch: through p, inside a marked call.
func read[P poller](q *Queue, msgs []Message, timeout time.Duration, p P) (int, error) {
	if err := q.c.claim(readQueues); err != nil {
		return 0, q.c.opErr("read", netip.AddrPort{}, err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if !q.acquire() {
		return 0, q.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
	}
	defer q.release()
	n, err := readLoop(p, msgs, timeout)
	if err != nil {
		return 0, q.c.opErr("read", netip.AddrPort{}, err)
	}
	return n, nil
}

// Release gives the frames of the last ReadView back to the kernel. The
// views become invalid.
func (q *Queue) Release() {
	if !q.io.release() {
		return
	}
	q.views.Store(false)
	if q.c.closed.Load() {
		q.c.freeUMEM()
	}
}

// poller is one way of reading, for readLoop: try takes what is waiting
// without blocking, wait blocks until more may be (negative timeout: no
// limit).
type poller interface {
	try(msgs []Message) (int, error)
	wait(timeout time.Duration) error
}

// readLoop is every reader's loop: try; when nothing came, give up once
// timeout passed (0: at once; negative: never), else wait and try again.
// It returns the first error of try or wait.
func readLoop[P poller](p P, msgs []Message, timeout time.Duration) (int, error) {
	var deadline time.Time
	for {
		n, err := p.try(msgs)
		if n > 0 || err != nil {
			return n, err
		}
		left := timeout
		switch {
		case timeout == 0:
			return 0, nil
		case timeout > 0:
			if deadline.IsZero() {
				deadline = time.Now().Add(timeout)
			}
			if left = time.Until(deadline); left <= 0 {
				return 0, nil
			}
		}
		if err := p.wait(left); err != nil {
			return 0, err
		}
	}
}

// viewing reads a queue in place (ReadView); copying copies (ReadBatch).
type (
	viewing Queue
	copying Queue
)

func (v *viewing) try(msgs []Message) (int, error) {
	n, err := v.io.view(msgs)
	if n > 0 {
		v.views.Store(true)
	}
	return n, err
}

func (v *viewing) wait(timeout time.Duration) error { return v.io.wait(timeout) }

func (c *copying) try(msgs []Message) (int, error) { return c.io.copyOut(msgs, c.c.cfg.GRO) }

func (c *copying) wait(timeout time.Duration) error { return c.io.wait(timeout) }

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
// The kernel queue writes through the conn's kernel socket.
func (q *Queue) WriteBatch(msgs []Message) (int, error) { return q.io.write(msgs) }
