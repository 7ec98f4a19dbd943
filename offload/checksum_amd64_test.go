//go:build !purego

package offload

import "math/bits"

// checksumGeneric runs checksum with the vector path switched off.
func checksumGeneric(b []byte, initial uint16) uint16 {
	saved := useAVX2
	useAVX2 = false
	defer func() { useAVX2 = saved }()
	return checksum(b, initial)
}

// checksumAVX2Any runs the vector path at every length (Checksum uses it
// only from avx2Min bytes on) on the 64-byte blocks and the scalar code on
// the rest, so short inputs reach the assembly too.
func checksumAVX2Any(b []byte, initial uint16) uint16 {
	k := len(b) &^ 63
	acc := sumBlocksAVX2(b[:k], uint64(bits.ReverseBytes16(initial)))
	return checksumGeneric(b[k:], bits.ReverseBytes16(Fold(acc)))
}
