//go:build !linux

package kernelplane

import "github.com/xdpio/xdpio/internal/errs"

// forceBuffer is Linux's; elsewhere the caller falls back to the plain
// buffer size.
func forceBuffer(fd uintptr, rx bool, size int) error { return errs.ErrNotSupported }

// bufferSizes is Linux's; elsewhere a report leaves the sizes out.
func bufferSizes(fd uintptr) (send, receive int, err error) { return 0, 0, errs.ErrNotSupported }
