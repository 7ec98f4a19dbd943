//go:build linux

package napictl_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/nsdo"
)

// setup builds a veth pair with GRO on at A (two NAPI instances) and a
// netdev client inside A; records go to a temporary directory.
func setup(t *testing.T) (*netnstest.Pair, *netdev.Client, []netdev.NAPI, string) {
	t.Helper()
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	netnstest.RequireTool(t, "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ethtool", "-K", p.A.Link, "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	var c *netdev.Client
	if err := p.A.Do(func() (err error) { c, err = netdev.Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	napis, err := c.NAPIs(p.A.Ifindex)
	if err != nil || len(napis) != 2 {
		t.Fatalf("NAPIs: %v %v", napis, err)
	}
	return p, c, napis, t.TempDir()
}

func ids(ns []netdev.NAPI) []uint32 {
	var out []uint32
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

// check compares each NAPI's current values with want (napi-get).
func check(t *testing.T, c *netdev.Client, when string, napis []netdev.NAPI, defer_ uint32, gro time.Duration) {
	t.Helper()
	for _, n := range napis {
		got, err := c.NAPI(n.ID)
		if err != nil {
			t.Fatalf("%s: NAPI %d: %v", when, n.ID, err)
		}
		if *got.DeferHardIRQs != defer_ || *got.GROFlushTimeout != gro {
			t.Errorf("%s: napi %d has defer %d gro %v, want %d %v", when, n.ID, *got.DeferHardIRQs, *got.GROFlushTimeout, defer_, gro)
		}
	}
}

func TestApplyClose(t *testing.T) {
	p, c, napis, dir := setup(t)
	d0, g0 := *napis[0].DeferHardIRQs, *napis[0].GROFlushTimeout
	h, err := napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[:1]),
		Settings: napictl.Settings{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}, Dir: dir})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	check(t, c, "applied", napis[:1], 2, 200*time.Microsecond)
	check(t, c, "untouched", napis[1:], *napis[1].DeferHardIRQs, *napis[1].GROFlushTimeout)
	path := napictl.Path(dir, p.A.Link, p.A.Ifindex)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no record while held: %v", err)
	}
	// A second holder of the same NAPI is refused; another NAPI is fine.
	if _, err := napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[:1]), Dir: dir}); err == nil {
		t.Errorf("second Apply of a held NAPI: no error")
	} else {
		t.Logf("as expected: %v", err)
	}
	h2, err := napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[1:]),
		Settings: napictl.Settings{DeferHardIRQs: 3}, Dir: dir})
	if err != nil {
		t.Fatalf("Apply of the other NAPI: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	check(t, c, "closed", napis[:1], d0, g0)
	check(t, c, "other holder", napis[1:], 3, 0)
	if err := h2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("record left after the last Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// A NAPI of another device is refused.
	if _, err := napictl.Apply(c, napictl.Request{Ifname: "lo", Ifindex: 1, NAPIs: ids(napis[:1]), Dir: dir}); err == nil {
		t.Errorf("Apply with a NAPI of another device: no error")
	}
}

// TestCrashRestore starts a child process that applies deferral and
// blocks, SIGKILLs it, and checks that the next Apply, and RestoreStale,
// put the originals back.
func TestCrashRestore(t *testing.T) {
	p, c, napis, dir := setup(t)
	d0, g0 := *napis[0].DeferHardIRQs, *napis[0].GROFlushTimeout

	crash := func() {
		cmd := netnstest.StartHelper(t, "TestHelperHolder", "applied", "NAPICTL_HELPER="+strings.Join([]string{p.A.NS, p.A.Link,
			strconv.Itoa(p.A.Ifindex), dir, fmt.Sprint(napis[0].ID), fmt.Sprint(napis[1].ID)}, " "))
		check(t, c, "held by the child", napis, 9, 123*time.Microsecond)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL: no Close
			t.Fatal(err)
		}
		cmd.Wait()
		check(t, c, "after SIGKILL", napis, 9, 123*time.Microsecond)
	}

	// 1. The next Apply restores what the dead holder left, and records
	// the true originals, not the crashed values.
	crash()
	h, err := napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[:1]),
		Settings: napictl.Settings{DeferHardIRQs: 1, GROFlushTimeout: time.Microsecond}, Dir: dir})
	if err != nil {
		t.Fatalf("Apply after the crash: %v", err)
	}
	check(t, c, "stale NAPI restored by Apply", napis[1:], *napis[1].DeferHardIRQs, *napis[1].GROFlushTimeout)
	if e := h.Entries()[0]; e.DeferHardIRQs != d0 || e.GROFlushTimeoutNS != int64(g0) {
		t.Errorf("Apply recorded %d/%d as originals, want %d/%d", e.DeferHardIRQs, e.GROFlushTimeoutNS, d0, g0)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	check(t, c, "closed", napis, d0, g0)

	// 2. RestoreStale (xdpio napi reset) does the same without applying.
	crash()
	rep, err := napictl.RestoreStale(c, dir, p.A.Link, p.A.Ifindex)
	if err != nil {
		t.Fatalf("RestoreStale: %v", err)
	}
	if len(rep.Restored) != 2 || len(rep.Held) != 0 {
		t.Errorf("RestoreStale report %+v, want 2 restored", rep)
	}
	check(t, c, "reset", napis, d0, g0)
	if _, err := os.Stat(napictl.Path(dir, p.A.Link, p.A.Ifindex)); !os.IsNotExist(err) {
		t.Errorf("record left after reset: %v", err)
	}
}

