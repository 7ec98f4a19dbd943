package genlfuzz

import (
	"testing"

	"github.com/mdlayher/netlink"
)

// FramingValid accepts whole attributes, refuses a zero length, a length
// past the end and a cut header; Attrs encodes what it is given.
func TestFramingValid(t *testing.T) {
	b := Attrs(func(ae *netlink.AttributeEncoder) { ae.Uint32(1, 7); ae.String(2, "x") })
	if !FramingValid(b) || !FramingValid(nil) {
		t.Fatalf("whole attributes %x refused", b)
	}
	for name, bad := range map[string][]byte{"zero length": {0, 0, 1, 0}, "past the end": b[:6], "cut header": b[:2]} {
		if FramingValid(bad) {
			t.Errorf("%s: %x accepted", name, bad)
		}
	}
}
