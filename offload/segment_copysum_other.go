//go:build !amd64 || purego

package offload

import "math"

// copySumVecMin is the length from which copySum uses the vector loop
// (never: there is none on this platform).
const copySumVecMin = math.MaxInt

// copySumBlocks is never called where useAVX2 is false.
func copySumBlocks(dst, src []byte) uint64 { panic("offload: no vector copy-and-sum on this platform") }
