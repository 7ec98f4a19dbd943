//go:build !linux

package nsdo

import (
	"errors"
	"runtime"
)

var errOS = errors.New("network namespaces exist only on Linux, not on " + runtime.GOOS)

// DoNamed fails: network namespaces exist only on Linux.
func DoNamed(name string, fn func() error) error { return errOS }
