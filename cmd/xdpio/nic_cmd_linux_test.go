//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/nsdo"
)

// napiPair: a veth pair with GRO on at A, which gives A's RX queues NAPI
// instances (B has none).
func napiPair(t *testing.T, queues int) *netnstest.Pair {
	t.Helper()
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: queues})
	hostOut(t, p.A, "ethtool", "-K", p.A.Link, "gro", "on")
	return p
}

// oneLine checks that a failing command gave exit status want and a
// one-line error containing each of subs.
func oneLine(t *testing.T, code, want int, err error, subs ...string) {
	t.Helper()
	if code != want || err == nil {
		t.Fatalf("exit %d (%v), want %d", code, err, want)
	}
	msg := err.Error()
	if want == 1 && strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q lacks %q", msg, s)
		}
	}
	t.Logf("exit %d: %s", code, strings.SplitN(msg, "\n", 2)[0])
}

func TestCLIQueuesAndNAPI(t *testing.T) {
	y := netnstest.RequireYNL(t)
	p := napiPair(t, 2)
	ns, dev := p.A.NS, p.A.Link

	out, code, err := cli(t, "--netns", ns, "queues", "show", dev)
	if code != 0 {
		t.Fatalf("queues show: %v", err)
	}
	for _, want := range []string{"rx 0", "rx 1", "tx 0", "tx 1", "AF_XDP zero-copy: no", "XDP basic redirect"} {
		if !strings.Contains(out, want) {
			t.Errorf("queues show lacks %q:\n%s", want, out)
		}
	}
	out, code, err = cli(t, "--netns", ns, "--json", "queues", "show", dev)
	var qj struct {
		Queues []struct {
			Type   string `json:"type"`
			ID     int    `json:"id"`
			NAPIID *int   `json:"napi_id"`
			AFXDP  bool   `json:"af_xdp"`
		} `json:"queues"`
		XDP      []string `json:"xdp_features"`
		ZeroCopy *bool    `json:"zero_copy"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &qj) != nil || len(qj.Queues) != 4 {
		t.Fatalf("queues show --json: %v\n%s", err, out)
	}
	if qj.ZeroCopy == nil || *qj.ZeroCopy || !slices.Contains(qj.XDP, "redirect") {
		t.Errorf("queues show --json on veth: zero_copy %v, xdp_features %v; want false and redirect", qj.ZeroCopy, qj.XDP)
	}

	out, code, err = cli(t, "--netns", ns, "--json", "napi", "show", dev)
	var nj struct {
		NAPIs []struct {
			ID    uint32  `json:"id"`
			Defer *uint32 `json:"defer_hard_irqs"`
			GRO   *int64  `json:"gro_flush_timeout_ns"`
		} `json:"napis"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &nj) != nil || len(nj.NAPIs) != 2 {
		t.Fatalf("napi show --json: %v\n%s", err, out)
	}
	id := nj.NAPIs[1].ID
	d0, g0 := *nj.NAPIs[1].Defer, time.Duration(*nj.NAPIs[1].GRO)
	t.Cleanup(func() {
		cli(t, "--netns", ns, "napi", "set", dev, "--napi", fmt.Sprint(id), "--defer-hard-irqs", fmt.Sprint(d0), "--gro-flush-timeout", fmt.Sprint(int64(g0)))
	})

	out, code, err = cli(t, "--netns", ns, "napi", "set", dev, "--napi", fmt.Sprint(id), "--defer-hard-irqs", "3", "--gro-flush-timeout", "50us")
	if code != 0 {
		t.Fatalf("napi set: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("defer-hard-irqs %d → 3", d0), fmt.Sprintf("gro-flush-timeout %v → 50µs", g0)} {
		if !strings.Contains(out, want) {
			t.Errorf("napi set output lacks %q:\n%s", want, out)
		}
	}
	// Oracle: the kernel's ynl (its 6.12 spec prints the newer napi
	// attributes raw: 5 defer-hard-irqs, 6 gro-flush-timeout).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := p.A.Command(ctx, "python3", y.Args("netdev", "--do", "napi-get", "--json", fmt.Sprintf(`{"id": %d}`, id))...).Output()
	if err != nil {
		t.Fatalf("ynl: %v", err)
	}
	var o map[string]any
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("ynl: %v: %s", err, raw)
	}
	if v := fmt.Sprint(o["defer-hard-irqs"], o["UnknownAttr(5)"]); !strings.Contains(v, "3") && !strings.Contains(v, "03000000") {
		t.Errorf("ynl defer-hard-irqs after set: %v", o)
	}
	if v := fmt.Sprint(o["gro-flush-timeout"], o["UnknownAttr(6)"]); !strings.Contains(v, "50000") && !strings.Contains(v, "50c3000000000000") && !strings.Contains(v, "50c30000") {
		t.Errorf("ynl gro-flush-timeout after set: %v", o)
	}
	// The other NAPI is untouched; the set reported it with show --napi.
	out, _, _ = cli(t, "--netns", ns, "napi", "show", dev, "--napi", fmt.Sprint(nj.NAPIs[0].ID))
	if !strings.Contains(out, fmt.Sprintf("defer-hard-irqs %d,", *nj.NAPIs[0].Defer)) {
		t.Errorf("other NAPI changed: %s", out)
	}

	// All NAPIs at once, JSON before/after.
	out, code, err = cli(t, "--netns", ns, "--json", "napi", "set", dev, "--irq-suspend-timeout", "1ms")
	if code != 0 || strings.Count(out, `"irq_suspend_timeout_ns": 1000000`) != 2 {
		t.Errorf("napi set (all) --json: %v\n%s", err, out)
	}
	cli(t, "--netns", ns, "napi", "set", dev, "--irq-suspend-timeout", "0")
}

