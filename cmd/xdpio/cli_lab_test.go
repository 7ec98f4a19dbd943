//go:build lab && linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
	"github.com/xdpio/xdpio/test/lab/labctl"
)

// labCLI runs the xdpio command line in-process and returns stdout,
// stderr and the error main would print (exit status 1, or 2 for a usage
// error).
func labCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	err := runWith(context.Background(), g, args)
	return out.String(), errb.String(), err
}

func labJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, stderr, err := labCLI(t, append([]string{"--json"}, args...)...)
	if err != nil {
		t.Fatalf("xdpio --json %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("xdpio --json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// TestLabCLICoalesceNetdevsim sets each coalescing parameter netdevsim
// stores with `xdpio coalesce set DEV --FLAG N`, one at a time, and
// requires the kernel (COALESCE_GET) to hold exactly that change and
// `xdpio --json coalesce show` to print it, every other key unchanged.
// The TX aggregation and CQE parameters live in kernel_ethtool_coalesce,
// which netdevsim does not keep.
func TestLabCLICoalesceNetdevsim(t *testing.T) {
	name := labctl.Netdevsim(t)
	dev := labctl.OpenNIC(t, name)
	orig, err := dev.Coalesce()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.SetCoalesce(orig) })
	v := uint32(1000)
	for _, p := range coalesceU32Params {
		if strings.HasPrefix(p.flag, "tx-aggr-") {
			continue
		}
		v += 37
		before := labJSON(t, "coalesce", "show", name)
		out, stderr, err := labCLI(t, "coalesce", "set", name, "--"+p.flag, fmt.Sprint(v))
		if err != nil {
			t.Fatalf("xdpio coalesce set --%s %d: %v\n%s", p.flag, v, err, stderr)
		}
		if !strings.Contains(out, p.flag) {
			t.Errorf("coalesce set --%s: output does not show the change:\n%s", p.flag, out)
		}
		h, err := dev.Coalesce()
		if err != nil {
			t.Fatal(err)
		}
		if got := *p.field(&h); got == nil || *got != v {
			t.Errorf("after coalesce set --%s %d the kernel holds %v", p.flag, v, got)
		}
		want := before
		want[p.key] = float64(v)
		if diff := cmp.Diff(want, labJSON(t, "coalesce", "show", name)); diff != "" {
			t.Errorf("coalesce show after --%s %d (-want +got):\n%s", p.flag, v, diff)
		}
	}
	for _, flag := range []string{"adaptive-rx", "adaptive-tx"} {
		for _, on := range []string{"on", "off"} {
			if _, stderr, err := labCLI(t, "coalesce", "set", name, "--"+flag, on); err != nil {
				t.Fatalf("coalesce set --%s %s: %v\n%s", flag, on, err, stderr)
			}
			got := labJSON(t, "coalesce", "show", name)[strings.ReplaceAll(flag, "-", "_")]
			if got != (on == "on") {
				t.Errorf("after --%s %s, show says %v", flag, on, got)
			}
		}
	}
	// virtio-net lacks rx-usecs-irq: refused, exit status 1, named.
	vio := labctl.Virtio(t)
	_, _, err = labCLI(t, "coalesce", "set", vio, "--rx-usecs-irq", "5")
	var ue *usageError
	// The CLI names the setting in the user's words (the flag), not by
	// its netlink attribute.
	if err == nil || errors.As(err, &ue) || !errors.Is(err, nic.ErrNotSupported) ||
		!strings.Contains(err.Error(), "rx-usecs-irq") || strings.Contains(err.Error(), "ETHTOOL_A_") {
		t.Errorf("coalesce set %s --rx-usecs-irq: %v; want a not-supported failure naming rx-usecs-irq, without netlink names", vio, err)
	}
}

