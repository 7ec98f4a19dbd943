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
	all, n := b, len(b)
	if n >= avx2Min && useAVX2 {
		k := n &^ 63
		acc = sumBlocksAVX2(b[:k], acc)
		b = b[k:]
	}
	var c uint64
	for len(b) >= 64 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[32:40]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[40:48]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[48:56]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[56:64]), c)
		acc += c // cannot overflow: a sum that carried out is at most 2^64-2
		b = b[64:]
	}
	if len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		acc += c
		b = b[32:]
	}
	if len(b) >= 16 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc += c
		b = b[16:]
	}
	if len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), 0)
		acc += c
		b = b[8:]
	}
	if len(b) == 0 {
		return bits.ReverseBytes16(Fold(acc))
	}
	// 1 to 7 bytes are left, at an offset that is a multiple of 8, so the
	// first of them is the low byte of a little-endian word.
	var t uint64
	if n >= 8 {
		// Load the last 8 bytes of the input and shift out the ones
		// already summed: one load instead of up to three branches.
		t = binary.LittleEndian.Uint64(all[n-8:]) >> (64 - 8*uint(len(b)))
	} else {
		i := 0
		if len(b)&4 != 0 {
			t = uint64(binary.LittleEndian.Uint32(b))
			i = 4
		}
		if len(b)&2 != 0 {
			t |= uint64(binary.LittleEndian.Uint16(b[i:])) << (8 * i)
			i += 2
		}
		if len(b)&1 != 0 {
			t |= uint64(b[i]) << (8 * i)
		}
	}
	acc, c = bits.Add64(acc, t, 0)
	return bits.ReverseBytes16(Fold(acc + c))
}
