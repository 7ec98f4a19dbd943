package coalesce

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRXPolicy measures the policy's own cost per delivered batch on
// the fake ring (steady 100k frames/s, rx-usecs 50 vs 0): the bookkeeping
// the receiver adds on top of the kernel's work. It must not allocate.
func BenchmarkRXPolicy(b *testing.B) {
	for _, p := range []struct {
		name string
		p    Params
	}{{"rx-usecs=0", Params{}}, {"rx-usecs=50", Params{RXUsecs: 50}}, {"adaptive", Params{RXUsecs: 50, Adaptive: true}}} {
		b.Run(p.name, func(b *testing.B) {
			params := p.p
			params.setDefaults()
			// An endless schedule: one frame every 10µs.
			f := &fakeRing{capacity: params.BatchSize, cancel: func() {}}
			src := &endless{f: f, gap: 10 * us}
			c := newRXCore(params, Options{Clock: f, IdleWait: time.Second}, src)
			ctx := context.Background()
			frames := 0
			b.ReportAllocs()
			for b.Loop() {
				n, err := c.next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				frames += n
				f.inBatch = 0
			}
			b.ReportMetric(float64(frames)/float64(b.N), "frames/batch")
		})
	}
}

// endless is a fake ring with a frame every gap, forever.
type endless struct {
	f    *fakeRing
	gap  time.Duration
	next time.Duration
}

func (e *endless) receive() int {
	n := 0
	for e.next <= e.f.now && e.f.inBatch < e.f.capacity {
		e.next += e.gap
		e.f.inBatch++
		n++
	}
	return n
}

func (e *endless) room() int { return e.f.capacity - e.f.inBatch }

func (e *endless) wait(d time.Duration) (bool, error) {
	if e.next > e.f.now {
		e.f.now = e.next
	}
	return true, nil
}
