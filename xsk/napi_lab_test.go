//go:build lab && linux

package xsk_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/test/lab/labctl"
	"github.com/xdpio/xdpio/xsk"
)

// NAPI batching on the lab's virtio-net (issue #16). On the newer guest the
// driver links each RX queue to its NAPI and the kernel has napi-set; on
// 6.12 neither, and nic falls back to the device-wide sysfs files.

func sysfsNAPI(t *testing.T, name string) (uint64, time.Duration) {
	t.Helper()
	read := func(f string) uint64 {
		b, err := os.ReadFile("/sys/class/net/" + name + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return v
	}
	return read("napi_defer_hard_irqs"), time.Duration(read("gro_flush_timeout"))
}

func u32p(v uint32) *uint32               { return &v }
func durp(v time.Duration) *time.Duration { return &v }
func napiOf(t *testing.T, d *nic.Device, q int) nic.NAPI {
	t.Helper()
	ns, err := d.NAPIs(nic.NAPIOfQueue(q))
	if err != nil || len(ns) != 1 {
		t.Fatalf("NAPI of RX queue %d: %v, %v", q, ns, err)
	}
	return ns[0]
}

// TestLabNAPIVirtio sets NAPI batching per queue where the kernel can, and
// checks it against the kernel's own sysfs files; on 6.12 it checks the
// device-wide fallback.
func TestLabNAPIVirtio(t *testing.T) {
	name := labctl.Virtio(t)
	d, err := nic.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	qs, err := d.Queues()
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, q := range qs {
		if q.Type == nic.RX && q.NAPIID != 0 {
			linked++
		}
	}
	t.Logf("%s: %d of %d RX queues linked to a NAPI", name, linked, len(qs)/2)
	if linked == 0 {
		// 6.12: no per-queue link, no napi-set. A per-queue request is
		// refused naming what is missing; all NAPIs go through sysfs.
		_, err := d.SetNAPI(nic.NAPIOfQueue(1), nic.NAPISettings{DeferHardIRQs: u32p(2)})
		if err == nil {
			t.Fatal("per-queue NAPI set succeeded on a driver that links no queue to a NAPI")
		}
		t.Logf("per-queue set refused: %v", err)
		ch, err := d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{DeferHardIRQs: u32p(2), GROFlushTimeout: durp(200 * time.Microsecond)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{DeferHardIRQs: u32p(0), GROFlushTimeout: durp(0)})
		if ch.Fallback == "" {
			t.Errorf("set on a kernel without napi-set reported no fallback")
		}
		if n, g := sysfsNAPI(t, name); n != 2 || g != 200*time.Microsecond {
			t.Errorf("sysfs after the fallback: defer %d, flush %v; want 2, 200µs", n, g)
		}
		t.Logf("fallback: %s", ch.Fallback)
		if _, err := d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{IRQSuspendTimeout: durp(time.Millisecond)}); !errors.Is(err, nic.ErrNotSupported) {
			t.Errorf("irq-suspend-timeout without napi-set: %v; want ErrNotSupported", err)
		}
		return
	}
	if linked != len(qs)/2 {
		t.Errorf("only %d RX queues linked to NAPIs", linked)
	}

	// Per queue: queue 1's NAPI changes, the others do not.
	base := napiOf(t, d, 0)
	ch, err := d.SetNAPI(nic.NAPIOfQueue(1), nic.NAPISettings{DeferHardIRQs: u32p(2), GROFlushTimeout: durp(200 * time.Microsecond), IRQSuspendTimeout: durp(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Fallback != "" {
		t.Errorf("napi-set kernel used a fallback: %s", ch.Fallback)
	}
	got := napiOf(t, d, 1)
	if *got.DeferHardIRQs != 2 || *got.GROFlushTimeout != 200*time.Microsecond || got.IRQSuspendTimeout == nil || *got.IRQSuspendTimeout != 20*time.Millisecond {
		t.Errorf("queue 1 after set: %v", got.NAPISettings)
	}
	if other := napiOf(t, d, 0); other.NAPISettings.String() != base.NAPISettings.String() {
		t.Errorf("queue 0 changed with queue 1: %v → %v", base.NAPISettings, other.NAPISettings)
	}
	// The kernel's own device-wide files write every NAPI's config: a
	// write there must show in each NAPI over netlink.
	labctl.WriteFile(t, "/sys/class/net/"+name+"/napi_defer_hard_irqs", "3")
	labctl.WriteFile(t, "/sys/class/net/"+name+"/gro_flush_timeout", "30000")
	for q := 0; q < linked; q++ {
		n := napiOf(t, d, q)
		if *n.DeferHardIRQs != 3 || *n.GROFlushTimeout != 30*time.Microsecond {
			t.Errorf("queue %d after the sysfs write: %v; want defer 3, flush 30µs", q, n.NAPISettings)
		}
	}
	labctl.WriteFile(t, "/sys/class/net/"+name+"/napi_defer_hard_irqs", "0")
	labctl.WriteFile(t, "/sys/class/net/"+name+"/gro_flush_timeout", "0")
	d.SetNAPI(nic.AllNAPIs(), nic.NAPISettings{IRQSuspendTimeout: durp(0)})
	// Out of range: the kernel's extack, one line.
	if _, err := d.SetNAPI(nic.NAPIOfQueue(0), nic.NAPISettings{GROFlushTimeout: durp(-time.Second)}); err == nil {
		t.Errorf("negative gro-flush-timeout accepted")
	} else {
		t.Logf("negative gro-flush-timeout: %v", err)
	}
	if _, err := d.SetNAPI(nic.NAPIOfQueue(9), nic.NAPISettings{DeferHardIRQs: u32p(1)}); err == nil {
		t.Errorf("RX queue 9 of a 4-queue device accepted")
	} else {
		t.Logf("queue 9: %v", err)
	}
}

// TestLabNAPIDeferralXSK: xsk.Config.NAPIDeferral sets the NAPIs of the
// bound queues only and restores them on Close, and after a SIGKILL the
// next Open restores them.
func TestLabNAPIDeferralXSK(t *testing.T) {
	name := labctl.Virtio(t)
	nd, err := nic.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	if qs, err := nd.Queues(); err != nil || len(qs) == 0 || qs[0].NAPIID == 0 {
		cfg := zcConfig(xsk.BindAuto)
		cfg.NAPIDeferral = &xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}
		_, err := xsk.Open(name, cfg)
		if !errors.Is(err, xsk.ErrNotSupported) {
			t.Fatalf("NAPIDeferral on a driver without queue NAPIs: %v; want ErrNotSupported", err)
		}
		netnstest.SkipIfNotSupported(t, fmt.Errorf("%s links no queue to a NAPI on this kernel; NAPIDeferral refused as it should: %w", name, err))
	}
	cfg := zcConfig(xsk.BindAuto)
	cfg.Queues = []int{0, 1}
	cfg.NAPIDeferral = &xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}
	d, err := xsk.Open(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ids := d.NAPIDeferred(); len(ids) != 2 {
		t.Errorf("NAPIDeferred() = %v; want the NAPIs of queues 0 and 1", ids)
	}
	for q := 0; q < 4; q++ {
		n := napiOf(t, nd, q)
		want := uint32(0)
		if q < 2 {
			want = 2
		}
		if *n.DeferHardIRQs != want {
			t.Errorf("queue %d while open: %v; want defer %d", q, n.NAPISettings, want)
		}
	}
	d.Close()
	for q := 0; q < 4; q++ {
		if n := napiOf(t, nd, q); *n.DeferHardIRQs != 0 || *n.GROFlushTimeout != 0 {
			t.Errorf("queue %d after Close: %v; want the originals (0, 0)", q, n.NAPISettings)
		}
	}

	// SIGKILL the holder: the kernel keeps its settings, the record in
	// /run/xdpio says what to put back, and the next Open does.
	cmd := holdSockets(t, nil, "XDPIO_HELPER_IFACE="+name, "XDPIO_HELPER_NAPI=1")
	if n := napiOf(t, nd, 0); *n.DeferHardIRQs != 7 {
		t.Fatalf("the helper's deferral is not in place: %v", n.NAPISettings)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if n := napiOf(t, nd, 0); *n.DeferHardIRQs != 7 {
		t.Fatalf("after SIGKILL the kernel's settings changed by themselves: %v", n.NAPISettings)
	}
	d2, err := xsk.Open(name, zcConfig(xsk.BindAuto))
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	for q := 0; q < 4; q++ {
		if n := napiOf(t, nd, q); *n.DeferHardIRQs != 0 || *n.GROFlushTimeout != 0 {
			t.Errorf("queue %d after the next Open: %v; want the originals back", q, n.NAPISettings)
		}
	}
}

// TestLabQueuesStats: per-queue counters from netdev qstats against the
// driver's own ethtool -S counters for the same frames.
func TestLabQueuesStats(t *testing.T) {
	name := labctl.Virtio(t)
	c := labctl.DialTB(t)
	nd, err := nic.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	before, err := nd.QueueStats()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := labctl.Stats(name)
	if err != nil {
		t.Fatal(err)
	}
	flows := labFlows(30, 256)
	if err := c.Send(flows, 2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	after, err := nd.QueueStats()
	if err != nil {
		t.Fatal(err)
	}
	ea, err := labctl.Stats(name)
	if err != nil {
		t.Fatal(err)
	}
	delta := after.Delta(before)
	var total uint64
	for _, q := range delta.Queues {
		if q.Type != nic.RX {
			continue
		}
		total += q.Counters["rx-packets"]
		t.Logf("rx queue %d: qstats %v", q.Queue, q.Counters)
	}
	for k, v := range ea {
		if d := v - eb[k]; d != 0 {
			t.Logf("ethtool -S %s: +%d", k, d)
		}
	}
	if total != uint64(len(flows)*2) {
		t.Errorf("qstats rx-packets over the RX queues: +%d; the host sent %d", total, len(flows)*2)
	}
	// Where the driver keeps a per-queue counter in ethtool -S that
	// qstats also reports, they agree.
	for _, q := range delta.Queues {
		if q.Type != nic.RX {
			continue
		}
		for _, pair := range [][2]string{{"rx%d_drops", "rx-drops"}, {"rx%d_packets", "rx-packets"}, {"rx%d_kicks", "rx-kicks"}} {
			ek := strings.Replace(pair[0], "%d", strconv.Itoa(q.Queue), 1)
			ev, ok := ea[ek]
			qv, qok := q.Counters[pair[1]]
			if ok && qok && ev-eb[ek] != qv {
				t.Errorf("rx queue %d: ethtool %s +%d, qstats %s +%d", q.Queue, ek, ev-eb[ek], pair[1], qv)
			}
		}
	}
}