func TestCLINAPIBadInput(t *testing.T) {
	p := napiPair(t, 1)
	ns, dev := p.A.NS, p.A.Link
	_, code, err := cli(t, "--netns", ns, "napi", "show", dev, "--napi", "2147483000")
	oneLine(t, code, 1, err, "no NAPI 2147483000")
	_, code, err = cli(t, "--netns", ns, "napi", "show", dev, "--queue", "5")
	oneLine(t, code, 1, err, "no RX queue 5")
	_, code, err = cli(t, "--netns", ns, "napi", "set", dev, "--queue", "0", "--defer-hard-irqs", "1")
	oneLine(t, code, 1, err, "RX queue 0 has no NAPI instance")
	_, code, err = cli(t, "--netns", ns, "napi", "set", dev, "--defer-hard-irqs", "4294967295")
	oneLine(t, code, 1, err, "integer out of range", "defer-hard-irqs")
	_, code, err = cli(t, "--netns", p.B.NS, "napi", "show", p.B.Link)
	oneLine(t, code, 1, err, "has no NAPI instance", "GRO")
	// veth has no qstats: stats shows its ethtool -S counters and says
	// so (stats_linux_test.go checks them against ethtool -S).
	out, code, err := cli(t, "--netns", ns, "stats", dev)
	if code != 0 || !strings.HasPrefix(out, dev+": source: ethtool -S (driver strings); the driver keeps no netdev qstats\n") {
		t.Errorf("stats on veth: %v\n%s", err, out)
	}
	_, code, err = cli(t, "--netns", ns, "rss", "show", dev)
	oneLine(t, code, 1, err, "not supported by the driver", "`xdpio rss hash`")
	_, code, err = cli(t, "--netns", ns, "queues", "show", "nosuchdev0")
	oneLine(t, code, 1, err, "nosuchdev0")
	oneLine(t, code, 1, err, `no network interface "nosuchdev0" in network namespace "`+ns+`" (see ip -n `+ns+" link)")
	for _, args := range [][]string{{"napi", "reset", dev}, {"coalesce", "show", dev}} {
		// dev is in ns, not in this namespace.
		_, code, err = cli(t, args...)
		oneLine(t, code, 1, err, `no network interface "`+dev+`" in this network namespace (see ip link; --netns NS runs the command in another)`)
	}

	_, code, err = cli(t, "--netns", ns, "napi", "set", dev)
	oneLine(t, code, 2, err, "at least one")
	_, code, err = cli(t, "--netns", ns, "napi", "set", dev, "--gro-flush-timeout", "-5us")
	oneLine(t, code, 2, err, "negative")
	_, code, err = cli(t, "--netns", ns, "napi", "show", dev, "--queue", "0", "--napi", "1")
	oneLine(t, code, 2, err, "not both")
	_, code, err = cli(t, "--netns", ns, "stats", dev, "--count", "3")
	oneLine(t, code, 2, err, "--count needs --watch")
	_, code, err = cli(t, "--netns", ns, "napi", "show")
	oneLine(t, code, 2, err)
}

