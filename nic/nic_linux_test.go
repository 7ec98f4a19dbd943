//go:build linux

package nic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
	"golang.org/x/sys/unix"
)

// pair builds a veth pair with GRO on at A (which gives A's RX queues
// NAPI instances) and opens A's device inside A.
func pair(t *testing.T, queues int) (*netnstest.Pair, *nic.Device) {
	t.Helper()
	p := netnstest.New(t, netnstest.Config{Queues: queues})
	netnstest.RequireTool(t, "ethtool")
	run(t, p.A, "ethtool", "-K", p.A.Link, "gro", "on")
	var d *nic.Device
	if err := p.A.Do(func() (err error) { d, err = nic.Open(p.A.Link); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return p, d
}

func run(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// sysfs reads a device-wide NAPI file inside h's namespace (ip netns exec
// mounts that namespace's sysfs).
func sysfs(t *testing.T, h *netnstest.Host, file string) uint64 {
	t.Helper()
	out := run(t, h, "cat", "/sys/class/net/"+h.Link+"/"+file)
	v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", file, out)
	}
	return v
}

func u32(v uint32) *uint32               { return &v }
func dur(v time.Duration) *time.Duration { return &v }

func TestQueuesAndFeatures(t *testing.T) {
	p, d := pair(t, 2)
	qs, err := d.Queues()
	if err != nil {
		t.Fatalf("Queues: %v", err)
	}
	// Oracle: the queue directories sysfs lists.
	ls := strings.Fields(run(t, p.A, "ls", "/sys/class/net/"+p.A.Link+"/queues"))
	if len(qs) != len(ls) || len(qs) != 4 {
		t.Fatalf("Queues: %+v; sysfs lists %v", qs, ls)
	}
	for _, q := range qs {
		dir := fmt.Sprintf("%s-%d", q.Type, q.ID)
		if !strings.Contains(" "+strings.Join(ls, " ")+" ", " "+dir+" ") {
			t.Errorf("queue %s not in sysfs %v", dir, ls)
		}
		if q.XSK {
			t.Errorf("queue %s: XSK bound, none is", dir)
		}
	}
	f, err := d.XDPFeatures()
	if err != nil {
		t.Fatalf("XDPFeatures: %v", err)
	}
	if len(f.XDP) == 0 || f.XDP[0] != "basic" || f.ZeroCopy {
		t.Errorf("veth XDP features %+v: want basic, no zero-copy", f)
	}
}

func TestSetNAPIPerID(t *testing.T) {
	p, d := pair(t, 2)
	all, err := d.NAPIs(nic.AllNAPIs())
	if err != nil || len(all) != 2 {
		t.Fatalf("NAPIs: %+v %v", all, err)
	}
	t.Cleanup(func() {
		for _, n := range all {
			d.SetNAPI(nic.NAPIByID(n.ID), n.NAPISettings)
		}
	})
	ch, err := d.SetNAPI(nic.NAPIByID(all[1].ID), nic.NAPISettings{DeferHardIRQs: u32(4), GROFlushTimeout: dur(300 * time.Microsecond)})
	if err != nil {
		t.Fatalf("SetNAPI: %v", err)
	}
	if ch.Fallback != "" || len(ch.Before) != 1 || len(ch.After) != 1 {
		t.Fatalf("change %+v", ch)
	}
	if *ch.After[0].DeferHardIRQs != 4 || *ch.After[0].GROFlushTimeout != 300*time.Microsecond {
		t.Errorf("after: %v", ch.After[0].NAPISettings)
	}
	if *ch.Before[0].DeferHardIRQs != *all[1].DeferHardIRQs {
		t.Errorf("before: %v, want %v", ch.Before[0].NAPISettings, all[1].NAPISettings)
	}
	// Per-NAPI settings leave the device-wide sysfs value alone, and
	// the other NAPI too.
	if v := sysfs(t, p.A, "napi_defer_hard_irqs"); v != uint64(*all[0].DeferHardIRQs) {
		t.Errorf("sysfs napi_defer_hard_irqs = %d after a per-NAPI set", v)
	}
	other, err := d.NAPIs(nic.NAPIByID(all[0].ID))
	if err != nil || *other[0].DeferHardIRQs != *all[0].DeferHardIRQs {
		t.Errorf("other NAPI changed: %+v %v", other, err)
	}
	// Setting all at once through napi-set: sysfs is not the path, so
	// it stays; every NAPI changes.
	ch, err = d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{IRQSuspendTimeout: dur(time.Millisecond)})
	if err != nil || len(ch.After) != 2 {
		t.Fatalf("SetNAPI(all): %+v %v", ch, err)
	}
	for _, n := range ch.After {
		if *n.IRQSuspendTimeout != time.Millisecond {
			t.Errorf("napi %d irq-suspend-timeout %v", n.ID, *n.IRQSuspendTimeout)
		}
	}
}

func TestBadInput(t *testing.T) {
	p, d := pair(t, 1)
	_, err := d.NAPIs(nic.NAPIByID(0x7ffffff0))
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("unknown NAPI: %v", err)
	}
	t.Logf("unknown NAPI: %v", err)
	_, err = d.NAPIs(nic.NAPIOfQueue(7))
	if err == nil {
		t.Errorf("queue 7 of a 1-queue veth: no error")
	}
	t.Logf("unknown queue: %v", err)
	_, err = d.NAPIs(nic.NAPIOfQueue(0))
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("queue without NAPI link: %v", err)
	}
	t.Logf("veth queue: %v", err)
	_, err = d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{DeferHardIRQs: u32(1 << 31)})
	if !errors.Is(err, unix.ERANGE) || !strings.Contains(err.Error(), "defer-hard-irqs") {
		t.Errorf("out of range: %v", err)
	}
	t.Logf("out of range: %v", err)
	_, err = d.QueueStats()
	if !errors.Is(err, nic.ErrNotSupported) {
		t.Errorf("veth QueueStats: %v, want ErrNotSupported", err)
	}
	var db *nic.Device
	if err := p.B.Do(func() (err error) { db, err = nic.Open(p.B.Link); return err }); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.NAPIs(nic.AllNAPIs())
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "no NAPI") {
		t.Errorf("veth without GRO: %v", err)
	}
	t.Logf("no NAPI: %v", err)
	if _, err := nic.Open("nosuchdev0"); err == nil {
		t.Errorf("Open(nosuchdev0): no error")
	} else if !errors.Is(err, nic.ErrNoDevice) || !strings.Contains(err.Error(), `no network interface "nosuchdev0" in this network namespace`) || strings.Contains(err.Error(), "route ip+net") {
		t.Errorf("Open(nosuchdev0): %v, want ErrNoDevice in words", err)
	}
	// An interface of another namespace is not in this one.
	if _, err := nic.Open(p.B.Link); !errors.Is(err, nic.ErrNoDevice) {
		t.Errorf("Open(%s) outside its namespace: %v, want ErrNoDevice", p.B.Link, err)
	}
}

