package labctl

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Environment variables the lab's guest /init sets for the tests.
const (
	// EnvNetdevsim names the netdevsim port's interface (4 combined
	// channels at boot).
	EnvNetdevsim = "XDPIO_LAB_NETDEVSIM"
	// EnvNetdevsimDebugfs is the port's debugfs directory
	// (…/netdevsim/netdevsimN/ports/0), which holds ethtool/ring/*_max_pending.
	EnvNetdevsimDebugfs = "XDPIO_LAB_NETDEVSIM_DEBUGFS"
	// EnvVirtio names the virtio-net NIC (4 queue pairs, RSS, hash report).
	EnvVirtio = "XDPIO_LAB_VIRTIO"
	// EnvCtl is the path of the control port to the host's sender.
	EnvCtl = "XDPIO_LAB_CTL"
	// EnvRequire, when "1", turns a skip for any missing lab device into
	// a failure; a comma-separated list of these variables' names does so
	// for those only (a guest without netdevsim lists the others).
	EnvRequire = "XDPIO_LAB_REQUIRE"
)

// Netdevsim returns the netdevsim interface's name, or skips tb outside
// the lab.
func Netdevsim(tb testing.TB) string { tb.Helper(); return need(tb, EnvNetdevsim) }

// NetdevsimDebugfs returns the netdevsim port's debugfs directory, or
// skips tb outside the lab.
func NetdevsimDebugfs(tb testing.TB) string { tb.Helper(); return need(tb, EnvNetdevsimDebugfs) }

// Virtio returns the virtio-net interface's name, or skips tb outside the
// lab.
func Virtio(tb testing.TB) string { tb.Helper(); return need(tb, EnvVirtio) }

// CtlPath returns the control port's path, or skips tb outside the lab.
func CtlPath(tb testing.TB) string { tb.Helper(); return need(tb, EnvCtl) }

func need(tb testing.TB, name string) string {
	tb.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := fmt.Sprintf("skipping: %s is unset: this test runs in the hardware lab (test/lab/run)", name)
	if required(name) {
		tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequire)
	}
	tb.Skip(msg)
	return ""
}

// WriteFile writes s to a sysfs or debugfs file and fails tb on error.
func WriteFile(tb testing.TB, path, s string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		tb.Fatalf("write %q to %s: %v", s, path, err)
	}
}

// required reports whether EnvRequire forbids skipping for a missing name.
func required(name string) bool {
	v := os.Getenv(EnvRequire)
	if v == "1" {
		return true
	}
	for _, n := range strings.Split(v, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}
