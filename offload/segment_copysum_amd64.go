//go:build !purego

package offload

// copySumAVX2 copies n bytes (a positive multiple of 32, at most 1<<22)
// from src to dst and returns the unfolded little-endian 16-bit word sum of
// the bytes.
//
//go:noescape
func copySumAVX2(dst, src *byte, n int) uint64

// copySumVecMin is the length from which copySum uses the vector loop.
const copySumVecMin = 128

// copySumBlocks copies src (a multiple of 32 bytes long) to dst and returns
// the unfolded little-endian sum of src.
func copySumBlocks(dst, src []byte) uint64 {
	var acc uint64
	for len(src) > 0 {
		n := min(len(src), 1<<22)
		acc = addCarry(acc, copySumAVX2(&dst[0], &src[0], n))
		dst, src = dst[n:], src[n:]
	}
	return acc
}
