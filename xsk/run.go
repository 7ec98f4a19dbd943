package xsk

import (
	"errors"
	"time"
)

// Shape is how Device.Receive and Device.Send spread the device's sockets
// over goroutines.
type Shape int

const (
	// ShapeAuto picks the number of goroutines from the CPUs the process
	// may use (GOMAXPROCS and its CPU set) and deals the sockets to them:
	// a receiver takes two CPUs per goroutine (one for the goroutine, one
	// for the kernel's softirq work that fills its rings), a sender one
	// (its kicks do the kernel's work in its own syscalls). With as many
	// goroutines as sockets that is ShapePerQueue; with one, ShapeOne.
	ShapeAuto Shape = iota
	// ShapePerQueue runs one goroutine per socket, each locked to its
	// thread.
	ShapePerQueue
	// ShapeOne runs every socket in one goroutine, locked to its thread,
	// which waits on all of them at once (Poller). With fewer CPUs than
	// queues it wakes once for many queues instead of once per queue. (A
	// goroutine that ShapeAuto gives several sockets runs them the same
	// way.)
	ShapeOne
)

// String returns "auto", "per-queue" or "one".
func (s Shape) String() string {
	switch s {
	case ShapeAuto:
		return "auto"
	case ShapePerQueue:
		return "per-queue"
	case ShapeOne:
		return "one"
	}
	return "Shape(?)"
}

// DefaultNap is the longest nap of the runner's adaptive napping.
const DefaultNap = 100 * time.Microsecond

// RunConfig tunes Device.Receive and Device.Send. The zero value is the
// documented default and the one to start from.
type RunConfig struct {
	// Shape spreads the sockets over goroutines (default ShapeAuto).
	Shape Shape
	// Batch is the most descriptors one handler call gets (Receive, default
	// 64) or one filler call fills (Send, default 256); 1 to 4096.
	Batch int
	// Nap is the longest nap of a receiver (default DefaultNap; negative
	// never naps). A receiver that sees packets arrive fast enough that a
	// nap would gather at least NapMinFrames of them sleeps on a timer
	// instead of waiting in poll, so that one wake-up serves a batch, the
	// way NAPI does. At low rates it waits in poll and wakes for every
	// packet, so latency stays that of a plain poll loop.
	Nap time.Duration
	// BusyPoll, when its Timeout is set, makes every receiver wait by
	// epoll busy polling (Poller.BusyPoll): the goroutine runs its queue's
	// NAPI itself before it sleeps, and never naps. With the queues' NAPI
	// irq-suspend-timeout set (Config.NAPIDeferral), the device's IRQs
	// stay suspended while the receivers keep up. It costs a CPU per
	// receiver while traffic flows: for a receiver that has cores of its
	// own. Receive only.
	BusyPoll BusyPoll
	// LinkChange, if set, is called (on the runner's goroutine) when a
	// sender finds the link down (false) and when it could send again
	// (true). A link that is down does not end Send: it waits and resumes.
	LinkChange func(s *Socket, up bool)
}

// NapMinFrames is how many frames the runner expects a nap to gather
// before it naps instead of waiting in poll.
const NapMinFrames = 8

// A Handler gets every batch a runner receives, with the socket it came
// from. The frames are valid until the handler returns; the runner then
// gives back to the kernel what is left in b. A handler may Transmit
// frames of b on s (or on any socket of the same UMEM, from the goroutine
// that owns it): they leave b, and the runner reclaims them when they
// complete. With ShapePerQueue the handler runs on several goroutines at
// once, one per socket; state it shares must be per socket or atomic.
type Handler func(s *Socket, b *Batch)

// A Filler fills frames the runner allocated for sending: b holds up to
// RunConfig.Batch descriptors, each with Len 0. The filler writes packets
// into b.Buffer(i) and sets their lengths with b.SetLen(i, n); frames left
// with length 0 are not sent. Returning ErrStop ends this socket's sender
// after the batch is sent; any other error ends Send with it. With
// ShapePerQueue fillers run on several goroutines at once.
type Filler func(s *Socket, b *Batch) error

// ErrStop, returned by a Filler, ends that socket's sender cleanly.
var ErrStop = errors.New("stop sending")

func (c *RunConfig) withDefaults(batch int) (RunConfig, error) {
	r := *c
	if r.Batch == 0 {
		r.Batch = batch
	}
	if r.Batch < 1 || r.Batch > 4096 {
		return r, invalid("RunConfig.Batch", r.Batch, "want 1-4096")
	}
	if r.Nap == 0 {
		r.Nap = DefaultNap
	}
	if r.Shape < ShapeAuto || r.Shape > ShapeOne {
		return r, invalid("RunConfig.Shape", int(r.Shape), "want ShapeAuto, ShapePerQueue or ShapeOne")
	}
	return r, nil
}

// A Napper decides, NAPI style, whether a receive loop that found its RX
// rings empty should nap on a timer or wait in poll, from the rate frames
// arrived at over the last millisecond: it naps while a nap would gather
// at least NapMinFrames frames, and then never longer than its maximum or
// than a quarter of the smallest RX ring (or fill ring, or the frames the
// socket lends the kernel) takes to fill. Device.Receive
// uses one; loops of your own (or a Poller's) can too. A Napper belongs
// to the goroutine that runs the loop.
type Napper struct {
	max   time.Duration
	ring  int // frames a quarter of the RX rings hold
	start time.Time
	got   int
	rate  float64 // frames per second over the last window
	naps  uint64  // idle rings answered with a nap
	waits uint64  // idle rings answered with a poll wait
}

// NewNapper returns a Napper for a loop over socks whose naps last at
// most maxNap (0: DefaultNap; negative: it never naps).
func NewNapper(maxNap time.Duration, socks ...*Socket) Napper {
	if maxNap == 0 {
		maxNap = DefaultNap
	}
	q := 0
	for _, s := range socks {
		if s == nil || s.rx == nil {
			continue
		}
		// What a nap may let pile up: a quarter of the RX ring, of the
		// fill ring, or of the frames the socket lends the kernel,
		// whichever is least (a small UMEM under RLIMIT_MEMLOCK lends
		// fewer frames than the rings hold).
		n := min(int(s.rx.mask+1), int(s.fill.mask+1), max(s.owned-s.reserve, 4)) / 4
		if q == 0 || n < q {
			q = n
		}
	}
	if q == 0 {
		q = 512
	}
	return newNapper(maxNap, q)
}

// Received counts frames the loop received.
func (n *Napper) Received(frames int) { n.got += frames }

// Idle is called when the rings are empty: it returns how long to nap, or
// 0 to wait in poll.
func (n *Napper) Idle() time.Duration { return n.idle(time.Now()) }

// napWindow is how long the napper counts frames before it updates its rate.
const napWindow = time.Millisecond

// minNap is the shortest nap: shorter ones cost a timer for too few frames.
const minNap = 20 * time.Microsecond

func newNapper(max time.Duration, ringQuarter int) Napper {
	return Napper{max: max, ring: max1(ringQuarter), start: time.Now()}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func (n *Napper) idle(now time.Time) time.Duration {
	if el := now.Sub(n.start); el >= napWindow {
		n.rate = float64(n.got) / el.Seconds()
		n.got, n.start = 0, now
	}
	if n.max <= 0 || n.rate*n.max.Seconds() < NapMinFrames {
		n.waits++
		return 0
	}
	d := n.max
	// Never nap so long that the rings could fill: a quarter of them.
	if fill := time.Duration(float64(n.ring) / n.rate * float64(time.Second)); fill < d {
		d = fill
	}
	n.naps++
	return max(d, minNap)
}
