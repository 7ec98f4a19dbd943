package coalesce

import (
	"context"
	"fmt"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// GroupReceiver is a Receiver for the sockets of several queues, owned by
// one goroutine: the batch is the frames of all of them, rx-frames counts
// them together, and rx-usecs runs from the first frame seen on any of
// them. Idle, it sleeps in the kernel on all the sockets at once
// (xsk.Poller); with a batch open it sleeps on one timer for all.
//
// One thread per queue is the usual shape, and the right one when every
// queue has a CPU to itself. On a machine with fewer CPUs than queues
// (say, two CPUs for a sender and a two-queue receiver), the threads of
// one receiver contend with each other and with everything else for a CPU
// at every wake-up; one thread for all the queues wakes once per window
// instead of once per queue, and waits less for a CPU when it does.
//
// What holds for a Receiver holds here: one goroutine owns the
// GroupReceiver and its sockets, locked to its thread (LockThread); Stats
// may be read from any goroutine; closing any of the sockets ends a Next
// with xsk.ErrClosed.
type GroupReceiver struct {
	groupRX // the sockets and their batches
	p       Params
	core    *rxCore
}

type groupRX struct {
	socks  []*xsk.Socket
	bs     []*xsk.Batch
	poller *xsk.Poller
}

func (x *groupRX) receive() int {
	n := 0
	for i, s := range x.socks {
		n += s.Receive(x.bs[i])
	}
	return n
}

// room is the room left in the fullest batch: a queue whose batch is full
// ends the group's batch, so that it is not held back by the others.
func (x *groupRX) room() int {
	r := x.bs[0].Cap() - x.bs[0].Len()
	for _, b := range x.bs[1:] {
		r = min(r, b.Cap()-b.Len())
	}
	return r
}

func (x *groupRX) wait(d time.Duration) (bool, error) { return x.poller.WaitRX(d) }

// NewGroupReceiver returns a GroupReceiver for socks (at least one, each
// at most once) with parameters p; Params.BatchSize is the capacity of
// each socket's batch. Parameters out of range give an error matching
// ErrInvalidParams.
func NewGroupReceiver(socks []*xsk.Socket, p Params, o Options) (*GroupReceiver, error) {
	if len(socks) == 0 {
		return nil, fmt.Errorf("new group receiver: no sockets: %w", ErrInvalidParams)
	}
	seen := make(map[*xsk.Socket]bool, len(socks))
	for i, s := range socks {
		if s == nil {
			return nil, fmt.Errorf("new group receiver: socket %d is nil: %w", i, ErrInvalidParams)
		}
		if seen[s] {
			return nil, fmt.Errorf("new group receiver: socket %d (queue %d) given twice: %w", i, s.Queue(), ErrInvalidParams)
		}
		seen[s] = true
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("new group receiver: %w", err)
	}
	p.setDefaults()
	poller := xsk.NewPoller(socks...)
	if o.Clock == nil {
		o.Clock = socketClock{Clock: SystemClock(), s: poller}
	}
	o.setDefaults()
	g := &GroupReceiver{groupRX: groupRX{socks: poller.Sockets(), poller: poller}, p: p}
	for _, s := range g.socks {
		g.bs = append(g.bs, s.NewBatch(p.BatchSize))
	}
	g.core = newRXCore(p, o, &g.groupRX)
	return g, nil
}

// Next returns the next batch: one xsk.Batch per socket, in the order the
// sockets were given, together holding at least one frame (a socket with
// none has an empty batch). The batches belong to the GroupReceiver: hand
// their frames back (Release, or each socket's Release, Transmit or Free)
// before calling Next again, or Next fails with ErrBatchHeld. Next ends as
// Receiver.Next does.
func (g *GroupReceiver) Next(ctx context.Context) ([]*xsk.Batch, error) {
	for i, b := range g.bs {
		if b.Len() != 0 {
			return nil, fmt.Errorf("receive: %d frames of queue %d: %w", b.Len(), g.socks[i].Queue(), ErrBatchHeld)
		}
	}
	if _, err := g.core.next(ctx); err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	for _, s := range g.socks {
		if s.Closed() {
			// Closed while the batch was open: frames went with the UMEM.
			for _, b := range g.bs {
				b.Reset()
			}
			return nil, fmt.Errorf("receive: queue %d: %w", s.Queue(), xsk.ErrClosed)
		}
	}
	return g.bs, nil
}

// Release gives the frames of the last batch back to the kernel (each
// socket's fill ring).
func (g *GroupReceiver) Release() {
	for i, s := range g.socks {
		if g.bs[i].Len() > 0 {
			s.Release(g.bs[i])
		}
	}
}

// Sockets returns the sockets, in the order given.
func (g *GroupReceiver) Sockets() []*xsk.Socket { return g.socks }

// Params returns the parameters the GroupReceiver was created with,
// defaults filled in.
func (g *GroupReceiver) Params() Params { return g.p }

// Stats returns the GroupReceiver's counters (one policy for all its
// sockets). It may be called from any goroutine.
func (g *GroupReceiver) Stats() RXStats { return g.core.stats() }
