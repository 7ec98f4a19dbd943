package coalesce

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Transmitter batches the frames an application sends on one AF_XDP socket
// (one TX queue), like `ethtool -Q … --coalesce tx-usecs/tx-frames`: each
// Submit puts its frames on the socket's TX ring at once
// (xsk.Socket.Submit, no syscall), and the kernel is kicked for all of
// them together (xsk.Socket.Flush, a kick only when the kernel asks for
// one) when tx-frames are pending or tx-usecs passed since the oldest.
// Completed frames are reclaimed in batches, at each flush and Poll.
//
// Time-based flushes happen in Submit and Poll: an application that may
// stop submitting calls Poll when the duration it returned has passed (or
// Flush). A Transmitter must not be used concurrently; one goroutine owns
// it and its socket. Stats may be read from any goroutine.
type Transmitter struct {
	s    *xsk.Socket
	p    TXParams
	core *txCore
	ring *ringTX
}

// ringTX keeps the pending frames on the socket's TX ring: Submit puts
// them there, flush kicks the kernel once for all of them.
type ringTX struct {
	s    *xsk.Socket
	held int // frames submitted since the last flush
}

func (x *ringTX) flush() (int, error) {
	n := x.held
	x.held = 0
	return n, x.s.Flush()
}

func (x *ringTX) reclaim() int {
	if x.s.TXPending() == 0 {
		return 0
	}
	return x.s.Complete()
}

// NewTransmitter returns a Transmitter for s with parameters p. Parameters
// out of range give an error matching ErrInvalidParams.
func NewTransmitter(s *xsk.Socket, p TXParams, o Options) (*Transmitter, error) {
	if s == nil {
		return nil, fmt.Errorf("new transmitter: nil socket: %w", ErrInvalidParams)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("new transmitter: %w", err)
	}
	p.setDefaults()
	o.setDefaults()
	t := &Transmitter{s: s, p: p, ring: &ringTX{s: s}}
	t.core = newTXCore(p, o, t.ring)
	return t, nil
}

// Alloc appends up to n free frames of the socket to b (reclaiming
// completed ones when the pool runs short) and returns how many.
func (t *Transmitter) Alloc(b *xsk.Batch, n int) int { return t.s.Alloc(b, n) }

// Submit puts the frames of b on the TX ring and returns how many it
// took; b keeps, in order, those that did not fit (the ring is full even
// after a flush and a reclaim), for a later call. It flushes when tx-frames
// are pending, when tx-usecs passed since the oldest pending frame, or at
// once with tx-usecs 0. The error is the socket's (interface down, device
// gone); the frames stay accounted for either way.
func (t *Transmitter) Submit(b *xsk.Batch) (int, error) {
	taken, retried := 0, false
	for b.Len() > 0 {
		n, err := t.s.Submit(b)
		if err != nil {
			return taken, fmt.Errorf("submit: %w", err)
		}
		if n == 0 {
			// The ring is full: hand the kernel what is pending, take
			// back what it finished, and try once more.
			t.core.st.full.Add(1)
			if retried {
				break
			}
			retried = true
			if err := t.core.flush(t.core.clock.Now(), rxFrameLimit); err != nil {
				return taken, fmt.Errorf("submit: %w", err)
			}
			t.s.Complete()
			continue
		}
		taken += n
		t.ring.held += n
		if err := t.core.submitted(n); err != nil {
			return taken, fmt.Errorf("submit: %w", err)
		}
	}
	return taken, nil
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
func (t *Transmitter) Pending() int { return t.ring.held }

// Socket returns the wrapped socket.
func (t *Transmitter) Socket() *xsk.Socket { return t.s }

// Params returns the parameters, defaults filled in.
func (t *Transmitter) Params() TXParams { return t.p }

// Stats returns the Transmitter's counters. It may be called from any
// goroutine. The kicks themselves are counted by the socket (xsk.Stats).
func (t *Transmitter) Stats() TXStats { return t.core.stats() }
