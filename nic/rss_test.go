package nic

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/rss"
)

// RSS.Predictor models the device's configuration: its key, table and
// input transformation; other hash functions, a missing key or table are
// refused.
func TestRSSPredictor(t *testing.T) {
	eq, _ := rss.Equal(4, 128)
	st := RSS{Indir: eq, Key: rss.DefaultKey(), HFunc: "toeplitz", InputXfrm: rss.SymmetricXOR}
	p, err := st.Predictor(rss.IndexLowBits)
	if err != nil {
		t.Fatal(err)
	}
	tz, err := rss.NewToeplitz(nil)
	if err != nil {
		t.Fatal(err)
	}
	k := rss.FlowKey{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), SrcPort: 40000, DstPort: 5201, Ports: true}
	if got, want := p.Hash(k), tz.HashFlow(k, rss.SymmetricXOR); got != want {
		t.Errorf("hash %#x, want %#x with the table's input transformation", got, want)
	}
	st.HFunc = "crc32"
	if _, err := st.Predictor(rss.IndexLowBits); !errors.Is(err, ErrNotSupported) {
		t.Errorf("crc32: error = %v, want ErrNotSupported", err)
	}
	st.HFunc, st.Key = "", nil
	if _, err := st.Predictor(rss.IndexLowBits); !errors.Is(err, rss.ErrKeyInvalid) {
		t.Errorf("no key: error = %v, want ErrKeyInvalid", err)
	}
	st.Key, st.Indir = rss.DefaultKey(), nil
	if _, err := st.Predictor(rss.IndexLowBits); !errors.Is(err, rss.ErrIndirection) {
		t.Errorf("no table: error = %v, want ErrIndirection", err)
	}
}

func TestHFuncBit(t *testing.T) {
	names := []string{"toeplitz", "xor", "crc32"}
	for i, n := range names {
		b, err := hfuncBit(n, names)
		if err != nil || b != 1<<uint(i) {
			t.Errorf("hfuncBit(%q) = %#x, %v", n, b, err)
		}
	}
	if _, err := hfuncBit("md5", names); err == nil {
		t.Error("unknown hash function accepted")
	}
}
