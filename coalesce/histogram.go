package coalesce

import (
	"math/bits"
	"sync/atomic"
)

// Histogram is a snapshot of a distribution of non-negative integers
// (frames per batch, or nanoseconds of delay), in log-linear buckets: exact
// below 8, then 8 buckets per power of two, so a bucket is at most 12.5%
// wide.
type Histogram struct {
	// Count is the number of values recorded, Sum their total, Max the
	// largest.
	Count, Sum, Max uint64
	// Buckets are the non-empty buckets in increasing order.
	Buckets []Bucket
}

// Bucket counts the values v with Lo ≤ v ≤ Hi.
type Bucket struct {
	Lo, Hi uint64
	Count  uint64
}

// Mean returns Sum/Count, or 0 when empty.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// Quantile returns an upper bound of the q-quantile (0 ≤ q ≤ 1): the upper
// edge of the bucket that holds it, never above Max. It returns 0 when
// empty.
func (h Histogram) Quantile(q float64) uint64 {
	if h.Count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(q * float64(h.Count))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for _, b := range h.Buckets {
		seen += b.Count
		if seen >= rank {
			return min(b.Hi, h.Max)
		}
	}
	return h.Max
}

const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	histBuckets = histSub * (64 - histSubBits + 1)
)

// histIndex maps v to its bucket.
func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // ≥ histSubBits
	m := int(v>>(e-histSubBits)) & (histSub - 1)
	return histSub*(e-histSubBits+1) + m
}

// histBounds returns the smallest and largest value of bucket i.
func histBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i)
	}
	e := i/histSub + histSubBits - 1
	m := uint64(i % histSub)
	lo = (histSub + m) << (e - histSubBits)
	width := uint64(1) << (e - histSubBits)
	return lo, lo + width - 1
}

// recorder accumulates a Histogram. One goroutine records; Snapshot may be
// called from any goroutine.
type recorder struct {
	count, sum, max atomic.Uint64
	buckets         [histBuckets]atomic.Uint64
}

// add records n values equal to v.
func (r *recorder) add(v, n uint64) {
	if n == 0 {
		return
	}
	r.buckets[histIndex(v)].Add(n)
	r.count.Add(n)
	r.sum.Add(v * n)
	if v > r.max.Load() {
		r.max.Store(v)
	}
}

func (r *recorder) snapshot() Histogram {
	h := Histogram{Count: r.count.Load(), Sum: r.sum.Load(), Max: r.max.Load()}
	for i := range r.buckets {
		if c := r.buckets[i].Load(); c != 0 {
			lo, hi := histBounds(i)
			h.Buckets = append(h.Buckets, Bucket{Lo: lo, Hi: hi, Count: c})
		}
	}
	return h
}
