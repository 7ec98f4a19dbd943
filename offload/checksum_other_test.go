//go:build !amd64 || purego

package offload

func checksumGeneric(b []byte, initial uint16) uint16 { return checksum(b, initial) }

func checksumAVX2Any(b []byte, initial uint16) uint16 { panic("no vector checksum on this platform") }