// TestHelperHolder is the child of TestCrashRestore: it applies deferral
// inside the namespace, says so, and waits to be killed.
func TestHelperHolder(t *testing.T) {
	f := netnstest.HelperArgs(t, "NAPICTL_HELPER")
	ifindex, _ := strconv.Atoi(f[2])
	var napis []uint32
	for _, s := range f[4:] {
		v, _ := strconv.ParseUint(s, 10, 32)
		napis = append(napis, uint32(v))
	}
	err := nsdo.DoNamed(f[0], func() error {
		c, err := netdev.Dial()
		if err != nil {
			return err
		}
		_, err = napictl.Apply(c, napictl.Request{Ifname: f[1], Ifindex: ifindex, NAPIs: napis,
			Settings: napictl.Settings{DeferHardIRQs: 9, GROFlushTimeout: 123 * time.Microsecond}, Dir: f[3]})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("applied")
	time.Sleep(20 * time.Second) // killed long before
	t.Fatal("not killed")
}

// TestApplyIRQSuspend: an irq-suspend-timeout is set with the deferral,
// its original recorded, and put back by Close; without one, the NAPI's
// value is left alone.
func TestApplyIRQSuspend(t *testing.T) {
	p, c, napis, dir := setup(t)
	if napis[0].IRQSuspendTimeout == nil {
		netnstest.SkipIfKernelBefore(t, "6.13", "irq-suspend-timeout")
		t.Fatal("the kernel reports no irq-suspend-timeout, though it is 6.13 or later")
	}
	orig := *napis[0].IRQSuspendTimeout
	h, err := napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[:1]),
		Settings: napictl.Settings{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond, IRQSuspendTimeout: 20 * time.Millisecond}, Dir: dir})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got, err := c.NAPI(napis[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if *got.IRQSuspendTimeout != 20*time.Millisecond {
		t.Errorf("irq-suspend-timeout while held: %v, want 20ms", *got.IRQSuspendTimeout)
	}
	if e := h.Entries()[0]; e.IRQSuspendTimeoutNS == nil || *e.IRQSuspendTimeoutNS != int64(orig) {
		t.Errorf("recorded original irq-suspend-timeout %v, want %v", e.IRQSuspendTimeoutNS, orig)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.NAPI(napis[0].ID); *got.IRQSuspendTimeout != orig {
		t.Errorf("after Close: %v, want the original %v", *got.IRQSuspendTimeout, orig)
	}
	// Without IRQSuspendTimeout the value stays as it is, and is not
	// recorded.
	s := 7 * time.Millisecond
	if err := c.SetNAPI(napis[0].ID, netdev.NAPIConfig{IRQSuspendTimeout: &s}); err != nil {
		t.Fatal(err)
	}
	defer c.SetNAPI(napis[0].ID, netdev.NAPIConfig{IRQSuspendTimeout: &orig})
	h, err = napictl.Apply(c, napictl.Request{Ifname: p.A.Link, Ifindex: p.A.Ifindex, NAPIs: ids(napis[:1]),
		Settings: napictl.Settings{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if e := h.Entries()[0]; e.IRQSuspendTimeoutNS != nil {
		t.Errorf("irq-suspend-timeout recorded without being set")
	}
	h.Close()
	if got, _ := c.NAPI(napis[0].ID); *got.IRQSuspendTimeout != s {
		t.Errorf("irq-suspend-timeout %v after an Apply without it, want %v left alone", *got.IRQSuspendTimeout, s)
	}
}
