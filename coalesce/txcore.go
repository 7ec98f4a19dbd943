package coalesce

import (
	"sync/atomic"
	"time"
)

// txSink is what the TX policy needs from a socket: hand the pending
// frames to the kernel (TX ring and a kick if it asks for one) and say how
// many went; and reclaim completed frames.
type txSink interface {
	flush() (int, error)
	reclaim() int
}

type txCounters struct {
	flushes, frames                                 atomic.Uint64
	immediate, frameLimit, timerExp, explicit, full atomic.Uint64
	reclaims, reclaimed                             atomic.Uint64
	profileChanges                                  atomic.Uint64
	profile, usecs, framesLim                       atomic.Int64
	perFlush, delay                                 recorder
}

// txCore is the TX coalescing policy, independent of the socket.
type txCore struct {
	clock  Clock
	sink   txSink
	usecs  time.Duration
	frames int
	mod    *moderator

	pending int
	open    bool
	start   time.Duration
	groups  []rxGroup // submission times

	st txCounters
}

func newTXCore(p TXParams, o Options, sink txSink) *txCore {
	c := &txCore{clock: o.Clock, sink: sink}
	if p.Adaptive {
		c.mod = newModerator(Profiles(p.TXUsecs, p.TXFrames))
		c.setProfile(c.mod.profile())
		c.st.profile.Store(0)
	} else {
		c.setProfile(Profile{p.TXUsecs, p.TXFrames})
		c.st.profile.Store(-1)
	}
	return c
}

func (c *txCore) setProfile(p Profile) {
	c.usecs, c.frames = usecs(p.Usecs), p.Frames
	c.st.usecs.Store(int64(p.Usecs))
	c.st.framesLim.Store(int64(p.Frames))
}

// submitted accounts n frames just added to the pending batch and flushes
// when tx-frames are pending or tx-usecs is 0.
func (c *txCore) submitted(n int) error {
	if n == 0 {
		return nil
	}
	now := c.clock.Now()
	if !c.open {
		c.open, c.start = true, now
	}
	c.groups = append(c.groups, rxGroup{now, n})
	c.pending += n
	switch {
	case c.usecs == 0:
		return c.flush(now, rxImmediate)
	case c.pending >= c.frames:
		return c.flush(now, rxFrameLimit)
	case now-c.start >= c.usecs:
		return c.flush(now, rxTimer)
	}
	return nil
}

// poll flushes when tx-usecs passed since the oldest pending frame and
// returns how long until the next flush is due (-1: nothing pending).
func (c *txCore) poll() (time.Duration, error) {
	if !c.open {
		return -1, nil
	}
	now := c.clock.Now()
	if due := c.start + c.usecs; now < due {
		return due - now, nil
	}
	if err := c.flush(now, rxTimer); err != nil {
		return 0, err
	}
	if c.open { // the ring was full: try again soon
		return minSleep, nil
	}
	return -1, nil
}

// flush hands the pending frames to the kernel. Frames the TX ring had no
// room for stay pending (and keep their submission time).
func (c *txCore) flush(now time.Duration, reason rxReason) error {
	if c.pending == 0 {
		return nil
	}
	st := &c.st
	sent, err := c.sink.flush()
	if sent > 0 {
		st.flushes.Add(1)
		st.frames.Add(uint64(sent))
		st.perFlush.add(uint64(sent), 1)
		switch reason {
		case rxImmediate:
			st.immediate.Add(1)
		case rxFrameLimit:
			st.frameLimit.Add(1)
		case rxTimer:
			st.timerExp.Add(1)
		default:
			st.explicit.Add(1)
		}
		left := sent
		for len(c.groups) > 0 && left > 0 {
			g := &c.groups[0]
			k := min(g.n, left)
			st.delay.add(uint64(now-g.seen), uint64(k))
			g.n -= k
			left -= k
			if g.n == 0 {
				c.groups = c.groups[1:]
			}
		}
		c.pending -= sent
		if c.mod != nil && c.mod.observe(now, uint64(sent), 1) {
			c.setProfile(c.mod.profile())
			st.profile.Store(int64(c.mod.ix))
			st.profileChanges.Add(1)
		}
	}
	if c.pending > 0 {
		st.full.Add(1)
		c.start = c.groups[0].seen
	} else {
		c.open, c.groups = false, c.groups[:0]
	}
	if r := c.sink.reclaim(); r > 0 {
		st.reclaims.Add(1)
		st.reclaimed.Add(uint64(r))
	}
	return err
}

// TXStats are a Transmitter's counters.
type TXStats struct {
	// Flushes that handed frames to the kernel, and the frames they
	// carried. Each flush kicks the kernel at most once more than the
	// kernel's TX budget requires (and not at all when it does not ask).
	Flushes, Frames uint64
	// Why: tx-usecs 0 (Immediate), tx-frames pending (FrameLimit),
	// tx-usecs passed (TimerExpiries), or Flush (Explicit).
	Immediate, FrameLimit, TimerExpiries, Explicit uint64
	// RingFull counts the times the TX ring had no room for submitted
	// frames (the Transmitter then flushes, reclaims and tries once more).
	RingFull uint64
	// Reclaims counts completion-ring reads that returned frames, and
	// Reclaimed the frames.
	Reclaims, Reclaimed uint64
	// FramesPerFlush is the distribution of frames per flush.
	FramesPerFlush Histogram
	// Delay is how long frames waited between Submit and the TX ring, in
	// nanoseconds.
	Delay Histogram
	// Profile is the adaptive profile in force (an index into
	// Profiles(TXUsecs, TXFrames)), -1 without Adaptive; Current holds its
	// values (or the fixed ones); ProfileChanges counts the moves.
	Profile        int
	Current        Profile
	ProfileChanges uint64
}

func (c *txCore) stats() TXStats {
	st := &c.st
	return TXStats{
		Flushes: st.flushes.Load(), Frames: st.frames.Load(),
		Immediate: st.immediate.Load(), FrameLimit: st.frameLimit.Load(),
		TimerExpiries: st.timerExp.Load(), Explicit: st.explicit.Load(),
		RingFull: st.full.Load(), Reclaims: st.reclaims.Load(), Reclaimed: st.reclaimed.Load(),
		FramesPerFlush: st.perFlush.snapshot(), Delay: st.delay.snapshot(),
		Profile:        int(st.profile.Load()),
		Current:        Profile{int(st.usecs.Load()), int(st.framesLim.Load())},
		ProfileChanges: st.profileChanges.Load(),
	}
}
