//go:build !linux

package main

import (
	"fmt"
	"runtime"

	"github.com/xdpio/xdpio/xsk"
)

// runDemo needs Linux: namespaces, veth and an XDP generator.
func runDemo(o *options, queues int) error {
	return fmt.Errorf("-demo on %s: %w", runtime.GOOS, xsk.ErrNotSupported)
}
