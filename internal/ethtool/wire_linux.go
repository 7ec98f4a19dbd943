//go:build linux

package ethtool

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// newDecoder checks that b is a sequence of whole attributes, descending
// into nests the kernel marks with NLA_F_NESTED, and returns a decoder
// for it. The netlink package tolerates zero-length attributes and skips
// over them; the kernel never sends them, so they are rejected here
// instead of silently dropping the rest of a reply.
func newDecoder(b []byte) (*netlink.AttributeDecoder, error) {
	if err := checkFraming(b, 0); err != nil {
		return nil, err
	}
	return netlink.NewAttributeDecoder(b)
}

func checkFraming(b []byte, depth int) error {
	if depth > 8 {
		return fmt.Errorf("attributes nested deeper than 8 levels")
	}
	pos := 0
	for pos < len(b) {
		if pos+4 > len(b) {
			return fmt.Errorf("truncated attribute header at byte %d of %d", pos, len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		typ := binary.NativeEndian.Uint16(b[pos+2:])
		if l < 4 || pos+l > len(b) {
			return fmt.Errorf("attribute length %d at byte %d of %d", l, pos, len(b))
		}
		if typ&nlaFNested != 0 {
			if err := checkFraming(b[pos+4:pos+l], depth+1); err != nil {
				return err
			}
		}
		pos += (l + 3) &^ 3
	}
	return nil
}