// TestLabCLIRingsChannelsNetdevsim drives `xdpio rings` and `xdpio
// channels` against netdevsim: set, show --json, and the kernel's refusal
// of a ring size above a maximum lowered through debugfs (exit status 1
// with the kernel's message).
func TestLabCLIRingsChannelsNetdevsim(t *testing.T) {
	name := labctl.Netdevsim(t)
	dbg := filepath.Join(labctl.NetdevsimDebugfs(t), "ethtool", "ring", "rx_max_pending")
	t.Cleanup(func() {
		labctl.WriteFile(t, dbg, "4096")
		labCLI(t, "channels", "set", name, "--combined", "4")
	})
	if _, stderr, err := labCLI(t, "rings", "set", name, "--rx", "777", "--tx", "555"); err != nil {
		t.Fatalf("rings set: %v\n%s", err, stderr)
	}
	r := labJSON(t, "rings", "show", name)
	if r["rx"] != float64(777) || r["tx"] != float64(555) || r["rx_max"] != float64(4096) {
		t.Errorf("rings show after set rx 777 tx 555: %v", r)
	}
	labctl.WriteFile(t, dbg, "600")
	_, stderr, err := labCLI(t, "rings", "set", name, "--rx", "1024")
	var ue *usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "exceeds maximum") {
		t.Errorf("rings set --rx 1024 over max 600: %v (stderr %q); want the kernel's \"exceeds maximum\"", err, stderr)
	}
	if got := labJSON(t, "rings", "show", name)["rx"]; got != float64(777) {
		t.Errorf("refused rings set changed rx to %v", got)
	}

	for _, n := range []int{2, 3} {
		if _, stderr, err := labCLI(t, "channels", "set", name, "--combined", fmt.Sprint(n)); err != nil {
			t.Fatalf("channels set --combined %d: %v\n%s", n, err, stderr)
		}
		c := labJSON(t, "channels", "show", name)
		if c["combined"] != float64(n) || c["combined_max"] != float64(4) {
			t.Errorf("channels show after --combined %d: %v", n, c)
		}
	}
	if _, _, err := labCLI(t, "channels", "set", name, "--combined", "9"); err == nil || !strings.Contains(err.Error(), "exceeds maximum") {
		t.Errorf("channels set --combined 9 over max 4: %v; want the kernel's \"exceeds maximum\"", err)
	}
}

// TestLabCLIRSSVirtio compares `xdpio --json rss show` with the kernel's
// RSS_GET (Device.RSS) on virtio-net, and drives `xdpio rss set` with an
// equal spread, weights and a key: applied (RSS_SET on 6.17+, the SRSSH
// ioctl before) and read back.
func TestLabCLIRSSVirtio(t *testing.T) {
	name := labctl.Virtio(t)
	dev := labctl.OpenNIC(t, name)
	st, err := dev.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { labctl.Ethtool("-X", name, "hkey", colonHex(st.Key), "default") })
	show := labJSON(t, "rss", "show", name)
	var indir []uint32
	for _, v := range show["indirection_table"].([]any) {
		indir = append(indir, uint32(v.(float64)))
	}
	if diff := cmp.Diff(st.Indir, indir); diff != "" {
		t.Errorf("rss show indirection vs RSS_GET (-kernel +cli):\n%s", diff)
	}
	if show["hash_key"] != colonHex(st.Key) || show["hash_function"] != "toeplitz" {
		t.Errorf("rss show key %v hfunc %v; kernel key %s", show["hash_key"], show["hash_function"], colonHex(st.Key))
	}
	text, _, err := labCLI(t, "rss", "show", name)
	if err != nil || !strings.Contains(text, colonHex(st.Key)) || !strings.Contains(text, "toeplitz: on") {
		t.Errorf("rss show (text): %v\n%s", err, text)
	}
	key := strings.Repeat("a5", 40)
	for _, c := range []struct {
		args []string
		want func(nic.RSS) nic.RSS
	}{
		{[]string{"--equal", "2"}, func(s nic.RSS) nic.RSS { s.Indir, _ = rss.Equal(2, 128); return s }},
		{[]string{"--weights", "1,2,3,2"}, func(s nic.RSS) nic.RSS { s.Indir, _ = rss.Weights(128, 1, 2, 3, 2); return s }},
		{[]string{"--key", key}, func(s nic.RSS) nic.RSS { s.Key, _ = rss.ParseKey(key); return s }},
	} {
		before, err := dev.RSS()
		if err != nil {
			t.Fatal(err)
		}
		_, stderr, err := labCLI(t, append([]string{"rss", "set", name}, c.args...)...)
		after, _ := dev.RSS()
		switch {
		case err != nil:
			t.Errorf("rss set %s: %v\n%s", strings.Join(c.args, " "), err, stderr)
		default:
			if diff := cmp.Diff(c.want(before), after); diff != "" {
				t.Errorf("after rss set %s (-want +got):\n%s", strings.Join(c.args, " "), diff)
			}
		}
	}
}

