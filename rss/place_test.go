package rss

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// randPredictor returns a predictor with a random key, table, rule and
// transformation.
func randPredictor(t *testing.T, rng *rand.Rand) (*Predictor, PredictorOptions) {
	t.Helper()
	var o PredictorOptions
	if rng.IntN(3) > 0 {
		o.Key = make([]byte, 40+rng.IntN(2)*12)
		for i := range o.Key {
			o.Key[i] = byte(rng.Uint32())
		}
	}
	o.Rule = IndexRule(rng.IntN(3))
	size := 1 << (2 + rng.IntN(8)) // 4..512
	if o.Rule != IndexLowBits && rng.IntN(2) == 0 {
		size = 3 + rng.IntN(300)
	}
	queues := 1 + rng.IntN(8)
	o.Indirection = make([]uint32, size)
	for i := range o.Indirection {
		if rng.IntN(2) == 0 {
			o.Indirection[i] = uint32(i % queues) // equal
		} else {
			o.Indirection[i] = uint32(rng.IntN(queues)) // weighted at random
		}
	}
	o.Symmetric = []Symmetric{SymmetricNone, SymmetricXOR, SymmetricOrXOR}[rng.IntN(3)]
	p, err := NewPredictor(o)
	if err != nil {
		t.Fatal(err)
	}
	return p, o
}

// TestPlacementMatchesPrediction is the cross-check of placement against
// prediction over many random flows and configurations: every port
// PlacePorts returns predicts (with a full hash of the flow) to the queue
// asked for, and the ports are exactly the first matching ones of a brute
// force scan in the same order, so none is missed.
func TestPlacementMatchesPrediction(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range 400 {
		p, o := randPredictor(t, rng)
		k := randFlow(rng, rng.IntN(2) == 0)
		k.Ports = true
		field := PortField(rng.IntN(2))
		lo := uint16(1 + rng.IntN(60000))
		po := PlaceOptions{Port: field, Min: lo, Max: lo + uint16(rng.IntN(3000)), Start: lo + uint16(rng.IntN(100))}
		queue := o.Indirection[rng.IntN(len(o.Indirection))]
		n := 1 + rng.IntN(5)
		ports, err := p.PlacePorts(k, queue, n, po)

		// Brute force in the documented order: Start..Max, then Min..Start-1.
		start := po.Start
		if start > po.Max {
			start = po.Min
		}
		var want []uint16
		try := func(v int) {
			if len(want) == n {
				return
			}
			kk := k
			if field == SourcePort {
				kk.SrcPort = uint16(v)
			} else {
				kk.DstPort = uint16(v)
			}
			q, err := p.Queue(kk)
			if err != nil {
				t.Fatal(err)
			}
			if q == queue {
				want = append(want, uint16(v))
			}
		}
		for v := int(start); v <= int(po.Max); v++ {
			try(v)
		}
		for v := int(po.Min); v < int(start); v++ {
			try(v)
		}
		if len(want) < n {
			if !errors.Is(err, ErrUnplaceable) {
				t.Fatalf("iter %d: %v queue %d: brute force found %d of %d ports, PlacePorts error = %v", iter, k, queue, len(want), n, err)
			}
		} else if err != nil {
			t.Fatalf("iter %d: %v %+v queue %d: %v (brute force found %v)", iter, k, po, queue, err, want)
		}
		if len(ports) != len(want) && err == nil {
			t.Fatalf("iter %d: PlacePorts = %v, brute force %v", iter, ports, want)
		}
		for i := range ports {
			if i >= len(want) || ports[i] != want[i] {
				t.Fatalf("iter %d: %v %v rule %v sym %v queue %d: PlacePorts = %v, brute force %v", iter, k, field, o.Rule, o.Symmetric, queue, ports, want)
			}
		}
	}
}

func TestSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for iter := range 300 {
		p, _ := randPredictor(t, rng)
		k := randFlow(rng, rng.IntN(2) == 0)
		k.Ports = true
		nq := len(p.Queues())
		n := 1 + rng.IntN(3*nq)
		pl, err := p.Spread(k, n, PlaceOptions{Start: uint16(EphemeralMin + rng.IntN(1000))})
		if err != nil {
			t.Fatalf("iter %d: %d flows over %d queues: %v", iter, n, nq, err)
		}
		if len(pl) != n {
			t.Fatalf("iter %d: %d placements, want %d", iter, len(pl), n)
		}
		count := map[uint32]int{}
		ports := map[uint16]bool{}
		for _, x := range pl {
			kk := k
			kk.SrcPort = x.Port
			q, _ := p.Queue(kk)
			if q != x.Queue || p.Hash(kk) != x.Hash {
				t.Fatalf("iter %d: placement %+v, but the flow predicts to queue %d hash %#x", iter, x, q, p.Hash(kk))
			}
			if ports[x.Port] {
				t.Fatalf("iter %d: port %d twice", iter, x.Port)
			}
			ports[x.Port] = true
			count[q]++
			if x.Port < EphemeralMin || x.Port > EphemeralMax {
				t.Fatalf("iter %d: port %d outside the ephemeral range", iter, x.Port)
			}
		}
		// Even: every queue n/Q or n/Q+1 (and no queue twice when n <= Q).
		lo, hi := n/nq, (n+nq-1)/nq
		for q, c := range count {
			if c < lo || c > hi {
				t.Fatalf("iter %d: %d flows over %d queues: queue %d got %d (%v)", iter, n, nq, q, c, count)
			}
		}
		if n >= nq && len(count) != nq {
			t.Fatalf("iter %d: %d flows reached %d of %d queues", iter, n, len(count), nq)
		}
	}
}

