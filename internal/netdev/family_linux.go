//go:build linux

package netdev

import "encoding/binary"

// attrAt returns the type of the top-level request attribute that holds
// byte off of the request payload b (the extack's offset, less the
// netlink and generic netlink headers), or 0.
func attrAt(b []byte, off int) uint16 {
	pos := 0
	for pos+4 <= len(b) {
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		if l < 4 {
			return 0
		}
		if off >= pos && off < pos+l {
			return binary.NativeEndian.Uint16(b[pos+2:]) &^ nlaFNested
		}
		pos += (l + 3) &^ 3
	}
	return 0
}
