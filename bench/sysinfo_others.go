//go:build !linux

package bench

import "runtime"

// systemInfo is this machine as far as Go tells it (iperf3's system_info
// is uname's, which is Linux's here).
func systemInfo() string { return runtime.GOOS + " " + runtime.GOARCH }