// TestLabCLIRSSHashVirtio asks `xdpio rss hash --dev` for the RX queue of
// flows on the virtio-net NIC (its key and a weighted table read from the
// device), sends each flow into the NIC from the host, and requires its
// frames on that queue (the kernel's per-queue counters).
func TestLabCLIRSSHashVirtio(t *testing.T) {
	name := labctl.Virtio(t)
	c := labctl.DialTB(t)
	if _, err := labctl.Ethtool("-X", name, "weight", "2", "0", "1", "3"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { labctl.Ethtool("-X", name, "default") })
	ch, err := labctl.OpenNIC(t, name).Channels()
	if err != nil {
		t.Fatal(err)
	}
	nq := int(ch.Combined)
	rng := rand.New(rand.NewPCG(17, 4))
	var flows []labctl.Flow
	for _, v6 := range []bool{false, true} {
		flows = append(flows, labctl.Flows(rng, 8, labctl.ProtoUDP, v6, 9000)...)
		flows = append(flows, labctl.Flows(rng, 8, labctl.ProtoTCP, v6, 9100)...)
	}
	perQueue := make([]int, nq)
	hashesPorts := map[string]bool{}
	for _, f := range flows {
		args := []string{"rss", "hash", "--dev", name, "--src", f.Src.String(), "--dst", f.Dst.String()}
		ports, ok := hashesPorts[f.FlowType()]
		if !ok {
			if ports, err = labctl.HashesPorts(name, f.FlowType()); err != nil {
				t.Fatal(err)
			}
			hashesPorts[f.FlowType()] = ports
		}
		if ports {
			args = append(args, "--sport", fmt.Sprint(f.SPort), "--dport", fmt.Sprint(f.DPort))
		}
		m := labJSON(t, args...)
		qv, ok := m["queue"].(float64)
		if !ok {
			t.Fatalf("xdpio --json %s: no queue in %v", strings.Join(args, " "), m)
		}
		q := int(qv)
		if q == 1 {
			t.Errorf("flow %v: rss hash says queue 1, which the table (weight 2 0 1 3) never selects", f)
		}
		base, err := labctl.QueueRXPackets(name, nq)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send([]labctl.Flow{f}, 2); err != nil {
			t.Fatal(err)
		}
		var cur []uint64
		deadline := time.Now().Add(10 * time.Second)
		for {
			cur, err = labctl.QueueRXPackets(name, nq)
			if err != nil {
				t.Fatal(err)
			}
			var n uint64
			for i := range cur {
				n += cur[i] - base[i]
			}
			if n >= 2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for i := range cur {
			want := uint64(0)
			if i == q {
				want = 2
			}
			if d := cur[i] - base[i]; d != want {
				t.Errorf("flow %v: queue %d received %d frames; xdpio rss hash predicted queue %d (hash %v)", f, i, d, q, m["hash"])
			}
		}
		perQueue[q]++
	}
	t.Logf("%d flows by predicted queue: %v", len(flows), perQueue)
}

// TestLabCLISetReport drives the set commands built on the shared
// show/set scaffolding against devices that have the settings: rings and
// coalesce on netdevsim, rss on virtio-net. With --dry-run the kernel
// holds what it held (read through nic before and after), the --json
// report's before is what `show --json` prints (without "device") and
// its after is that with the one change, and the text names the change
// as before → after. The same set without --dry-run reports as after
// what `show --json` and the kernel then hold.
func TestLabCLISetReport(t *testing.T) {
	nsim, vio := labctl.Netdevsim(t), labctl.Virtio(t)
	nd, vd := labctl.OpenNIC(t, nsim), labctl.OpenNIC(t, vio)
	rings, err := nd.Rings()
	if err != nil {
		t.Fatal(err)
	}
	coal, err := nd.Coalesce()
	if err != nil {
		t.Fatal(err)
	}
	st, err := vd.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nd.SetRings(nic.RingsConfig{RX: &rings.RX, TX: &rings.TX})
		nd.SetCoalesce(coal)
		labctl.Ethtool("-X", vio, "hkey", colonHex(st.Key), "default")
	})
	equal2, _ := rss.Equal(2, len(st.Indir))
	var equal2JSON []any
	for _, q := range equal2 {
		equal2JSON = append(equal2JSON, float64(q))
	}
	for _, c := range []struct {
		cmd, dev string
		args     []string
		key      string // the --json key that changes
		want     any    // to this
		text     string // the text report's name of the parameter
		kernel   func() (any, error)
	}{
		{"rings", nsim, []string{"--rx", "901"}, "rx", float64(901), "rx", func() (any, error) { return nd.Rings() }},
		{"coalesce", nsim, []string{"--rx-usecs", "77"}, "rx_usecs", float64(77), "rx-usecs", func() (any, error) { return nd.Coalesce() }},
		{"rss", vio, []string{"--equal", "2"}, "indirection_table", equal2JSON, "indirection-table", func() (any, error) { return vd.RSS() }},
	} {
		set := append([]string{c.cmd, "set", c.dev}, c.args...)
		kBefore, err := c.kernel()
		if err != nil {
			t.Fatal(err)
		}
		show := labJSON(t, c.cmd, "show", c.dev)
		delete(show, "device")
		if show[c.key] == nil || cmp.Equal(show[c.key], c.want) {
			t.Fatalf("%s show %s: %s is %v before the test: pick another value", c.cmd, c.dev, c.key, show[c.key])
		}
		dry := labJSON(t, append(set, "--dry-run")...)
		want := map[string]any{}
		for k, v := range show {
			want[k] = v
		}
		want[c.key] = c.want
		if diff := cmp.Diff(map[string]any{"device": c.dev, "dry_run": true, "before": show, "after": want}, dry); diff != "" {
			t.Errorf("xdpio --json %s --dry-run (-want +got):\n%s", strings.Join(set, " "), diff)
		}
		text, stderr, err := labCLI(t, append(set, "--dry-run")...)
		if err != nil || !strings.HasPrefix(text, c.dev+" "+c.cmd+" (dry run, nothing sent): "+c.text+" ") || !strings.Contains(text, " → ") {
			t.Errorf("xdpio %s --dry-run: %v\n%s%s", strings.Join(set, " "), err, text, stderr)
		}
		if kAfter, err := c.kernel(); err != nil || !cmp.Equal(kBefore, kAfter) {
			t.Errorf("%s --dry-run changed the device (%v): %s", strings.Join(set, " "), err, cmp.Diff(kBefore, kAfter))
		}
		got := labJSON(t, set...)
		now := labJSON(t, c.cmd, "show", c.dev)
		delete(now, "device")
		if diff := cmp.Diff(map[string]any{"device": c.dev, "dry_run": false, "before": show, "after": now}, got); diff != "" {
			t.Errorf("xdpio --json %s (-want +got):\n%s", strings.Join(set, " "), diff)
		}
		if !cmp.Equal(now[c.key], c.want) {
			t.Errorf("after %s, show says %s %v", strings.Join(set, " "), c.key, now[c.key])
		}
	}
}
