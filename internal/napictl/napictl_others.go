//go:build !linux

package napictl

import (
	"errors"

	"github.com/xdpio/xdpio/internal/netdev"
)

var errNotLinux = errors.New("napictl: NAPI deferral needs Linux")

// Holder is unavailable on this system.
type Holder struct{}

// Report says what RestoreStale did.
type Report struct {
	Restored, Held []Entry
}

// Apply returns an error: NAPI deferral needs Linux.
func Apply(c *netdev.Client, req Request) (*Holder, error) { return nil, errNotLinux }

// RestoreStale returns an error: NAPI deferral needs Linux.
func RestoreStale(c *netdev.Client, dir, ifname string, ifindex int) (Report, error) {
	return Report{}, errNotLinux
}

// Entries returns nil.
func (h *Holder) Entries() []Entry { return nil }

// Close does nothing.
func (h *Holder) Close() error { return nil }
