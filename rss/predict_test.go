package rss

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestNewPredictorErrors(t *testing.T) {
	eq, _ := Equal(4, 128)
	for _, c := range []struct {
		name string
		o    PredictorOptions
		want error
	}{
		{"empty", PredictorOptions{}, ErrIndirection},
		{"low-bits over 100", PredictorOptions{Indirection: make([]uint32, 100)}, ErrIndirection},
		{"rule", PredictorOptions{Indirection: eq, Rule: 9}, ErrIndirection},
		{"symmetric", PredictorOptions{Indirection: eq, Symmetric: 3}, ErrSymmetricInvalid},
		{"key", PredictorOptions{Indirection: eq, Key: []byte{1}}, ErrKeyInvalid},
	} {
		if _, err := NewPredictor(c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: error = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := NewPredictor(PredictorOptions{Indirection: make([]uint32, 100), Rule: IndexModulo}); err != nil {
		t.Errorf("modulo over 100 entries: %v", err)
	}
}

// TestPredictMicrosoftVectors predicts the queue of the suite's flows with
// the kernel's default table, from the published hashes and the documented
// rule (low seven bits index a 128-entry table).
func TestPredictMicrosoftVectors(t *testing.T) {
	for _, queues := range []int{1, 2, 3, 4, 8, 16} {
		eq, _ := Equal(queues, DefaultTableSize)
		p, err := NewPredictor(PredictorOptions{Indirection: eq})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range readMSVectors(t) {
			k := FlowKey{Src: v.src, Dst: v.dst, SrcPort: v.sport, DstPort: v.dport, Ports: true}
			got, err := p.Queue(k)
			if err != nil {
				t.Fatal(err)
			}
			if want := (v.hashL4 & 0x7f) % uint32(queues); got != want {
				t.Errorf("%d queues, %v: queue %d, want %d (hash %#08x)", queues, k, got, want, v.hashL4)
			}
		}
	}
}

func TestIndexRules(t *testing.T) {
	tab := make([]uint32, 100)
	for i := range tab {
		tab[i] = uint32(i)
	}
	mod, _ := NewPredictor(PredictorOptions{Indirection: tab, Rule: IndexModulo})
	scale, _ := NewPredictor(PredictorOptions{Indirection: tab, Rule: IndexScale})
	for _, h := range []uint32{0, 1, 99, 100, 0x51ccc178, 0xffffffff, 0x80000000} {
		if got, want := mod.QueueOfHash(h), h%100; got != want {
			t.Errorf("modulo: hash %#x -> %d, want %d", h, got, want)
		}
		if got, want := scale.QueueOfHash(h), uint32(uint64(h)*100>>32); got != want {
			t.Errorf("scale: hash %#x -> %d, want %d", h, got, want)
		}
	}
	for _, s := range []string{"low-bits", "modulo", "scale"} {
		r, err := ParseIndexRule(s)
		if err != nil || r.String() != s {
			t.Errorf("ParseIndexRule(%q) = %v, %v", s, r, err)
		}
	}
	if _, err := ParseIndexRule("crc"); !errors.Is(err, ErrIndirection) {
		t.Errorf("ParseIndexRule(crc) error = %v", err)
	}
}

func TestPredictorQueues(t *testing.T) {
	p, err := NewPredictor(PredictorOptions{Indirection: []uint32{5, 1, 5, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.Queues()); got != "[1 3 5]" {
		t.Errorf("Queues = %s", got)
	}
	if _, err := p.Queue(FlowKey{Src: netip.MustParseAddr("198.18.0.1")}); !errors.Is(err, ErrFlowKey) {
		t.Errorf("Queue(no dst) error = %v", err)
	}
}
