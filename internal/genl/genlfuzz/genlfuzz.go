// Package genlfuzz is the scaffolding the fuzz tests of xdpio's generic
// netlink decoders share (internal/genl, internal/ethtool,
// internal/netdev): seeds built with an attribute encoder, their
// truncations, the check that a decoder never accepts broken attribute
// framing, and the writer of seed corpus files recorded from the kernel.
package genlfuzz

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
)

// FramingValid reports whether b is a sequence of whole netlink
// attributes (top level only).
func FramingValid(b []byte) bool {
	pos := 0
	for pos < len(b) {
		if pos+4 > len(b) {
			return false
		}
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		if l < 4 || pos+l > len(b) {
			return false
		}
		pos += (l + 3) &^ 3
	}
	return true
}

// AddSeeds adds each seed and some of its truncations to f.
func AddSeeds(f *testing.F, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
		for _, cut := range []int{1, 3, 4, 5, len(s) / 2, len(s) - 1} {
			if cut > 0 && cut < len(s) {
				f.Add(s[:cut])
			}
		}
	}
}

// CheckDecode fails t when a decoder accepted b (err is nil) although
// b's attribute framing is broken.
func CheckDecode(t *testing.T, b []byte, err error) {
	t.Helper()
	if err == nil && !FramingValid(b) {
		t.Fatalf("decoder accepted broken framing: %x", b)
	}
}

// Attrs returns the attributes fn encodes. It panics when they do not
// encode: seeds are built by the tests themselves.
func Attrs(fn func(ae *netlink.AttributeEncoder)) []byte {
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

// WriteSeed writes b as a seed corpus file testdata/fuzz/FUZZ/NAME under
// dir (the package directory of the fuzz target).
func WriteSeed(tb testing.TB, dir, fuzz, name string, b []byte) {
	tb.Helper()
	d := filepath.Join(dir, "testdata", "fuzz", fuzz)
	if err := os.MkdirAll(d, 0o755); err != nil {
		tb.Fatal(err)
	}
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
}
