//go:build !amd64 || purego

package offload

// useAVX2 is false where there is no assembly; the compiler drops the
// vector path from checksum.
const useAVX2 = false

const avx2Min = 0

func sumBlocksAVX2(b []byte, acc uint64) uint64 {
	panic("offload: no vector checksum on this platform")
}
