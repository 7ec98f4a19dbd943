package coalesce

import (
	"context"
	"testing"
	"time"
)

// fakeRing is an RX ring and a clock in one: frames appear at scheduled
// times, sleeps and waits advance the clock, and nothing is real, so the
// policy's batch boundaries and delays are exact.
type fakeRing struct {
	now      time.Duration
	arrivals []time.Duration // sorted arrival times
	next     int             // first arrival not yet taken
	capacity int             // batch capacity
	inBatch  int
	cancel   context.CancelFunc // called when the schedule is exhausted
	late     time.Duration      // every sleep ends this much late

	sleeps, waits, reads int
	short                int // sleeps asked for less than 10µs
}

func (f *fakeRing) Now() time.Duration { f.reads++; return f.now }

func (f *fakeRing) Sleep(d time.Duration) {
	if d <= 0 {
		panic("sleep of non-positive duration")
	}
	f.sleeps++
	if d < 10*time.Microsecond {
		f.short++
	}
	f.now += d + f.late
}

func (f *fakeRing) receive() int {
	n := 0
	for f.next < len(f.arrivals) && f.arrivals[f.next] <= f.now && f.inBatch < f.capacity {
		f.next++
		f.inBatch++
		n++
	}
	return n
}

func (f *fakeRing) room() int { return f.capacity - f.inBatch }

func (f *fakeRing) wait(d time.Duration) (bool, error) {
	f.waits++
	if f.next < len(f.arrivals) && f.arrivals[f.next] <= f.now {
		return true, nil
	}
	if f.next == len(f.arrivals) {
		f.cancel()
		f.now += d
		return false, nil
	}
	if t := f.arrivals[f.next]; d < 0 || t <= f.now+d {
		f.now = t
		return true, nil
	}
	f.now += d
	return false, nil
}

// delivered is one batch as the application saw it.
type delivered struct {
	at     time.Duration
	frames []time.Duration // arrival times of its frames
}

// runFake runs the policy over arrivals until they are all delivered.
func runFake(t *testing.T, p Params, arrivals []time.Duration) ([]delivered, *rxCore, *fakeRing) {
	t.Helper()
	return runFakeLate(t, p, arrivals, 0)
}

// runFakeLate is runFake with sleeps that end late by late.
func runFakeLate(t *testing.T, p Params, arrivals []time.Duration, late time.Duration) ([]delivered, *rxCore, *fakeRing) {
	t.Helper()
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	p.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeRing{arrivals: arrivals, capacity: p.BatchSize, cancel: cancel, late: late}
	c := newRXCore(p, Options{Clock: f, IdleWait: time.Second}, f)
	var out []delivered
	taken := 0
	for {
		n, err := c.next(ctx)
		if err != nil {
			break
		}
		if n != f.inBatch {
			t.Fatalf("next returned %d frames, the batch holds %d", n, f.inBatch)
		}
		out = append(out, delivered{at: f.now, frames: arrivals[taken : taken+n]})
		taken += n
		f.inBatch = 0
	}
	if taken != len(arrivals) {
		t.Fatalf("delivered %d frames of %d", taken, len(arrivals))
	}
	return out, c, f
}

// every returns n arrival times, gap apart, from start.
func every(start, gap time.Duration, n int) []time.Duration {
	a := make([]time.Duration, n)
	for i := range a {
		a[i] = start + time.Duration(i)*gap
	}
	return a
}

const us = time.Microsecond

func maxDelay(out []delivered) time.Duration {
	var m time.Duration
	for _, b := range out {
		for _, a := range b.frames {
			m = max(m, b.at-a)
		}
	}
	return m
}
