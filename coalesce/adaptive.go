package coalesce

import "time"

// Profile is one step of adaptive moderation: the usecs and frames in
// force (rx-usecs/rx-frames for a Receiver, tx-usecs/tx-frames for a
// Transmitter).
type Profile struct {
	Usecs  int
	Frames int
}

// Profiles returns the profile table Adaptive moves along for the bounds
// usecs and frames: usecs 0 (at once), then 8, 16, 32, … below usecs, then
// usecs itself; each with frames frames.
func Profiles(usecs, frames int) []Profile {
	t := []Profile{{0, frames}}
	for u := 8; u < usecs; u *= 2 {
		t = append(t, Profile{u, frames})
	}
	if usecs > 0 {
		t = append(t, Profile{usecs, frames})
	}
	return t
}

// Adaptive moderation, in the spirit of the kernel's net_dim (lib/dim):
// the receiver measures a sample every dimSampleBatches batches and at
// least dimSamplePeriod (packet rate and kernel wake-ups per packet),
// compares it with the previous one, and moves one profile step. A step
// that made things better (fewer wake-ups per packet, or, at the same
// cost, more packets per second) is followed by another in the same
// direction; one that made them worse is undone by turning around (a tie
// keeps going towards more coalescing, where the cost can only fall, and
// turns back from less). Two turns in quick succession mean the best
// profile was found: the moderator parks there until the traffic changes
// (dimParkStrikes differing samples in a row). After too many steps
// without parking it rests for a while (tired).

const (
	dimSampleBatches = 64                    // batches per sample, at least
	dimSamplePeriod  = 50 * time.Millisecond // and at least this long
	dimParkStrikes   = 2                     // differing samples in a row that end a park
	dimSignificant   = 20                    // percent: smaller differences are noise
	dimTiredSteps    = 10                    // steps without parking before resting
	dimRestSamples   = 8                     // samples to rest when tired
)

type dimState uint8

const (
	dimGoingRight dimState = iota // towards more coalescing
	dimGoingLeft                  // towards less
	dimParkedOnTop
	dimParkedTired
)

func (s dimState) String() string {
	switch s {
	case dimGoingRight:
		return "going-right"
	case dimGoingLeft:
		return "going-left"
	case dimParkedOnTop:
		return "parked"
	case dimParkedTired:
		return "tired"
	}
	return "?"
}

type dimSample struct {
	rate float64 // frames per second
	cost float64 // wake-ups per frame
}

type dimResult int

const (
	dimSame dimResult = iota
	dimBetter
	dimWorse
)

type moderator struct {
	profiles []Profile
	ix       int
	state    dimState

	stepsLeft, stepsRight, tired int
	strikes                      int // differing samples in a row while parked

	prev dimSample

	// the sample being measured
	started         bool
	start           time.Duration
	batches, frames uint64
	events          uint64

	changes uint64
}

func newModerator(profiles []Profile) *moderator {
	return &moderator{profiles: profiles, state: dimGoingRight}
}

func (m *moderator) profile() Profile { return m.profiles[m.ix] }

// observe accounts one delivered batch of frames that cost events kernel
// wake-ups, at time now. It reports whether the profile changed.
func (m *moderator) observe(now time.Duration, frames, events uint64) bool {
	if !m.started {
		m.started, m.start = true, now
		return false
	}
	m.batches++
	m.frames += frames
	m.events += events
	if m.batches < dimSampleBatches || now-m.start < dimSamplePeriod {
		return false
	}
	s := dimSample{rate: float64(m.frames) / (now - m.start).Seconds()}
	if m.frames > 0 {
		s.cost = float64(m.events) / float64(m.frames)
	}
	m.start, m.batches, m.frames, m.events = now, 0, 0, 0
	return m.decide(s)
}

func significant(curr, prev float64) bool {
	d := curr - prev
	if d < 0 {
		d = -d
	}
	return d*100 > dimSignificant*prev
}

