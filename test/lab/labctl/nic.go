package labctl

import (
	"testing"

	"github.com/xdpio/xdpio/nic"
)

// OpenNIC opens device name (Netdevsim's or Virtio's) with nic.Open in
// the calling thread's namespace and closes it when the test ends.
func OpenNIC(tb testing.TB, name string) *nic.Device {
	tb.Helper()
	d, err := nic.Open(name)
	if err != nil {
		tb.Fatalf("nic.Open %s: %v", name, err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}
