package coalesce

import (
	"errors"
	"testing"
	"time"
)

// fakeTX is a TX ring with room for ringRoom frames per flush, and a clock.
type fakeTX struct {
	now      time.Duration
	pending  *int
	ringRoom int
	flushes  []int // frames per flush
	at       []time.Duration
	err      error
}

func (f *fakeTX) Now() time.Duration    { return f.now }
func (f *fakeTX) Sleep(d time.Duration) { f.now += d }
func (f *fakeTX) flush() (int, error) {
	n := *f.pending
	if f.ringRoom > 0 {
		n = min(n, f.ringRoom)
	}
	*f.pending -= n
	f.flushes = append(f.flushes, n)
	f.at = append(f.at, f.now)
	return n, f.err
}
func (f *fakeTX) reclaim() int { return 0 }

func newFakeTX(p TXParams) (*txCore, *fakeTX, *int) {
	p.setDefaults()
	pend := new(int)
	f := &fakeTX{pending: pend}
	return newTXCore(p, Options{Clock: f}, f), f, pend
}

func submit(c *txCore, pend *int, n int) error {
	*pend += n
	return c.submitted(n)
}

func TestTXImmediate(t *testing.T) {
	c, f, pend := newFakeTX(TXParams{})
	for i := 0; i < 10; i++ {
		f.now += 10 * us
		if err := submit(c, pend, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.flushes) != 10 || c.stats().Immediate != 10 {
		t.Fatalf("flushes %v: want one per frame with tx-usecs 0", f.flushes)
	}
}

// Frames submitted every 10µs with tx-usecs 50 go out in batches of 6, 50µs
// after the oldest, through Poll.
func TestTXTimer(t *testing.T) {
	c, f, pend := newFakeTX(TXParams{TXUsecs: 50})
	for i := 0; i < 100; i++ {
		if err := submit(c, pend, 1); err != nil {
			t.Fatal(err)
		}
		d, err := c.poll()
		if err != nil {
			t.Fatal(err)
		}
		if d == 0 || d > 50*us {
			t.Fatalf("poll returned %v with frames pending: want (0, 50µs]", d)
		}
		f.now += 10 * us
		if _, err := c.poll(); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range f.flushes {
		if n != 5 && n != 6 {
			t.Fatalf("flush %d carried %d frames (all %v): want 5-6", i, n, f.flushes)
		}
	}
	st := c.stats()
	if max := time.Duration(st.Delay.Max); max > 50*us {
		t.Errorf("a frame waited %v, more than tx-usecs", max)
	}
	if st.TimerExpiries != uint64(len(f.flushes)) || st.Frames+uint64(*pend) != 100 {
		t.Errorf("stats %+v, %d pending: want timer flushes accounting for all 100 frames", st, *pend)
	}
}

func TestTXFrameLimitAndRingFull(t *testing.T) {
	c, f, pend := newFakeTX(TXParams{TXUsecs: 1000, TXFrames: 8})
	f.ringRoom = 5
	for i := 0; i < 8; i++ {
		if err := submit(c, pend, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.flushes) != 1 || f.flushes[0] != 5 || *pend != 3 {
		t.Fatalf("flushes %v, pending %d: want 5 sent at the frame limit, 3 left by the full ring", f.flushes, *pend)
	}
	if st := c.stats(); st.RingFull != 1 || st.FrameLimit != 1 {
		t.Errorf("stats %+v", st)
	}
	// The 3 left over keep their submission time: the timer is due.
	f.now += 1000 * us
	if _, err := c.poll(); err != nil || *pend != 0 {
		t.Fatalf("poll: %v, %d pending", err, *pend)
	}
	boom := errors.New("interface down")
	f.err = boom
	submit(c, pend, 1)
	if err := c.flush(f.now, rxEarly); !errors.Is(err, boom) {
		t.Fatalf("flush error %v, want the sink's", err)
	}
}

// adaptive-tx: frames every 10µs, bound 64µs. Longer windows mean fewer
// kicks per frame, so the moderator climbs to the bound and parks there.
func TestTXAdaptive(t *testing.T) {
	c, f, pend := newFakeTX(TXParams{Adaptive: true})
	for i := 0; i < 50000; i++ {
		if err := submit(c, pend, 1); err != nil {
			t.Fatal(err)
		}
		f.now += 10 * us
		if _, err := c.poll(); err != nil {
			t.Fatal(err)
		}
	}
	st := c.stats()
	t.Logf("profile %d %+v, %d changes, %.1f frames per flush", st.Profile, st.Current, st.ProfileChanges, st.FramesPerFlush.Mean())
	if st.Current.Usecs != DefaultAdaptiveUsecs || st.ProfileChanges == 0 {
		t.Errorf("ended on %+v after %d changes: want the 64µs bound", st.Current, st.ProfileChanges)
	}
	// Poll runs every 10µs here, so a flush can be up to 10µs late.
	if max := time.Duration(st.Delay.Max); max > 64*us+10*us {
		t.Errorf("a frame waited %v, above the bound and the poll period", max)
	}
}
