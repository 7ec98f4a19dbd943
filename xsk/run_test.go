package xsk

import (
	"testing"
	"time"
)

// The runner's napper naps only when a nap would gather NapMinFrames, never
// longer than its maximum or than a quarter of the rings takes to fill,
// never shorter than minNap, and polls again as soon as the rate drops.
func TestNapper(t *testing.T) {
	t0 := time.Unix(0, 0)
	n := newNapper(100*time.Microsecond, 512)
	n.start = t0
	feed := func(rate float64, from time.Time, d time.Duration) time.Time {
		n.Received(int(rate * d.Seconds()))
		return from.Add(d)
	}
	// Idle: poll.
	if d := n.idle(t0.Add(2 * time.Millisecond)); d != 0 {
		t.Fatalf("idle rings with no traffic napped %v", d)
	}
	now := t0.Add(2 * time.Millisecond)
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{
		{10e3, 0},                       // 1 frame per 100 µs: poll
		{79e3, 0},                       // 7.9 frames per nap: poll
		{100e3, 100 * time.Microsecond}, // 10 frames per nap: nap the maximum
		{1e6, 100 * time.Microsecond},
		{10e6, 51200 * time.Nanosecond}, // a quarter ring (512) fills in 51.2 µs
		{50e6, minNap},                  // floor
		{10e3, 0},                       // back to light traffic: poll
	} {
		now = feed(c.rate, now, 2*time.Millisecond)
		if d := n.idle(now); d != c.want {
			t.Errorf("at %.0f frames/s: idle = %v, want %v", c.rate, d, c.want)
		}
	}
	off := newNapper(-1, 512)
	off.start = t0
	off.Received(1e6)
	if d := off.idle(t0.Add(time.Second)); d != 0 {
		t.Errorf("a napper with a negative maximum napped %v", d)
	}
}
