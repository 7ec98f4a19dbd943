package coalesce

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value lands in the bucket whose bounds contain it, buckets tile the
// number line without gaps, and a bucket is at most 1/8 of its low edge wide.
func TestHistogramBuckets(t *testing.T) {
	var prevHi uint64
	for i := 0; i < histBuckets; i++ {
		lo, hi := histBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if histIndex(lo) != i || histIndex(hi) != i {
			t.Fatalf("bucket %d [%d,%d]: edges map to %d and %d", i, lo, hi, histIndex(lo), histIndex(hi))
		}
		if lo >= histSub && (hi-lo+1)*histSub > lo {
			t.Fatalf("bucket %d [%d,%d] wider than 1/8 of %d", i, lo, hi, lo)
		}
		prevHi = hi
	}
	if prevHi != ^uint64(0) {
		t.Fatalf("last bucket ends at %d, want max uint64", prevHi)
	}
}

// Quantiles agree with sorting within a bucket's width.
func TestHistogramQuantile(t *testing.T) {
	var r recorder
	var vals []uint64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		v := uint64(rng.ExpFloat64() * 50000)
		vals = append(vals, v)
		r.add(v, 1)
	}
	slices.Sort(vals)
	h := r.snapshot()
	if h.Count != 10000 || h.Max != vals[len(vals)-1] {
		t.Fatalf("count %d max %d, want 10000 and %d", h.Count, h.Max, vals[len(vals)-1])
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
		exact := vals[max(0, int(q*float64(len(vals)))-1)]
		got := h.Quantile(q)
		if got < exact || float64(got) > float64(exact)*1.125+1 {
			t.Errorf("q%.2f = %d, exact %d: want an upper bound within 12.5%%", q, got, exact)
		}
	}
	if (Histogram{}).Quantile(0.5) != 0 || (Histogram{}).Mean() != 0 {
		t.Error("empty histogram must give 0")
	}
}
