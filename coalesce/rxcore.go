package coalesce

import (
	"context"
	"sync/atomic"
	"time"
)

// minSleep is the shortest wait worth a syscall: a batch whose deadline is
// closer than this is handed over at once.
const minSleep = 2 * time.Microsecond

// rxSource is what the RX policy needs from a socket: take what the RX
// ring holds into the pending batch, tell how much room the batch has left,
// and block in the kernel until the ring is readable.
type rxSource interface {
	receive() int
	room() int
	wait(d time.Duration) (bool, error)
}

// Why a batch was handed over.
type rxReason int

const (
	rxNone rxReason = iota
	rxImmediate
	rxFrameLimit
	rxTimer
	rxEarly
)

type rxGroup struct {
	seen time.Duration // the ring was last seen without these frames
	n    int
}

// rxCounters are the RX statistics, written by the owner, read anywhere.
type rxCounters struct {
	batches, frames                        atomic.Uint64
	immediate, frameLimit, timerExp, early atomic.Uint64
	polls, sleeps                          atomic.Uint64
	profileChanges                         atomic.Uint64
	profile, usecs, framesLim              atomic.Int64
	late                                   atomic.Int64
	perBatch, delay                        recorder
}

// rxCore is the RX coalescing policy, independent of the socket so that it
// runs against a fake ring and clock in tests.
type rxCore struct {
	clock    Clock
	src      rxSource
	idleWait time.Duration

	usecs  time.Duration // rx-usecs in force
	frames int           // rx-frames in force
	mod    *moderator

	pending   int
	open      bool
	start     time.Duration // lower bound of the first frame's arrival
	lastCheck time.Duration // when the ring was last seen empty
	groups    []rxGroup

	rate        float64 // frames per nanosecond, smoothed
	lastDeliver time.Duration
	delivered   bool
	polled      bool    // waited in the kernel since the last delivery
	blind       bool    // the last wait was a sleep with no batch open
	missed      int     // such sleeps in a row that found nothing
	speculated  bool    // the last wait was a sleep hoping for frames
	hit         float64 // smoothed share of such sleeps that found frames
	events      uint64
	late        time.Duration // smoothed lateness of timed sleeps
	slept       bool          // the last wait was a timed sleep of sleepReq
	woke        bool          // the last wait was a kernel wait
	sleepReq    time.Duration // until sleepEnd
	sleepEnd    time.Duration
	fresh       bool // no wait or sleep since the last clock read (lastCheck)

	st rxCounters
}

func newRXCore(p Params, o Options, src rxSource) *rxCore {
	c := &rxCore{clock: o.Clock, src: src, idleWait: o.IdleWait, hit: 1}
	if p.Adaptive {
		c.mod = newModerator(Profiles(p.RXUsecs, p.RXFrames))
		c.setProfile(c.mod.profile())
		c.st.profile.Store(0)
	} else {
		c.setProfile(Profile{p.RXUsecs, p.RXFrames})
		c.st.profile.Store(-1)
	}
	c.lastCheck = c.clock.Now()
	return c
}

func (c *rxCore) setProfile(p Profile) {
	c.usecs, c.frames = usecs(p.Usecs), p.Frames
	c.st.usecs.Store(int64(p.Usecs))
	c.st.framesLim.Store(int64(p.Frames))
}

