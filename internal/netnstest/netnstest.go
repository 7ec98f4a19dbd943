package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/xdpio/xdpio/internal/vethpair"
)

// EnvRequirePriv names the environment variable that turns a "needs root"
// skip into a test failure. .ci/run sets it to 1.
const EnvRequirePriv = "XDPIO_REQUIRE_PRIV"

// Prefix starts the name of every namespace this package creates.
const Prefix = vethpair.Prefix

// The test network's types and constructor are package vethpair's; they
// are named here too so that tests need one import.
type (
	// Config describes a test network (vethpair.Config).
	Config = vethpair.Config
	// Host is one end of the pair (vethpair.Host).
	Host = vethpair.Host
	// Pair is two hosts joined by a veth pair (vethpair.Pair).
	Pair = vethpair.Pair
)

// ErrNotPrivileged is returned by NewPair when the process is not root.
var ErrNotPrivileged = vethpair.ErrNotPrivileged

// NewPair creates the test network without a testing.TB (vethpair.NewPair):
// the caller must Close it.
func NewPair(cfg Config) (*Pair, error) { return vethpair.NewPair(cfg) }

// ReadCounters is vethpair.ReadCounters.
func ReadCounters() (map[string]int64, error) { return vethpair.ReadCounters() }

// SumStats is vethpair.SumStats.
func SumStats(m map[string]uint64, prefix, suffix string) (uint64, bool) {
	return vethpair.SumStats(m, prefix, suffix)
}

// RequirePriv skips tb unless the process can create namespaces, load BPF
// programs and attach XDP (in practice: runs as root). With
// XDPIO_REQUIRE_PRIV=1 in the environment it fails tb instead of skipping.
func RequirePriv(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	msg := "skipping: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN and CAP_BPF) to create namespaces and attach XDP"
	if os.Getenv(EnvRequirePriv) == "1" {
		tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequirePriv)
	}
	tb.Skip(msg)
}

// RequireTool skips tb when the named program is not on PATH, or fails it
// under XDPIO_REQUIRE_PRIV=1 (CI installs every tool the tests use).
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	Missing(tb, name)
	return ""
}

// Missing skips tb because what (a program, a file of a package) is not
// installed, or fails it under XDPIO_REQUIRE_PRIV=1: CI installs
// everything the tests use (make deps).
func Missing(tb testing.TB, what string) {
	tb.Helper()
	msg := fmt.Sprintf("skipping: %s is not installed (make deps installs it)", what)
	if os.Getenv(EnvRequirePriv) == "1" {
		tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequirePriv)
	}
	tb.Skip(msg)
}

// New creates a fresh pair of namespaces joined by a veth pair and registers
// their removal with tb.Cleanup. It fails tb on any error.
func New(tb testing.TB, cfg Config) *Pair {
	tb.Helper()
	RequirePriv(tb)
	p, err := vethpair.NewPair(cfg)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Counter returns one of the kernel's SNMP counters of h's namespace
// (Host.Counters: "TcpInSegs", "UdpNoPorts"…); it fails tb if they cannot
// be read or have no such counter.
func Counter(tb testing.TB, h *Host, name string) int64 {
	tb.Helper()
	m, err := h.Counters()
	if err != nil {
		tb.Fatal(err)
	}
	v, ok := m[name]
	if !ok {
		tb.Fatalf("no %s in the kernel's SNMP counters", name)
	}
	return v
}
