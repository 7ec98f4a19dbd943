package offload

import (
	"encoding/binary"
	"math/bits"
)

// Checksum returns the 16-bit one's complement sum (RFC 1071) of b, added to
// initial, folded but not complemented. An odd trailing byte is padded with a
// zero byte on the right. To checksum a message that is split over several
// slices, pass the result of one call as initial to the next; every slice but
// the last must then have even length. (A part that starts at an odd offset
// of the message contributes its sum with the bytes swapped:
// bits.ReverseBytes16(Checksum(part, 0)), added with Combine — RFC 1071
// section 1.2(B).)
//
// The value written into a header is ^Checksum(...). On amd64 CPUs with AVX2
// inputs from a few hundred bytes on are summed with vector instructions;
// build with the purego tag to use the portable code everywhere.
func Checksum(b []byte, initial uint16) uint16 {
	return checksum(b, initial)
}

// Fold folds a wide one's complement accumulator into 16 bits with
// end-around carry. It returns 0 only for 0; a nonzero multiple of 0xffff
// folds to 0xffff.
func Fold(sum uint64) uint16 {
	// Adding the value rotated by half its width leaves the end-around
	// carry sum of both halves in the upper half: the carry out of the
	// lower half is the end-around carry.
	s := uint32((sum + bits.RotateLeft64(sum, 32)) >> 32)
	return uint16((s + bits.RotateLeft32(s, 16)) >> 16)
}

// Combine adds two partial sums in one's complement arithmetic.
func Combine(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}

// PseudoHeaderIPv4 returns the sum of the IPv4 pseudo-header (RFC 793/768):
// source and destination address, protocol and the L4 length.
func PseudoHeaderIPv4(src, dst [4]byte, proto uint8, length uint16) uint16 {
	sum := uint64(binary.BigEndian.Uint16(src[0:])) + uint64(binary.BigEndian.Uint16(src[2:])) +
		uint64(binary.BigEndian.Uint16(dst[0:])) + uint64(binary.BigEndian.Uint16(dst[2:])) +
		uint64(proto) + uint64(length)
	return Fold(sum)
}

// PseudoHeaderIPv6 returns the sum of the IPv6 pseudo-header (RFC 8200
// section 8.1): source and destination address, upper-layer length and next
// header.
func PseudoHeaderIPv6(src, dst [16]byte, proto uint8, length uint32) uint16 {
	var sum uint64
	for i := 0; i < 16; i += 4 {
		sum += uint64(binary.BigEndian.Uint32(src[i:]))
		sum += uint64(binary.BigEndian.Uint32(dst[i:]))
	}
	sum += uint64(length) + uint64(proto)
	return Fold(sum)
}

// Update16 returns the checksum field value after a 16-bit word covered by it
// changed from old to new (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')).
// check is the value as stored in the header (complemented).
func Update16(check, old, new uint16) uint16 {
	s := uint32(^check) + uint32(^old) + uint32(new)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return ^uint16(s)
}

// Update32 is Update16 for a 32-bit field (an IPv4 address, a TCP sequence
// number) at an even offset.
func Update32(check uint16, old, new uint32) uint16 {
	return Update16(Update16(check, uint16(old>>16), uint16(new>>16)), uint16(old), uint16(new))
}

// CopyChecksum copies src into dst like copy, and returns the number of
// bytes copied and their checksum (Checksum of src[:n], initial 0): it sums
// the bytes while it copies them, one pass instead of two, for a payload
// written into a packet buffer anyway.
func CopyChecksum(dst, src []byte) (int, uint16) {
	n := min(len(dst), len(src))
	return n, copySum(dst[:n], src[:n])
}