// TestSysfsFallback hides napi-set and sets all NAPIs through the sysfs
// files, in a child process that `ip netns exec` put into A's namespace
// (sysfs shows the namespace of its mount, which ip netns exec makes).
func TestSysfsFallback(t *testing.T) {
	p, d := pair(t, 2)
	before, err := d.NAPIs(nic.AllNAPIs())
	if err != nil {
		t.Fatal(err)
	}
	d0, g0 := sysfs(t, p.A, "napi_defer_hard_irqs"), sysfs(t, p.A, "gro_flush_timeout")
	t.Cleanup(func() {
		run(t, p.A, "sh", "-c", fmt.Sprintf("echo %d > /sys/class/net/%s/napi_defer_hard_irqs; echo %d > /sys/class/net/%s/gro_flush_timeout", d0, p.A.Link, g0, p.A.Link))
	})
	out := helper(t, p.A, "sysfs-fallback", p.A.Link)
	if !strings.Contains(out, "fallback: device-wide sysfs") {
		t.Errorf("helper did not report the fallback: %s", out)
	}
	if v := sysfs(t, p.A, "napi_defer_hard_irqs"); v != 5 {
		t.Errorf("sysfs napi_defer_hard_irqs = %d, want 5", v)
	}
	if v := sysfs(t, p.A, "gro_flush_timeout"); v != 250000 {
		t.Errorf("sysfs gro_flush_timeout = %d, want 250000", v)
	}
	after, err := d.NAPIs(nic.AllNAPIs())
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range after {
		if *n.DeferHardIRQs != 5 || *n.GROFlushTimeout != 250*time.Microsecond {
			t.Errorf("napi %d after sysfs write: %v (before %v)", n.ID, n.NAPISettings, before[i].NAPISettings)
		}
	}
	// The narrower selections have no fallback.
	if !strings.Contains(out, "per NAPI: not supported") {
		t.Errorf("helper: per-NAPI set without napi-set: %s", out)
	}
	// From a thread that only entered the namespace, sysfs would show
	// another one: the fallback refuses.
	nic.HideNAPISet(d)
	_, err = d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{DeferHardIRQs: u32(1)})
	if err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("fallback from a setns thread: %v, want a namespace refusal", err)
	}
}