// next waits for the next batch and returns its size, or 0 and an error.
// The frames are in the source's batch.
func (c *rxCore) next(ctx context.Context) (int, error) {
	for {
		n := c.src.receive()
		// At most one clock read per look at the ring: on a virtual
		// machine without a vDSO clock it is a syscall. It also ends the
		// previous sleep or wait. An empty ring seen right after a
		// delivery, with no wait since the last read, keeps that read:
		// the application's time since then only makes the recorded
		// delays larger (they are upper bounds), and nothing is open
		// whose deadline could pass unnoticed.
		var now time.Duration
		if n == 0 && c.fresh && !c.open {
			now = c.lastCheck
		} else {
			now = c.clock.Now()
		}
		c.fresh = true
		if c.slept {
			c.slept = false
			late := min(max(now-c.sleepEnd, 0), c.sleepReq)
			c.late += (late - c.late) / 8
			c.st.late.Store(int64(c.late))
		}
		if c.woke {
			// Frames that ended a kernel wait arrived about now.
			c.woke = false
			if n > 0 && c.usecs > 0 && now-c.lastCheck < c.usecs {
				// They came within one window of the wait: sleeping a
				// window would have caught them too. Without this, a
				// receiver whose sleeps once stopped paying, and whose
				// batches then all end at rx-frames (never reaching
				// due's creep back), would wait in the kernel for ever.
				c.hit += (1 - c.hit) / 4
			}
			c.lastCheck = now
		}
		if n > 0 {
			if !c.open {
				c.open, c.start = true, c.lastCheck
			}
			c.groups = append(c.groups, rxGroup{c.lastCheck, n})
			c.pending += n
			c.missed = 0
		} else if c.blind {
			c.missed++
		}
		if c.speculated {
			c.speculated = false
			if n > 0 {
				c.hit += (1 - c.hit) / 4
			} else {
				c.hit -= c.hit / 4
			}
		}
		c.blind = false
		c.lastCheck = now
		if c.open {
			reason := c.due(ctx, now)
			if reason == rxNone {
				continue
			}
			return c.deliver(now, reason), nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// One empty window is a gap in the traffic more often than its
		// end: sleeping one more window costs one wake-up, where a wait
		// for the first frame would cost two (the wait, then the rest of
		// the window).
		if c.usecs > 0 && c.missed < 2 && c.hit >= 0.5 && c.rate*float64(c.usecs) >= 1 {
			// Steady traffic: at least one frame is expected per window,
			// so sleep a whole window instead of being woken by the first
			// frame (the way a NIC's coalescing timer re-arms under load).
			// A frame arriving meanwhile waits less than rx-usecs.
			// If rx-frames should be there sooner, sleep only that long.
			// A sleep shorter than the timer's lateness costs the same
			// wake-up and ends no sooner: ask for at least that.
			d := c.usecs
			if est := time.Duration(float64(c.frames) / c.rate); est < d {
				d = max(est, minSleep, min(c.late, c.usecs))
			}
			c.blind, c.speculated = true, true
			c.sleep(now, d)
			continue
		}
		d := c.idleWait
		if dl, ok := ctx.Deadline(); ok {
			rem := time.Until(dl)
			if rem <= 0 {
				return 0, context.DeadlineExceeded
			}
			d = min(d, rem)
		}
		c.st.polls.Add(1)
		c.events++
		c.polled, c.fresh = true, false
		if _, err := c.src.wait(d); err != nil {
			return 0, err
		}
		c.woke = true
	}
}

// due decides whether the open batch goes now; if not, it sleeps (for the
// rest of rx-usecs, or less if rx-frames should be there sooner at the
// measured rate) and returns rxNone.
func (c *rxCore) due(ctx context.Context, now time.Duration) rxReason {
	if c.usecs == 0 {
		return rxImmediate
	}
	if c.pending >= c.frames || c.src.room() == 0 {
		return rxFrameLimit
	}
	deadline := c.start + c.usecs
	if now >= deadline {
		return rxTimer
	}
	if ctx.Err() != nil {
		return rxEarly
	}
	rem := deadline - now
	if rem < max(minSleep, c.late) {
		// A sleep would end after the deadline anyway: go now, a little
		// early, rather than pay another wake-up and be late.
		return rxTimer
	}
	if c.hit < 0.5 {
		// Most recent sleeps caught nothing: the traffic comes in bursts
		// further apart than rx-usecs, each already a batch. Go now, and
		// creep back towards trying again.
		c.hit += (1 - c.hit) / 16
		return rxEarly
	}
	d := rem
	if c.rate > 0 {
		if c.rate*float64(rem) < 1 {
			// Not even one more frame is expected before the deadline:
			// waiting would cost a wake-up and add delay for nothing.
			return rxEarly
		}
		est := time.Duration(float64(c.frames-c.pending) / c.rate)
		if est < c.late {
			// rx-frames will be there before any sleep could end: a
			// sleep would only cost a wake-up. Hand over what is here;
			// the next look takes the rest.
			return rxEarly
		}
		if est < d {
			d = max(est, minSleep)
		}
	}
	c.speculated = true
	c.sleep(now, d)
	return rxNone
}

// sleep waits d on the clock, from now. Timed sleeps end late by a
// roughly constant amount (the kernel's and a virtual machine's wake-up
// latency); the next look at the clock measures it (SleepLateness). The
// sleep asks for all of d all the same: the lateness is the price of the
// wake-up, like the interrupt latency after a NIC's coalescing timer, and
// asking for less would shorten every window by it, so that each wake-up
// collects fewer frames (on this project's test machine, about half as
// many at rx-usecs 50).
func (c *rxCore) sleep(now, d time.Duration) {
	c.st.sleeps.Add(1)
	c.events++
	c.slept, c.sleepReq, c.sleepEnd, c.fresh = true, d, now+d, false
	c.clock.Sleep(d)
}

func (c *rxCore) deliver(now time.Duration, reason rxReason) int {
	n := c.pending
	st := &c.st
	st.batches.Add(1)
	st.frames.Add(uint64(n))
	switch reason {
	case rxImmediate:
		st.immediate.Add(1)
	case rxFrameLimit:
		st.frameLimit.Add(1)
	case rxTimer:
		st.timerExp.Add(1)
	case rxEarly:
		st.early.Add(1)
	}
	st.perBatch.add(uint64(n), 1)
	for _, g := range c.groups {
		st.delay.add(uint64(now-g.seen), uint64(g.n))
	}
	if c.delivered && now > c.lastDeliver {
		obs := float64(n) / float64(now-c.lastDeliver)
		if c.polled {
			c.rate = obs
		} else {
			c.rate = (c.rate + obs) / 2
		}
	}
	if c.mod != nil && c.mod.observe(now, uint64(n), c.events) {
		c.setProfile(c.mod.profile())
		st.profile.Store(int64(c.mod.ix))
		st.profileChanges.Add(1)
	}
	c.events = 0
	c.delivered, c.lastDeliver, c.polled = true, now, false
	c.pending, c.open, c.groups = 0, false, c.groups[:0]
	return n
}

// RXStats are a Receiver's counters. Delays are upper bounds: each frame
// counts from the last moment the receiver saw the RX ring without it (or,
// for the frame that ended a kernel wait, from the wake-up) to the moment
// its batch was handed over.
type RXStats struct {
	// Batches handed to the application, and the frames in them.
	Batches, Frames uint64
	// Why batches were handed over: rx-usecs 0 (Immediate), rx-frames
	// reached or the batch full (FrameLimit), rx-usecs passed
	// (TimerExpiries), or before rx-usecs because no further frame was
	// expected in time at the measured rate, or the context ended (Early).
	Immediate, FrameLimit, TimerExpiries, Early uint64
	// Polls counts waits in the kernel for the first frame of a batch;
	// Sleeps counts timed sleeps for more frames of an open batch or, under
	// steady traffic, for the next window. Wakeups is their sum: how often
	// the owning goroutine blocked and had to be woken.
	Polls, Sleeps, Wakeups uint64
	// FramesPerBatch is the distribution of batch sizes.
	FramesPerBatch Histogram
	// Delay is the distribution of the time frames waited, in nanoseconds.
	Delay Histogram
	// Profile is the adaptive profile in force (an index into
	// Profiles(RXUsecs, RXFrames)), -1 without Adaptive; Current holds its
	// values (or the fixed ones); ProfileChanges counts the moves.
	Profile        int
	Current        Profile
	ProfileChanges uint64
	// SleepLateness is how late timed sleeps end, smoothed: the wake-up
	// latency a frame waits on top of rx-usecs. On a virtual machine it can
	// be tens of microseconds.
	SleepLateness time.Duration
}

func (c *rxCore) stats() RXStats {
	st := &c.st
	s := RXStats{
		Batches: st.batches.Load(), Frames: st.frames.Load(),
		Immediate: st.immediate.Load(), FrameLimit: st.frameLimit.Load(),
		TimerExpiries: st.timerExp.Load(), Early: st.early.Load(),
		Polls: st.polls.Load(), Sleeps: st.sleeps.Load(),
		FramesPerBatch: st.perBatch.snapshot(), Delay: st.delay.snapshot(),
		Profile:        int(st.profile.Load()),
		Current:        Profile{int(st.usecs.Load()), int(st.framesLim.Load())},
		ProfileChanges: st.profileChanges.Load(),
		SleepLateness:  time.Duration(st.late.Load()),
	}
	s.Wakeups = s.Polls + s.Sleeps
	return s
}