// TestCLINAPIReset: a helper process applies deferral (as xsk's
// NAPIDeferral does) and is SIGKILLed; `xdpio napi reset` puts the
// originals back.
func TestCLINAPIReset(t *testing.T) {
	p := napiPair(t, 2)
	ns, dev := p.A.NS, p.A.Link
	out, code, err := cli(t, "--netns", ns, "napi", "reset", dev)
	if code != 0 || !strings.Contains(out, "nothing to restore") {
		t.Fatalf("reset without record: %v %s", err, out)
	}
	var c *netdev.Client
	if err := p.A.Do(func() (err error) { c, err = netdev.Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	napis, err := c.NAPIs(p.A.Ifindex)
	if err != nil || len(napis) != 2 {
		t.Fatalf("NAPIs: %v %v", napis, err)
	}
	t.Cleanup(func() { napictl.RestoreStale(c, "", dev, p.A.Ifindex) })
	cmd := netnstest.StartHelper(t, "TestHelperCLINAPIHolder", "applied", fmt.Sprintf("XDPIO_NAPI_HELPER=%s %s %d %d", ns, dev, napis[0].ID, napis[1].ID))
	cmd.Process.Kill() // a crash: the deferral stays, recorded
	cmd.Wait()
	if n, err := c.NAPI(napis[0].ID); err != nil || *n.DeferHardIRQs != 4 {
		t.Fatalf("helper's deferral not in place: %v", err)
	}
	out, code, err = cli(t, "--netns", ns, "napi", "reset", dev)
	if code != 0 || strings.Count(out, "restored defer-hard-irqs 4 → ") != 2 {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, n := range napis {
		got, err := c.NAPI(n.ID)
		if err != nil || *got.DeferHardIRQs != *n.DeferHardIRQs || *got.GROFlushTimeout != *n.GROFlushTimeout {
			t.Errorf("napi %d after reset: %v %v", n.ID, got.NAPIConfig, err)
		}
	}
}

func TestHelperCLINAPIHolder(t *testing.T) {
	f := netnstest.HelperArgs(t, "XDPIO_NAPI_HELPER")
	var ids []uint32
	for _, s := range f[2:] {
		v, _ := strconv.ParseUint(s, 10, 32)
		ids = append(ids, uint32(v))
	}
	err := nsdo.DoNamed(f[0], func() error {
		ifi, err := net.InterfaceByName(f[1])
		if err != nil {
			return err
		}
		c, err := netdev.Dial()
		if err != nil {
			return err
		}
		_, err = napictl.Apply(c, napictl.Request{Ifname: f[1], Ifindex: ifi.Index, NAPIs: ids,
			Settings: napictl.Settings{DeferHardIRQs: 4, GROFlushTimeout: 80 * time.Microsecond}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("applied")
	time.Sleep(20 * time.Second)
}

// TestCLIStatsWatch reads per-queue counters of a host device that keeps
// them (read-only; veth keeps none, and this host's virtio-net eth0 does).
func TestCLIStatsWatch(t *testing.T) {
	netnstest.RequirePriv(t)
	c, err := netdev.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	devs, err := c.Devs()
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, d := range devs {
		if _, err := c.QStats(d.Ifindex); err == nil {
			if ifi, err := net.InterfaceByIndex(d.Ifindex); err == nil {
				name = ifi.Name
				break
			}
		}
	}
	if name == "" {
		netnstest.SkipIfMachineLacks(t, "every device", "keeps no per-queue statistics (netdev qstats)")
	}
	out, code, err := cli(t, "stats", name)
	if code != 0 || !strings.Contains(out, "total") || !strings.Contains(out, "rx 0") || !strings.HasPrefix(out, name+": source: netdev qstats\n") {
		t.Fatalf("stats %s: %v\n%s", name, err, out)
	}
	out, code, err = cli(t, "--json", "stats", name, "--watch", "100ms", "--count", "2")
	if code != 0 {
		t.Fatalf("stats --watch: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("stats --watch --count 2 --json: %d lines, want 2 intervals and a total:\n%s", len(lines), out)
	}
	var last struct {
		Total    map[string]uint64  `json:"total"`
		Rates    map[string]float64 `json:"rates"`
		Interval float64            `json:"interval_s"`
		Source   string             `json:"source"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &last); err != nil || last.Total == nil || last.Interval < 0.15 || last.Source != "netdev qstats" {
		t.Errorf("final total: %v %+v", err, last)
	}
	var sum uint64
	for _, l := range lines[:2] {
		var iv struct {
			Queues []struct {
				Counters map[string]uint64 `json:"counters"`
			} `json:"queues"`
		}
		if err := json.Unmarshal([]byte(l), &iv); err != nil {
			t.Fatal(err)
		}
		for _, q := range iv.Queues {
			sum += q.Counters["rx-packets"]
		}
	}
	if sum != last.Total["rx-packets"] {
		t.Errorf("intervals add up to %d rx-packets, total says %d", sum, last.Total["rx-packets"])
	}
	out, code, err = cli(t, "stats", name, "--queue", "0", "--watch", "50ms", "--count", "1")
	if code != 0 || !strings.Contains(out, "rx-packets/s") || !strings.Contains(out, "total over") {
		t.Errorf("stats --queue 0 --watch: %v\n%s", err, out)
	}
	_, code, err = cli(t, "stats", name, "--queue", "999")
	oneLine(t, code, 1, err, "no queue 999")
}
