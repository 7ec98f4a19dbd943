package rss

import (
	"math/rand/v2"
	"testing"
)

func TestEqual(t *testing.T) {
	for _, tc := range []struct{ queues, size int }{{1, 128}, {2, 128}, {3, 128}, {4, 64}, {7, 512}, {16, 16}, {5, 3}} {
		tab, err := Equal(tc.queues, tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab) != tc.size {
			t.Fatalf("Equal(%d, %d): %d entries", tc.queues, tc.size, len(tab))
		}
		// The kernel's default table (ethtool_rxfh_indir_default) is
		// index % queues: Equal must be exactly that.
		count := make([]int, tc.queues)
		for i, q := range tab {
			if int(q) != i%tc.queues {
				t.Fatalf("Equal(%d, %d)[%d] = %d", tc.queues, tc.size, i, q)
			}
			count[q]++
		}
		for q, n := range count {
			if n < tc.size/tc.queues || n > (tc.size+tc.queues-1)/tc.queues {
				t.Errorf("Equal(%d, %d): queue %d has %d entries", tc.queues, tc.size, q, n)
			}
		}
	}
	for _, bad := range [][2]int{{0, 128}, {-1, 128}, {4, 0}, {4, maxIndirSize + 1}} {
		if _, err := Equal(bad[0], bad[1]); err == nil {
			t.Errorf("Equal(%d, %d) succeeded", bad[0], bad[1])
		}
	}
}

func TestWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][]uint32{{1, 1}, {1, 2}, {3, 0, 1}, {0, 0, 5}, {1, 1, 1, 1}, {10, 1}, {1}}
	for i := 0; i < 200; i++ {
		w := make([]uint32, 1+r.IntN(16))
		for j := range w {
			w[j] = uint32(r.IntN(10))
		}
		w[r.IntN(len(w))]++ // at least one positive
		cases = append(cases, w)
	}
	for _, w := range cases {
		for _, size := range []int{8, 64, 128, 256, 100} {
			tab, err := Weights(size, w...)
			if err != nil {
				t.Fatalf("Weights(%d, %v): %v", size, w, err)
			}
			var sum uint64
			for _, x := range w {
				sum += uint64(x)
			}
			count := make([]uint64, len(w))
			prev := uint32(0)
			for i, q := range tab {
				if int(q) >= len(w) {
					t.Fatalf("Weights(%d, %v)[%d] = %d: no such queue", size, w, i, q)
				}
				if q < prev {
					t.Fatalf("Weights(%d, %v): entries not in queue order at %d", size, w, i)
				}
				prev = q
				count[q]++
			}
			// Queue q's share is within one entry of size*w[q]/sum, and
			// the cumulative count up to q is floor(size*cum/sum) as in
			// ethtool's fill: entries below the boundary go to q.
			var cum uint64
			var got uint64
			for q := range w {
				cum += uint64(w[q])
				got += count[q]
				if want := uint64(size) * cum / sum; got != want {
					t.Fatalf("Weights(%d, %v): %d entries up to queue %d, want %d", size, w, got, q, want)
				}
				if w[q] == 0 && count[q] != 0 {
					t.Fatalf("Weights(%d, %v): zero-weight queue %d got %d entries", size, w, q, count[q])
				}
			}
		}
	}
	// Equal weights give Equal's counts.
	a, _ := Weights(128, 1, 1, 1, 1)
	count := map[uint32]int{}
	for _, q := range a {
		count[q]++
	}
	for q := uint32(0); q < 4; q++ {
		if count[q] != 32 {
			t.Errorf("Weights(128, 1,1,1,1): queue %d has %d entries", q, count[q])
		}
	}
	for _, bad := range []struct {
		size int
		w    []uint32
	}{{128, nil}, {128, []uint32{0, 0}}, {0, []uint32{1}}, {maxIndirSize + 1, []uint32{1}}} {
		if _, err := Weights(bad.size, bad.w...); err == nil {
			t.Errorf("Weights(%d, %v) succeeded", bad.size, bad.w)
		}
	}
}
