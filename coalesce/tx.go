package coalesce

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Transmitter batches the frames an application sends on one AF_XDP socket
// (one TX queue), like `ethtool -Q … --coalesce tx-usecs/tx-frames`: frames
// submitted one by one wait in a pending batch until tx-frames of them are
// there or tx-usecs passed since the oldest, and then go to the TX ring
// together, with one kick (made only when the kernel asks for one).
// Completed frames are reclaimed in batches, at each flush and Poll.
//
// Time-based flushes happen in Submit and Poll: an application that may
// stop submitting calls Poll when the duration it returned has passed (or
// Flush). A Transmitter must not be used concurrently; one goroutine owns
// it and its socket. Stats may be read from any goroutine.
type Transmitter struct {
	s    *xsk.Socket
	pend *xsk.Batch
	p    TxParams
	core *txCore
}

type socketTx struct {
	s    *xsk.Socket
	pend *xsk.Batch
}

func (x *socketTx) flush() (int, error) {
	n, err := x.s.Transmit(x.pend)
	if x.pend.Len() > 0 && err == nil {
		// The ring was full: reclaim what the kernel finished and retry once.
		x.s.Complete()
		var m int
		m, err = x.s.Transmit(x.pend)
		n += m
	}
	return n, err
}

func (x *socketTx) reclaim() int {
	if x.s.TxPending() == 0 {
		return 0
	}
	return x.s.Complete()
}

// NewTransmitter returns a Transmitter for s with parameters p. Parameters
// out of range give an error matching ErrInvalidParams.
func NewTransmitter(s *xsk.Socket, p TxParams, o Options) (*Transmitter, error) {
	if s == nil {
		return nil, fmt.Errorf("new transmitter: nil socket: %w", ErrInvalidParams)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("new transmitter: %w", err)
	}
	p.setDefaults()
	o.setDefaults()
	t := &Transmitter{s: s, pend: s.NewBatch(p.BatchSize), p: p}
	t.core = newTxCore(p, o, &socketTx{s: s, pend: t.pend})
	return t, nil
}

// Alloc appends up to n free frames of the socket to b (reclaiming
// completed ones when the pool runs short) and returns how many.
func (t *Transmitter) Alloc(b *xsk.Batch, n int) int { return t.s.Alloc(b, n) }

// Submit moves the frames of b into the pending batch and returns how many
// it took; b keeps, in order, those that did not fit (the pending batch is
// full and the TX ring has no room), for a later call. It flushes when
// tx-frames are pending, when tx-usecs passed since the oldest pending
// frame, or at once with tx-usecs 0. The error is the socket's (interface
// down, device gone); the frames stay accounted for either way.
func (t *Transmitter) Submit(b *xsk.Batch) (int, error) {
	taken := 0
	for b.Len() > 0 {
		room := t.pend.Cap() - t.pend.Len()
		if room == 0 {
			if err := t.core.flush(t.core.clock.Now(), rxFrameLimit); err != nil {
				t.keep(b, taken)
				return taken, fmt.Errorf("submit: %w", err)
			}
			if room = t.pend.Cap() - t.pend.Len(); room == 0 {
				break
			}
		}
		k := min(room, b.Len())
		for i := 0; i < k; i++ {
			t.pend.Append(b.Desc(i))
		}
		t.keep(b, k)
		taken += k
		if err := t.core.submitted(k); err != nil {
			return taken, fmt.Errorf("submit: %w", err)
		}
	}
	return taken, nil
}

// keep drops the first k descriptors of b (they moved to the pending
// batch), keeping the rest in order.
func (t *Transmitter) keep(b *xsk.Batch, k int) {
	if k == 0 {
		return
	}
	if k == b.Len() {
		b.Reset()
		return
	}
	rest := make([]xsk.Desc, 0, b.Len()-k)
	for i := k; i < b.Len(); i++ {
		rest = append(rest, b.Desc(i))
	}
	b.Reset()
	for _, d := range rest {
		b.Append(d)
	}
}

// Poll flushes when tx-usecs passed since the oldest pending frame,
// reclaims completed frames, and returns how long until the next flush is
// due (negative when nothing is pending).
func (t *Transmitter) Poll() (time.Duration, error) {
	d, err := t.core.poll()
	if err != nil {
		return d, fmt.Errorf("poll: %w", err)
	}
	if d < 0 {
		if r := t.core.sink.reclaim(); r > 0 {
			t.core.st.reclaims.Add(1)
			t.core.st.reclaimed.Add(uint64(r))
		}
	}
	return d, nil
}

// Flush hands every pending frame to the kernel now.
func (t *Transmitter) Flush() error {
	if err := t.core.flush(t.core.clock.Now(), rxEarly); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// Pending returns how many submitted frames wait for a flush.
func (t *Transmitter) Pending() int { return t.pend.Len() }

// Socket returns the wrapped socket.
func (t *Transmitter) Socket() *xsk.Socket { return t.s }

// Params returns the parameters, defaults filled in.
func (t *Transmitter) Params() TxParams { return t.p }

// Stats returns the Transmitter's counters. It may be called from any
// goroutine. The kicks themselves are counted by the socket (xsk.Stats).
func (t *Transmitter) Stats() TxStats { return t.core.stats() }