func compareSamples(curr, prev dimSample) dimResult {
	if prev.rate == 0 {
		if curr.rate > 0 {
			return dimBetter
		}
		return dimSame
	}
	// Cost first, unlike net_dim, which looks at throughput first: the
	// rate a receiver sees is the sender's, and differs between samples
	// mostly when the receiver waited for a CPU and caught up, which on a
	// shared machine sent the moderator wandering towards the costly
	// profiles. More coalescing never lowers what a receiver can take, so
	// judging by cost cannot starve it: a receiver falling behind gets
	// bigger batches, a lower cost, and keeps going right.
	if significant(curr.cost, prev.cost) {
		if curr.cost < prev.cost {
			return dimBetter
		}
		return dimWorse
	}
	if significant(curr.rate, prev.rate) {
		if curr.rate > prev.rate {
			return dimBetter
		}
		return dimWorse
	}
	return dimSame
}

// decide takes one sample and moves at most one step.
func (m *moderator) decide(s dimSample) bool {
	prevState, prevIx := m.state, m.ix
	switch m.state {
	case dimParkedOnTop:
		// One differing sample is noise more often than a change of the
		// traffic (a receiver on a shared machine waits for a CPU now and
		// then and catches up): leave only after dimParkStrikes in a row.
		// The reference follows the samples that match it, slowly, so
		// that one odd sample taken when parking does not make every
		// later one look different.
		if compareSamples(s, m.prev) == dimSame {
			m.strikes = 0
			m.prev.rate += (s.rate - m.prev.rate) / 4
			m.prev.cost += (s.cost - m.prev.cost) / 4
		} else if m.strikes++; m.strikes >= dimParkStrikes {
			m.leavePark()
		}
	case dimParkedTired:
		m.tired--
		if m.tired <= 0 {
			m.leavePark()
		}
	default:
		// Keep going while it helps. A tie keeps going right, towards
		// more coalescing: the cost is flat as long as a window is too
		// short to catch a second frame, and only drops past that point.
		res := compareSamples(s, m.prev)
		if res == dimWorse || (res == dimSame && m.state == dimGoingLeft) {
			m.turn()
		}
		if m.onTop() {
			m.parkOnTop()
			break
		}
		if !m.step() {
			m.parkOnTop()
		}
	}
	// While parked on top, keep comparing against the reference taken
	// when parking (moved only by matching samples, see above), so that
	// slow drift is noticed too.
	if prevState != dimParkedOnTop || m.state != dimParkedOnTop {
		m.prev = s
	}
	if m.ix != prevIx {
		m.changes++
		return true
	}
	return false
}

func (m *moderator) turn() {
	if m.state == dimGoingRight {
		m.state, m.stepsLeft = dimGoingLeft, 0
	} else {
		m.state, m.stepsRight = dimGoingRight, 0
	}
}

// onTop: we just turned back after having gone more than one step the
// other way and one step this way: the profile we are on is the best.
func (m *moderator) onTop() bool {
	if m.state == dimGoingRight {
		return m.stepsLeft > 1 && m.stepsRight == 1
	}
	return m.stepsRight > 1 && m.stepsLeft == 1
}

// step moves one profile in the current direction; false at the edge of
// the table. Too many steps in a row park the moderator tired.
func (m *moderator) step() bool {
	if m.tired >= dimTiredSteps {
		m.state, m.tired = dimParkedTired, dimRestSamples
		m.stepsLeft, m.stepsRight = 0, 0
		return true
	}
	m.tired++
	if m.state == dimGoingRight {
		if m.ix == len(m.profiles)-1 {
			return false
		}
		m.ix++
		m.stepsRight++
	} else {
		if m.ix == 0 {
			return false
		}
		m.ix--
		m.stepsLeft++
	}
	return true
}

func (m *moderator) parkOnTop() {
	m.state = dimParkedOnTop
	m.stepsLeft, m.stepsRight, m.tired, m.strikes = 0, 0, 0, 0
}

func (m *moderator) leavePark() {
	m.tired = 0
	if m.ix > 0 {
		m.state = dimGoingLeft
	} else {
		m.state = dimGoingRight
	}
	m.stepsLeft, m.stepsRight = 0, 0
	m.step()
}
