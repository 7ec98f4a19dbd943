//go:build !linux

package netnstest

import (
	"errors"
	"runtime"
)

// KernelVersion fails: the tests' kernel is Linux.
func KernelVersion() (string, error) { return "", errors.New("no Linux kernel on " + runtime.GOOS) }
