package offload

import (
	"encoding/binary"
	"math/bits"
)

// copyAndSum copies src to dst and returns the folded Internet checksum of
// src (as Checksum), in one pass over the bytes.
func copyAndSum(dst, src []byte) uint16 { return copySum(dst, src) }

// copySum copies src into dst (which must be at least len(src) long) and
// returns the Internet checksum (folded, not complemented, as Checksum) of
// src, in one pass over the bytes: with AVX2 a vector loop that stores each
// loaded vector and adds it up, elsewhere a scalar loop.
//
// The sum is accumulated over little-endian words with end-around carry
// (the one's complement sum is independent of byte order up to a final
// byte swap, RFC 1071 section 2(B)).
func copySum(dst, src []byte) uint16 {
	dst = dst[:len(src)]
	var s uint64
	if useAVX2 && len(src) >= copySumVecMin {
		n := len(src) &^ 31
		s = copySumBlocks(dst[:n], src[:n])
		dst, src = dst[n:], src[n:]
	}
	s = addCarry(s, copySumScalar(dst, src))
	// Fold to 16 bits in little-endian lanes, then swap to network order.
	return bits.ReverseBytes16(Fold(s))
}

// addCarry adds two one's complement accumulators with end-around carry.
func addCarry(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	return s + c
}

// copySumScalar copies src into dst[:len(src)] and returns the unfolded
// little-endian sum of src: one load, one store and one add-with-carry per
// eight bytes.
func copySumScalar(dst, src []byte) uint64 {
	dst = dst[:len(src)]
	var s, c uint64
	for len(src) >= 32 {
		v0 := binary.LittleEndian.Uint64(src[0:])
		v1 := binary.LittleEndian.Uint64(src[8:])
		v2 := binary.LittleEndian.Uint64(src[16:])
		v3 := binary.LittleEndian.Uint64(src[24:])
		binary.LittleEndian.PutUint64(dst[0:], v0)
		binary.LittleEndian.PutUint64(dst[8:], v1)
		binary.LittleEndian.PutUint64(dst[16:], v2)
		binary.LittleEndian.PutUint64(dst[24:], v3)
		s, c = bits.Add64(s, v0, c)
		s, c = bits.Add64(s, v1, c)
		s, c = bits.Add64(s, v2, c)
		s, c = bits.Add64(s, v3, c)
		src = src[32:]
		dst = dst[32:]
	}
	for len(src) >= 8 {
		v := binary.LittleEndian.Uint64(src)
		binary.LittleEndian.PutUint64(dst, v)
		s, c = bits.Add64(s, v, c)
		src = src[8:]
		dst = dst[8:]
	}
	// c is at most 1 and s at most 2^64-2 after a carry: no overflow.
	s += c
	var tail uint64
	for i := len(src) - 1; i >= 0; i-- {
		dst[i] = src[i]
		tail = tail<<8 | uint64(src[i])
	}
	return addCarry(s, tail)
}

// swapSum returns the contribution of a block that starts at an odd offset
// within the checksummed message, given the block's own sum.
func swapSum(s uint16) uint16 { return bits.ReverseBytes16(s) }
