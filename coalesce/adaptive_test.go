package coalesce

import (
	"slices"
	"testing"
)

func TestProfiles(t *testing.T) {
	got := Profiles(50, 64)
	want := []Profile{{0, 64}, {8, 64}, {16, 64}, {32, 64}, {50, 64}}
	if !slices.Equal(got, want) {
		t.Fatalf("Profiles(50, 64) = %v, want %v", got, want)
	}
	if got := Profiles(0, 8); !slices.Equal(got, []Profile{{0, 8}}) {
		t.Fatalf("Profiles(0, 8) = %v", got)
	}
}

// The moderator walks right while each step lowers the cost, turns when a
// step makes it worse, parks on the best profile, and stays there while the
// traffic does not change.
func TestModeratorFindsBest(t *testing.T) {
	m := newModerator(Profiles(256, 64)) // 0 8 16 32 64 128 256
	cost := []float64{1, 0.6, 0.4, 0.3, 0.45, 0.7, 0.9}
	var path []int
	for i := 0; i < 40; i++ {
		m.decide(dimSample{rate: 100000, cost: cost[m.ix]})
		path = append(path, m.ix)
	}
	t.Logf("path %v, state %v", path, m.state)
	if m.ix != 3 || m.state != dimParkedOnTop {
		t.Fatalf("ended on profile %d (%v), want parked on 3 (the cheapest)", m.ix, m.state)
	}
	// Parked: identical samples keep it there.
	changes := m.changes
	for i := 0; i < 10; i++ {
		m.decide(dimSample{rate: 100000, cost: cost[m.ix]})
	}
	if m.changes != changes || m.ix != 3 {
		t.Fatalf("moved while parked with unchanged traffic")
	}
	// One odd sample (the receiver waited for a CPU and caught up) does
	// not end the park.
	m.decide(dimSample{rate: 300000, cost: cost[m.ix]})
	m.decide(dimSample{rate: 100000, cost: cost[m.ix]})
	if m.changes != changes || m.state != dimParkedOnTop {
		t.Fatalf("left the park for one odd sample: %v on %d", m.state, m.ix)
	}
	// A lasting rate change does.
	m.decide(dimSample{rate: 300000, cost: cost[m.ix]})
	m.decide(dimSample{rate: 300000, cost: cost[m.ix]})
	if m.state == dimParkedOnTop || m.ix == 3 {
		t.Fatalf("did not react to a tripled rate: %v on %d", m.state, m.ix)
	}
}

func TestModeratorEdgeAndTired(t *testing.T) {
	m := newModerator(Profiles(64, 64)) // 0 8 16 32 64
	// Every step right is better: it reaches the top edge and parks there.
	for i := 0; i < 10; i++ {
		m.decide(dimSample{rate: 1e5, cost: 1 / float64(m.ix+1)})
	}
	if m.ix != len(m.profiles)-1 || m.state != dimParkedOnTop {
		t.Fatalf("profile %d, %v: want parked at the right edge", m.ix, m.state)
	}
	// Ever-changing traffic that keeps improving: it rests after too many
	// steps instead of wandering forever.
	m = newModerator(Profiles(1<<20, 64))
	r := 1e5
	for i := 0; i < dimTiredSteps+1; i++ {
		r *= 1.5
		m.decide(dimSample{rate: r, cost: 1})
	}
	if m.state != dimParkedTired {
		t.Fatalf("state %v after %d improving steps, want tired", m.state, dimTiredSteps+1)
	}
	for i := 0; i < dimRestSamples; i++ {
		m.decide(dimSample{rate: r, cost: 1})
	}
	if m.state == dimParkedTired {
		t.Fatal("still resting after the rest period")
	}
}

// End to end on the fake ring: steady 100k frames/s with the adaptive
// bound 50µs. Larger profiles cost fewer wake-ups per frame, so the
// receiver climbs to the top profile; the bound holds throughout.
func TestRXAdaptiveSteady(t *testing.T) {
	arr := every(0, 10*us, 60000)
	out, c, _ := runFake(t, Params{RXUsecs: 50, Adaptive: true}, arr)
	st := c.stats()
	t.Logf("profile %d %+v after %d changes; %d batches, %.1f frames/batch", st.Profile, st.Current, st.ProfileChanges, st.Batches, float64(st.Frames)/float64(st.Batches))
	if st.Profile != len(Profiles(50, 256))-1 || st.Current.Usecs != 50 {
		t.Errorf("ended on profile %d (%+v), want the top one (50µs)", st.Profile, st.Current)
	}
	if st.ProfileChanges == 0 {
		t.Error("no profile change recorded")
	}
	if d := maxDelay(out); d > 50*us {
		t.Errorf("max delay %v above the adaptive bound 50µs", d)
	}
}

// Sparse traffic gains nothing from waiting. The cost is flat, so ties may
// carry the moderator up the table, but a frame that no other can join in
// time is still handed over at once: one wake-up per frame, no delay.
func TestRXAdaptiveSparse(t *testing.T) {
	arr := every(0, 400*us, 20000)
	out, c, _ := runFake(t, Params{RXUsecs: 256, Adaptive: true}, arr)
	st := c.stats()
	t.Logf("profile %d %+v after %d changes, wake-ups/frame %.2f", st.Profile, st.Current, st.ProfileChanges, float64(st.Wakeups)/float64(st.Frames))
	if w := float64(st.Wakeups) / float64(st.Frames); w > 1.1 {
		t.Errorf("%.2f wake-ups per frame on sparse traffic: want about 1", w)
	}
	if d := maxDelay(out); d > 0 {
		t.Errorf("a sparse frame was held %v", d)
	}
}

// Parked on a sample that happened to be high, the moderator stays put
// while later samples scatter ±10% around the true mean: the reference
// moves towards the samples that match it. (Compared with the high sample
// itself, 0.9 and 0.92 in a row would be two differing samples.)
func TestModeratorParkReferenceFollows(t *testing.T) {
	m := newModerator(Profiles(64, 64))
	for i := 0; i < 10 && m.state != dimParkedOnTop; i++ {
		m.decide(dimSample{rate: 1e5, cost: 1 / float64(m.ix+1)})
	}
	if m.state != dimParkedOnTop {
		t.Fatalf("not parked: %v", m.state)
	}
	top := m.ix
	cost := 1 / float64(top+1)
	m.prev = dimSample{rate: 1.18e5, cost: cost} // parked on a high sample
	changes := m.changes
	for i := 0; i < 200; i++ {
		f := []float64{1.1, 1.0, 0.9, 0.92, 1.05}[i%5]
		m.decide(dimSample{rate: 1e5 * f, cost: cost})
	}
	if m.changes != changes || m.ix != top {
		t.Fatalf("left the park %d times on noise around the mean", m.changes-changes)
	}
}
