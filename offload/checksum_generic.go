package offload

import (
	"encoding/binary"
	"math/bits"
)

// checksum is the implementation of Checksum. It sums the data as
// little-endian 64-bit words with end-around carry (the compiler turns the
// bits.Add64 chains into add-with-carry instructions), folds the sum to 16
// bits and swaps its bytes: RFC 1071 section 1.2(B) shows that the sum is
// byte-order independent, so this equals the sum of big-endian 16-bit
// words. It is correct on every architecture (on big-endian ones the loads
// swap bytes). Where the CPU has a vector unit (useAVX2), long inputs are
// summed there in 64-byte blocks and only the tail here.
func checksum(b []byte, initial uint16) uint16 {
	acc := uint64(bits.ReverseBytes16(initial))
	n := len(b)
	i := 0
	if n >= avx2Min && useAVX2 {
		i = n &^ 63
		acc = sumBlocksAVX2(b[:i], acc)
	}
	// Index arithmetic instead of reslicing b: subslices with a constant
	// length need no bounds checks inside and no pointer masking.
	var c uint64
	for ; i+64 <= n; i += 64 {
		x := b[i : i+64 : i+64]
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[24:32]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[32:40]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[40:48]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[48:56]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[56:64]), c)
		acc, _ = bits.Add64(acc, 0, c) // one add-with-carry; cannot carry out again
	}
	if i+32 <= n {
		x := b[i : i+32 : i+32]
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[24:32]), c)
		acc, _ = bits.Add64(acc, 0, c)
		i += 32
	}
	if i+16 <= n {
		x := b[i : i+16 : i+16]
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(x[8:16]), c)
		acc, _ = bits.Add64(acc, 0, c)
		i += 16
	}
	if i+8 <= n {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[i:i+8:i+8]), 0)
		acc, _ = bits.Add64(acc, 0, c)
		i += 8
	}
	if i == n {
		return bits.ReverseBytes16(Fold(acc))
	}
	// 1 to 7 bytes are left, at an offset that is a multiple of 8, so the
	// first of them is the low byte of a little-endian word.
	r := uint(n - i)
	var t uint64
	if n >= 8 {
		// Load the last 8 bytes of the input and shift out the ones
		// already summed: one load instead of up to three branches.
		t = binary.LittleEndian.Uint64(b[n-8:]) >> (64 - 8*r)
	} else {
		var k uint
		if r&4 != 0 {
			t = uint64(binary.LittleEndian.Uint32(b))
			k = 4
		}
		if r&2 != 0 {
			t |= uint64(binary.LittleEndian.Uint16(b[k:])) << (8 * k)
			k += 2
		}
		if r&1 != 0 {
			t |= uint64(b[k]) << (8 * k)
		}
	}
	acc, c = bits.Add64(acc, t, 0)
	return bits.ReverseBytes16(Fold(acc + c))
}
