//go:build !linux

package bench

// forceBuffer is Linux's; elsewhere the caller falls back to the plain
// buffer size.
func forceBuffer(fd uintptr, rx bool, size int) error { return ErrUnsupported }