// helper runs this test binary as TestHelperProcess inside h's namespace.
func helper(t *testing.T, h *netnstest.Host, mode string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := h.Command(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NIC_HELPER="+mode, "NIC_HELPER_ARGS="+strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v: %s", mode, err, out)
	}
	return string(out)
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("NIC_HELPER")
	if mode == "" {
		t.Skip("skipping: helper process for TestSysfsFallback")
	}
	args := strings.Fields(os.Getenv("NIC_HELPER_ARGS"))
	switch mode {
	case "sysfs-fallback":
		d, err := nic.Open(args[0])
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		nic.HideNAPISet(d)
		ch, err := d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{DeferHardIRQs: u32(5), GROFlushTimeout: dur(250 * time.Microsecond)})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("fallback:", ch.Fallback)
		_, err = d.SetNAPI(nic.NAPIByID(ch.Before[0].ID), nic.NAPISettings{DeferHardIRQs: u32(1)})
		if !errors.Is(err, nic.ErrNotSupported) {
			t.Fatalf("per NAPI without napi-set: %v", err)
		}
		fmt.Println("per NAPI: not supported:", err)
	}
}

// TestXDPFeaturesAgainstYNL checks what XDPFeatures says of veth against
// the kernel's own ynl tool (dev-get with the kernel's netdev.yaml).
func TestXDPFeaturesAgainstYNL(t *testing.T) {
	y := netnstest.RequireYNL(t)
	p, d := pair(t, 1)
	f, err := d.XDPFeatures()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := p.A.Command(ctx, "python3", y.Args("netdev", "--do", "dev-get", "--json", fmt.Sprintf(`{"ifindex": %d}`, p.A.Ifindex))...).Output()
	if err != nil {
		t.Fatalf("ynl dev-get: %v", err)
	}
	var dev struct {
		XDPFeatures   []string `json:"xdp-features"`
		XDPRxMetadata []string `json:"xdp-rx-metadata-features"`
		XSKFeatures   []string `json:"xsk-features"`
		ZCMaxSegs     uint32   `json:"xdp-zc-max-segs"`
	}
	if err := json.Unmarshal(out, &dev); err != nil {
		t.Fatalf("ynl dev-get: %v: %s", err, out)
	}
	has := func(l []string, s string) bool { return slices.Contains(l, s) }
	want := nic.XDPFeatures{
		XDP:         f.XDP,
		Native:      has(dev.XDPFeatures, "basic"),
		MultiBuffer: has(dev.XDPFeatures, "rx-sg"),
		ZeroCopy:    has(dev.XDPFeatures, "xsk-zerocopy"),
		ZCMaxSegs:   dev.ZCMaxSegs,
		RXMetadata:  f.RXMetadata,
		RXHash:      has(dev.XDPRxMetadata, "hash"),
		XSK:         f.XSK,
		TXChecksum:  has(dev.XSKFeatures, "tx-checksum"),
		TXTimestamp: has(dev.XSKFeatures, "tx-timestamp"),
	}
	same := func(a, b []string) bool {
		a, b = slices.Clone(a), slices.Clone(b)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	}
	if fmt.Sprint(f) != fmt.Sprint(want) || !same(f.XDP, dev.XDPFeatures) || !same(f.RXMetadata, dev.XDPRxMetadata) || !same(f.XSK, dev.XSKFeatures) {
		t.Errorf("XDPFeatures = %+v; ynl says %s", f, out)
	}
	if !f.Native || f.ZeroCopy {
		t.Errorf("veth: %+v; want native XDP and no zero-copy", f)
	}
}
