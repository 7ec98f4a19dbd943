//go:build !purego

package offload

import "math/bits"

// sumAVX2 adds n bytes at p (n a positive multiple of 64, at most
// avx2MaxChunk) as little-endian 16-bit words; the sum is not folded.
//
//go:noescape
func sumAVX2(p *byte, n int) uint64

func cpuid(leaf, subleaf uint32) (a, b, c, d uint32)
func xgetbv0() (eax, edx uint32)

const (
	// avx2Min is the length from which the AVX2 loop beats the scalar
	// add-with-carry chain (see BenchmarkChecksum).
	avx2Min = 320
	// avx2MaxChunk bounds one sumAVX2 call so that its 32-bit lanes
	// cannot overflow (65536 iterations of 64 bytes).
	avx2MaxChunk = 1 << 22
)

// useAVX2 is set when the CPU and the OS support AVX2 (YMM state saved).
var useAVX2 = hasAVX2()

func hasAVX2() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if c1&osxsave == 0 || c1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0
}

// sumBlocksAVX2 adds b (a multiple of 64 bytes long) to acc with sumAVX2,
// in chunks small enough for its 32-bit lanes.
func sumBlocksAVX2(b []byte, acc uint64) uint64 {
	for len(b) > 0 {
		n := min(len(b), avx2MaxChunk)
		var c uint64
		acc, c = bits.Add64(acc, sumAVX2(&b[0], n), 0)
		acc += c
		b = b[n:]
	}
	return acc
}
