package coalesce

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Receiver hands the frames of one AF_XDP socket (one RX queue) to the
// application in batches, the way NIC interrupt coalescing does: a batch
// goes out when rx-frames frames are there or rx-usecs passed since its
// first frame was seen, whichever comes first. While idle it sleeps in the
// kernel (ppoll on the socket, nanosecond timeout) and is woken by the
// first frame; while a batch is open it sleeps on a timer instead
// (xsk.Socket.SleepShort), so that the frames arriving meanwhile do not
// each cost a wake-up. Under steady traffic it sleeps one rx-usecs window
// at a time, like a coalescing timer that re-arms under load. A frame
// waits at most rx-usecs plus the timer's wake-up latency
// (RXStats.SleepLateness).
//
// The owning goroutine should be locked to its thread (LockThread): the
// timed sleeps keep the goroutine's P, which is cheaper than handing it
// around for every window, as long as one P of GOMAXPROCS stays free for
// the rest of the program; give the process one P more than it has
// receiving goroutines (runtime.GOMAXPROCS) for all of them to do so.
//
// A Receiver must not be used concurrently, like the socket it wraps; one
// goroutine owns both. Stats may be read from any goroutine. Closing the
// socket ends a Next at once, whether it waits in the kernel for a first
// frame or sleeps for more frames of an open batch.
type Receiver struct {
	s    *xsk.Socket
	b    *xsk.Batch
	p    Params
	core *rxCore
}

type socketRX struct {
	s *xsk.Socket
	b *xsk.Batch
}

func (x *socketRX) receive() int { return x.s.Receive(x.b) }
func (x *socketRX) room() int    { return x.b.Cap() - x.b.Len() }
func (x *socketRX) wait(d time.Duration) (bool, error) {
	return x.s.Wait(d, false)
}

// NewReceiver returns a Receiver for s with parameters p. Parameters out of
// range give an error matching ErrInvalidParams.
func NewReceiver(s *xsk.Socket, p Params, o Options) (*Receiver, error) {
	if s == nil {
		return nil, fmt.Errorf("new receiver: nil socket: %w", ErrInvalidParams)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("new receiver: %w", err)
	}
	p.setDefaults()
	if o.Clock == nil {
		// The system clock, sleeping through the socket so that Close
		// interrupts a sleep for more frames.
		o.Clock = socketClock{Clock: SystemClock(), s: s}
	}
	o.setDefaults()
	r := &Receiver{s: s, b: s.NewBatch(p.BatchSize), p: p}
	r.core = newRXCore(p, o, &socketRX{s: s, b: r.b})
	return r, nil
}

// Next returns the next batch, with at least one frame. The batch belongs
// to the Receiver: hand its frames back (Release, or the socket's
// Release, Transmit or Free) before calling Next again, or Next fails with
// ErrBatchHeld. Next returns ctx's error when ctx ends while no frame is
// pending (a batch already open is handed over instead), and the socket's
// error (xsk.ErrClosed after Close) when its wait fails.
func (r *Receiver) Next(ctx context.Context) (*xsk.Batch, error) {
	if r.b.Len() != 0 {
		return nil, fmt.Errorf("receive: %d frames: %w", r.b.Len(), ErrBatchHeld)
	}
	if _, err := r.core.next(ctx); err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	if r.s.Closed() {
		// Closed while the batch was open: its frames went with the UMEM.
		r.b.Reset()
		return nil, fmt.Errorf("receive: %w", xsk.ErrClosed)
	}
	return r.b, nil
}

// Release gives the frames of the last batch back to the kernel (the
// socket's fill ring).
func (r *Receiver) Release() { r.s.Release(r.b) }

// Socket returns the wrapped socket.
func (r *Receiver) Socket() *xsk.Socket { return r.s }

// Params returns the parameters the Receiver was created with, defaults
// filled in.
func (r *Receiver) Params() Params { return r.p }

// Stats returns the Receiver's counters. It may be called from any
// goroutine.
func (r *Receiver) Stats() RXStats { return r.core.stats() }

// sleeper is what a receiver sleeps through: a socket, or a Poller of
// several.
type sleeper interface {
	SleepShort(d time.Duration) error
	Sleep(d time.Duration) error
}

// socketClock is the system clock whose Sleep is the sockets': a
// nanosecond timer that Close ends.
type socketClock struct {
	Clock
	s sleeper
}

// holders counts the goroutines of the process that sleep holding their P
// (xsk.Socket.SleepShort) right now.
var holders atomic.Int32

// Sleep keeps the goroutine's P for a short sleep (SleepShort) as long as
// that leaves at least one P of GOMAXPROCS for the rest of the program;
// otherwise it sleeps the way the Go scheduler sees (Sleep), which hands
// the P over. Receivers holding every P would leave other goroutines,
// the garbage collector's among them, to run only when the scheduler
// preempts a receiver, every 10ms, and the receiver would then wait for
// them in turn.
func (c socketClock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if d <= xsk.MaxShortSleep && takeHold() {
		c.s.SleepShort(d)
		holders.Add(-1)
		return
	}
	c.s.Sleep(d)
}

// noHold makes every sleep go through the Go scheduler (tests compare).
var noHold atomic.Bool

// takeHold counts the caller among the goroutines sleeping on their P if
// one P of GOMAXPROCS stays free; the caller gives it back with
// holders.Add(-1).
func takeHold() bool {
	if noHold.Load() {
		return false
	}
	if int(holders.Add(1)) < runtime.GOMAXPROCS(0) {
		return true
	}
	holders.Add(-1)
	return false
}