// TestPlaceUnreachable uses a key too short to reach the port bits: no
// port moves the flow, which placement must see without a scan, and a
// brute force over every port confirms.
func TestPlaceUnreachable(t *testing.T) {
	eq, _ := Equal(4, 128)
	p, err := NewPredictor(PredictorOptions{Key: DefaultKey()[:8], Indirection: eq})
	if err != nil {
		t.Fatal(err)
	}
	k := FlowKey{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), DstPort: 5201, Ports: true, Proto: 6}
	home, _ := p.Queue(k)
	if pl, err := p.Spread(k, 2, PlaceOptions{}); !errors.Is(err, ErrUnplaceable) || len(pl) != 1 || pl[0].Queue != home {
		t.Errorf("Spread over ports that do not move the flow = %+v, %v; want its own queue and ErrUnplaceable", pl, err)
	}
	for q := range uint32(4) {
		ports, err := p.PlacePorts(k, q, 1, PlaceOptions{Min: 1, Max: 65535})
		if q == home {
			if err != nil || len(ports) != 1 {
				t.Errorf("queue %d (the flow's own): %v, %v", q, ports, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnplaceable) {
			t.Errorf("queue %d: error = %v, want ErrUnplaceable", q, err)
		}
		for v := 1; v <= 65535; v++ {
			kk := k
			kk.SrcPort = uint16(v)
			if got, _ := p.Queue(kk); got == q {
				t.Fatalf("port %d lands on queue %d, which placement called unreachable", v, q)
			}
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	eq, _ := Equal(4, 128)
	p, _ := NewPredictor(PredictorOptions{Indirection: eq})
	k := FlowKey{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), DstPort: 5201, Ports: true}
	l3 := k
	l3.Ports = false
	for name, f := range map[string]func() error{
		"queue not in table": func() error { _, err := p.PlacePorts(k, 7, 1, PlaceOptions{}); return err },
		"no ports":           func() error { _, err := p.PlacePorts(l3, 1, 1, PlaceOptions{}); return err },
		"empty range":        func() error { _, err := p.PlacePorts(k, 1, 1, PlaceOptions{Min: 10, Max: 9}); return err },
		"zero ports":         func() error { _, err := p.PlacePorts(k, 1, 0, PlaceOptions{}); return err },
		"range too small":    func() error { _, err := p.PlacePorts(k, 1, 100, PlaceOptions{Min: 1000, Max: 1100}); return err },
		"spread zero":        func() error { _, err := p.Spread(k, 0, PlaceOptions{}); return err },
		"spread short range": func() error { _, err := p.Spread(k, 8, PlaceOptions{Min: 40000, Max: 40001}); return err },
		"bad field":          func() error { _, err := p.PlacePorts(k, 1, 1, PlaceOptions{Port: 5}); return err },
	} {
		if err := f(); !errors.Is(err, ErrUnplaceable) {
			t.Errorf("%s: error = %v, want ErrUnplaceable", name, err)
		}
	}
	if _, err := p.PlacePorts(FlowKey{}, 1, 1, PlaceOptions{}); !errors.Is(err, ErrFlowKey) {
		t.Errorf("invalid key: error = %v, want ErrFlowKey", err)
	}
}

// BenchmarkPlace compares placement with a brute-force search that hashes
// every candidate flow, in the same binary:
//
//	go test ./rss -run '^$' -bench Place
func BenchmarkPlace(b *testing.B) {
	eq, _ := Equal(8, 128)
	p, _ := NewPredictor(PredictorOptions{Indirection: eq})
	k := FlowKey{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), DstPort: 5201, Ports: true}
	b.Run("PlacePorts/256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.PlacePorts(k, 5, 256, PlaceOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bruteforce/256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ports []uint16
			for v := EphemeralMin; v <= EphemeralMax && len(ports) < 256; v++ {
				kk := k
				kk.SrcPort = uint16(v)
				if p.QueueOfHash(p.Hash(kk)) == 5 {
					ports = append(ports, uint16(v))
				}
			}
		}
	})
	b.Run("Spread/8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Spread(k, 8, PlaceOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPlaceSpeedup alternates PlacePorts and the brute-force search
// for 256 ports of one queue (of 8) in one loop and reports the ratio of
// the fastest run of each, which the noise of a shared machine disturbs
// least:
//
//	go test ./rss -run '^$' -bench PlaceSpeedup
func BenchmarkPlaceSpeedup(b *testing.B) {
	eq, _ := Equal(8, 128)
	p, _ := NewPredictor(PredictorOptions{Indirection: eq})
	k := FlowKey{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), DstPort: 5201, Ports: true}
	const want = 256
	brute := func() int {
		n := 0
		for v := EphemeralMin; v <= EphemeralMax && n < want; v++ {
			kk := k
			kk.SrcPort = uint16(v)
			if p.QueueOfHash(p.Hash(kk)) == 5 {
				n++
			}
		}
		return n
	}
	b.ReportAllocs()
	minPlace, minBrute := time.Duration(1<<62), time.Duration(1<<62)
	for b.Loop() {
		t0 := time.Now()
		ports, err := p.PlacePorts(k, 5, want, PlaceOptions{})
		t1 := time.Now()
		if n := brute(); err != nil || n != len(ports) {
			b.Fatalf("PlacePorts found %d (%v), brute force %d", len(ports), err, n)
		}
		minPlace, minBrute = min(minPlace, t1.Sub(t0)), min(minBrute, time.Since(t1))
	}
	b.ReportMetric(float64(minPlace.Nanoseconds()), "place-ns")
	b.ReportMetric(float64(minBrute.Nanoseconds()), "bruteforce-ns")
	b.ReportMetric(float64(minBrute)/float64(minPlace), "speedup")
}
