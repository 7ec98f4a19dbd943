//go:build lab && linux

package nic_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
	"github.com/xdpio/xdpio/test/lab/labctl"
	"github.com/xdpio/xdpio/xsk"
)

// TestLabRingsNetdevsim sets ring sizes within netdevsim's maximums, then
// lowers the RX maximum through debugfs and requires the kernel's
// "exceeds maximum" refusal with the device unchanged. Oracles: the
// kernel's RINGS_GET, its extack text, and the real ethtool -g.
func TestLabRingsNetdevsim(t *testing.T) {
	name := labctl.Netdevsim(t)
	dbg := filepath.Join(labctl.NetdevsimDebugfs(t), "ethtool", "ring", "rx_max_pending")
	dev := labctl.OpenNIC(t, name)
	orig, err := dev.Rings()
	if err != nil {
		t.Fatalf("Rings: %v", err)
	}
	if orig.RXMax != 4096 || orig.TXMax != 4096 {
		t.Fatalf("netdevsim maximums rx %d tx %d, want 4096", orig.RXMax, orig.TXMax)
	}
	t.Cleanup(func() {
		labctl.WriteFile(t, dbg, "4096")
		dev.SetRings(nic.RingsConfig{RX: &orig.RX, TX: &orig.TX})
	})
	for _, sz := range [][2]uint32{{1024, 512}, {4096, 4096}, {1, 1}, {333, 2047}} {
		if err := dev.SetRings(nic.RingsConfig{RX: u32(sz[0]), TX: u32(sz[1])}); err != nil {
			t.Fatalf("SetRings rx %d tx %d: %v", sz[0], sz[1], err)
		}
		got, err := dev.Rings()
		if err != nil {
			t.Fatal(err)
		}
		if got.RX != sz[0] || got.TX != sz[1] {
			t.Errorf("after SetRings rx %d tx %d: Rings reads rx %d tx %d", sz[0], sz[1], got.RX, got.TX)
		}
		out, err := labctl.Ethtool("-g", name)
		if err != nil {
			t.Fatal(err)
		}
		cur := out[strings.Index(out, "Current hardware settings"):]
		if !strings.Contains(cur, fmt.Sprintf("RX:\t\t%d\n", sz[0])) || !strings.Contains(cur, fmt.Sprintf("TX:\t\t%d\n", sz[1])) {
			t.Errorf("ethtool -g disagrees with rx %d tx %d:\n%s", sz[0], sz[1], out)
		}
	}
	labctl.WriteFile(t, dbg, "512")
	before, _ := dev.Rings()
	if before.RXMax != 512 {
		t.Fatalf("after lowering rx_max_pending in debugfs, Rings reads RXMax %d, want 512", before.RXMax)
	}
	err = dev.SetRings(nic.RingsConfig{RX: u32(1024)})
	t.Logf("SetRings rx 1024 over max 512: %v", err)
	var de *nic.RequestError
	switch {
	case err == nil:
		t.Fatal("SetRings above the maximum succeeded")
	case !errors.As(err, &de):
		t.Errorf("error %T is not a *nic.RequestError", err)
	case !strings.Contains(de.Message, "exceeds maximum"):
		t.Errorf("kernel message %q does not say \"exceeds maximum\"", de.Message)
	}
	if after, _ := dev.Rings(); after != before {
		t.Errorf("refused SetRings changed the rings: %+v -> %+v", before, after)
	}
	if err := dev.SetRings(nic.RingsConfig{RX: u32(512)}); err != nil {
		t.Errorf("SetRings at the lowered maximum: %v", err)
	}
}

func sysQueues(t *testing.T, dev, kind string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("/sys/class/net", dev, "queues", kind+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestLabChannelsNetdevsim sets netdevsim's combined channel count and
// reads it back, checked against the kernel's real queue count in sysfs;
// then binds an AF_XDP socket (generic mode) to queue 3 and requires the
// kernel to refuse shrinking below it, with its message.
func TestLabChannelsNetdevsim(t *testing.T) {
	name := labctl.Netdevsim(t)
	dev := labctl.OpenNIC(t, name)
	orig, err := dev.Channels()
	if err != nil {
		t.Fatalf("Channels: %v", err)
	}
	if orig.CombinedMax != 4 || orig.RXMax != 0 || orig.TXMax != 0 {
		t.Fatalf("netdevsim channels %+v: want combined max 4 and no RX/TX-only channels", orig)
	}
	t.Cleanup(func() { dev.SetChannels(nic.ChannelsConfig{Combined: &orig.Combined}) })
	for _, n := range []uint32{1, 3, 2, 4} {
		if err := dev.SetChannels(nic.ChannelsConfig{Combined: u32(n)}); err != nil {
			t.Fatalf("SetChannels combined %d: %v", n, err)
		}
		got, err := dev.Channels()
		if err != nil {
			t.Fatal(err)
		}
		if got.Combined != n || sysQueues(t, name, "rx") != int(n) || sysQueues(t, name, "tx") != int(n) {
			t.Errorf("after combined %d: Channels %d, sysfs rx %d tx %d queues", n, got.Combined, sysQueues(t, name, "rx"), sysQueues(t, name, "tx"))
		}
	}
	err = dev.SetChannels(nic.ChannelsConfig{Combined: u32(5)})
	t.Logf("combined 5 over max 4: %v", err)
	if err == nil {
		t.Errorf("SetChannels above the maximum succeeded")
	}

	d, err := xsk.Open(name, xsk.Config{Queues: []int{3},
		Program: xsk.ProgramConfig{Attach: xsk.AttachGeneric},
		Socket:  xsk.SocketConfig{Bind: xsk.BindCopy}})
	if err != nil {
		t.Fatalf("xsk.Open %s queue 3 (generic): %v", name, err)
	}
	err = dev.SetChannels(nic.ChannelsConfig{Combined: u32(2)})
	t.Logf("combined 2 with an AF_XDP socket on queue 3: %v", err)
	var de *nic.RequestError
	if err == nil {
		t.Errorf("shrinking below an AF_XDP socket's queue succeeded")
	} else if !errors.As(err, &de) || !strings.Contains(de.Message, "too low for existing") || !strings.Contains(de.Message, "AF_XDP") {
		t.Errorf("refusal %v: want the kernel's \"requested channel counts are too low for existing … AF_XDP sockets\"", err)
	}
	if got, _ := dev.Channels(); got.Combined != 4 {
		t.Errorf("refused SetChannels changed combined to %d", got.Combined)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel releases the socket's buffer pool from a work queue after
	// the last reference goes: allow it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = dev.SetChannels(nic.ChannelsConfig{Combined: u32(2)})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("shrinking after the socket closed: %v", err)
	}
}

// labSetTable sets an RSS configuration with Device.SetRSS (RSS_SET, or
// on kernels before 6.17 the ETHTOOL_SRSSH ioctl) and checks with the real
// `ethtool -x` that the device took the table and key it was given.
func labSetTable(t *testing.T, dev string, cfg nic.RSSConfig) {
	t.Helper()
	if err := labctl.OpenNIC(t, dev).SetRSS(cfg); err != nil {
		t.Fatalf("SetRSS: %v", err)
	}
	indir, key := ethtoolX(t, dev)
	if cfg.Indir != nil && !slices.Equal(indir, cfg.Indir) {
		t.Fatalf("after SetTable, ethtool -x shows table %v, want %v", indir, cfg.Indir)
	}
	if cfg.Key != nil && !bytes.Equal(key, cfg.Key) {
		t.Fatalf("after SetTable, ethtool -x shows key %x, want %x", key, cfg.Key)
	}
}

// ethtoolX parses the real `ethtool -x DEV`: the indirection table and
// the key.
func ethtoolX(t *testing.T, dev string) ([]uint32, []byte) {
	t.Helper()
	out, err := labctl.Ethtool("-x", dev)
	if err != nil {
		t.Fatal(err)
	}
	var indir []uint32
	var key []byte
	lines := strings.Split(out, "\n")
	inTable := true
	for i, l := range lines {
		if strings.HasPrefix(l, "RSS hash key:") {
			inTable = false
		}
		if head, rest, ok := strings.Cut(l, ":"); inTable && ok && strings.TrimSpace(head) != "" && strings.Trim(strings.TrimSpace(head), "0123456789") == "" {
			for _, f := range strings.Fields(rest) {
				var q uint32
				fmt.Sscan(f, &q)
				indir = append(indir, q)
			}
		}
		if strings.HasPrefix(l, "RSS hash key:") && i+1 < len(lines) {
			key, _ = hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(lines[i+1]), ":", ""))
		}
	}
	return indir, key
}

// TestLabRSSTableVirtio reads virtio-net's RSS configuration with Table and
// compares it with the real ethtool -x; sets equal spreads, weights and a
// key (SetTable, or ethtool -X where the kernel lacks RSS_SET) and reads
// each back.
func TestLabRSSTableVirtio(t *testing.T) {
	name := labctl.Virtio(t)
	dev := labctl.OpenNIC(t, name)
	st, err := dev.RSS()
	if err != nil {
		t.Fatalf("Table: %v", err)
	}
	orig := st
	t.Cleanup(func() {
		labctl.Ethtool("-X", name, "hkey", hexColon(orig.Key), "default")
	})
	if len(st.Indir) != 128 || len(st.Key) != 40 || st.HFunc != "toeplitz" {
		t.Fatalf("virtio-net RSS: %d entries, %d-byte key, hfunc %q; want 128, 40, toeplitz", len(st.Indir), len(st.Key), st.HFunc)
	}
	indir, key := ethtoolX(t, name)
	if diff := cmp.Diff(indir, st.Indir); diff != "" {
		t.Errorf("Table's indirection vs ethtool -x (-ethtool +Table):\n%s", diff)
	}
	if !slices.Equal(key, st.Key) {
		t.Errorf("Table's key %x, ethtool -x %x", st.Key, key)
	}
	rng := rand.New(rand.NewPCG(3, 7))
	newKey := make([]byte, 40)
	for i := range newKey {
		newKey[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name  string
		indir func() ([]uint32, error)
		key   []byte
		args  []string
	}{
		{"equal 2", func() ([]uint32, error) { return rss.Equal(2, 128) }, nil, []string{"equal", "2"}},
		{"weights 1,2,3,2", func() ([]uint32, error) { return rss.Weights(128, 1, 2, 3, 2) }, nil, []string{"weight", "1", "2", "3", "2"}},
		{"key", nil, newKey, []string{"hkey", hexColon(newKey)}},
		{"equal 4", func() ([]uint32, error) { return rss.Equal(4, 128) }, nil, []string{"equal", "4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := dev.RSS()
			cfg := nic.RSSConfig{Key: c.key}
			want := before
			if c.indir != nil {
				in, err := c.indir()
				if err != nil {
					t.Fatal(err)
				}
				cfg.Indir, want.Indir = in, in
			}
			if c.key != nil {
				want.Key = c.key
			}
			labSetTable(t, name, cfg)
			got, err := dev.RSS()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after %s (-want +got):\n%s", c.name, diff)
			}
		})
	}
}

func hexColon(b []byte) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = fmt.Sprintf("%02x", x)
	}
	return strings.Join(s, ":")
}

// waitCounters polls the per-queue RX counters until total frames more
// than base arrived (or 15 s passed), then once more after a pause so late
// strays show.
func waitCounters(t *testing.T, dev string, base []uint64, total uint64) []uint64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		cur, err := labctl.QueueRXPackets(dev, len(base))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for q := range cur {
			n += cur[q] - base[q]
		}
		if n >= total || time.Now().After(deadline) {
			time.Sleep(300 * time.Millisecond)
			cur, err = labctl.QueueRXPackets(dev, len(base))
			if err != nil {
				t.Fatal(err)
			}
			return cur
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSteering sends flows into dev from the host side, grouped by the
// queue p predicts, and requires every frame of a group on that queue
// (the kernel's per-queue counters, netdev netlink qstats). A group that strays is
// resent flow by flow to name the flows that went elsewhere.
func checkSteering(t *testing.T, c *labctl.Client, dev string, p *rss.Predictor, nq int, flows []labctl.Flow) {
	t.Helper()
	const per = 2
	ports := map[string]bool{}
	groups := make([][]labctl.Flow, nq)
	for _, f := range flows {
		q, err := p.Queue(labctl.FlowKey(t, dev, f, ports))
		if err != nil {
			t.Fatal(err)
		}
		if int(q) >= nq {
			t.Fatalf("flow %v predicted on queue %d of %d", f, q, nq)
		}
		groups[q] = append(groups[q], f)
	}
	t.Logf("%d flows predicted per queue: %v (hash covers ports: %v)", len(flows), lens(groups), ports)
	for q, g := range groups {
		if len(g) == 0 {
			continue
		}
		base, err := labctl.QueueRXPackets(dev, nq)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(g, per); err != nil {
			t.Fatal(err)
		}
		cur := waitCounters(t, dev, base, uint64(per*len(g)))
		delta := make([]uint64, nq)
		for i := range cur {
			delta[i] = cur[i] - base[i]
		}
		want := make([]uint64, nq)
		want[q] = uint64(per * len(g))
		if slices.Equal(delta, want) {
			continue
		}
		t.Errorf("%d flows predicted on queue %d: per-queue frames %v, want %v", len(g), q, delta, want)
		for i, f := range g {
			if i == 8 {
				break
			}
			base, _ := labctl.QueueRXPackets(dev, nq)
			c.Send([]labctl.Flow{f}, 1)
			cur := waitCounters(t, dev, base, 1)
			for j := range cur {
				if cur[j] != base[j] && j != q {
					t.Errorf("  flow %v (hash %#08x): predicted queue %d, arrived on %d", f, p.Hash(labctl.FlowKey(t, dev, f, ports)), q, j)
				}
			}
		}
	}
}

func lens(g [][]labctl.Flow) []int {
	out := make([]int, len(g))
	for i := range g {
		out[i] = len(g[i])
	}
	return out
}

// TestLabRSSToeplitzOracle is the real oracle of the software Toeplitz:
// for the device's own configuration and for weights with a new key, UDP
// and TCP flows over IPv4 and IPv6 sent into the virtio-net NIC from the
// host must each arrive on the RX queue Predictor computes from the key and
// table Table reads (qemu's virtio-net RSS hashes in software, Toeplitz,
// indirection_table[hash & mask]).
func TestLabRSSToeplitzOracle(t *testing.T) {
	name := labctl.Virtio(t)
	dev := labctl.OpenNIC(t, name)
	c := labctl.DialTB(t)
	ch, err := dev.Channels()
	if err != nil {
		t.Fatal(err)
	}
	nq := int(ch.Combined)
	if nq < 2 {
		t.Fatalf("virtio-net has %d queues; the lab sets 4", nq)
	}
	orig, err := dev.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { labctl.Ethtool("-X", name, "hkey", hexColon(orig.Key), "default") })
	rng := rand.New(rand.NewPCG(11, uint64(os.Getpid())))
	newKey := make([]byte, 40)
	for i := range newKey {
		newKey[i] = byte(rng.Uint32())
	}
	w, _ := rss.Weights(128, 1, 3, 0, 2)
	for _, cfg := range []struct {
		name string
		set  func(t *testing.T)
	}{
		{"device default", func(*testing.T) {}},
		{"weights 1,3,0,2 and a new key", func(t *testing.T) {
			labSetTable(t, name, nic.RSSConfig{Indir: w, Key: newKey})
		}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			cfg.set(t)
			st, err := dev.RSS()
			if err != nil {
				t.Fatal(err)
			}
			p, err := st.Predictor(rss.IndexLowBits)
			if err != nil {
				t.Fatal(err)
			}
			var flows []labctl.Flow
			flows = append(flows, labctl.Flows(rng, 96, labctl.ProtoUDP, false, 9000)...)
			flows = append(flows, labctl.Flows(rng, 96, labctl.ProtoTCP, false, 9100)...)
			flows = append(flows, labctl.Flows(rng, 48, labctl.ProtoUDP, true, 9200)...)
			flows = append(flows, labctl.Flows(rng, 48, labctl.ProtoTCP, true, 9300)...)
			checkSteering(t, c, name, p, nq, flows)
		})
	}
}

// TestLabChannelsVirtio sets virtio-net's combined channels and reads them
// back (checked against sysfs), then pins the indirection table on queue 3
// and requires the kernel to refuse shrinking below it, with its message.
func TestLabChannelsVirtio(t *testing.T) {
	name := labctl.Virtio(t)
	dev := labctl.OpenNIC(t, name)
	orig, err := dev.Channels()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		labctl.Ethtool("-X", name, "default")
		dev.SetChannels(nic.ChannelsConfig{Combined: &orig.Combined})
	})
	if orig.CombinedMax != 4 {
		t.Fatalf("virtio-net combined max %d, want the 4 queue pairs qemu gives it", orig.CombinedMax)
	}
	for _, n := range []uint32{1, 3, 2, 4} {
		if err := dev.SetChannels(nic.ChannelsConfig{Combined: u32(n)}); err != nil {
			t.Fatalf("SetChannels combined %d: %v", n, err)
		}
		got, err := dev.Channels()
		if err != nil {
			t.Fatal(err)
		}
		if got.Combined != n || sysQueues(t, name, "rx") < int(n) {
			t.Errorf("after combined %d: Channels %d, sysfs rx queues %d", n, got.Combined, sysQueues(t, name, "rx"))
		}
	}
	if _, err := labctl.Ethtool("-X", name, "weight", "0", "0", "0", "1"); err != nil {
		t.Fatal(err)
	}
	err = dev.SetChannels(nic.ChannelsConfig{Combined: u32(2)})
	t.Logf("combined 2 with the indirection table on queue 3: %v", err)
	var de *nic.RequestError
	if err == nil {
		t.Errorf("shrinking below the indirection table's queues succeeded")
	} else if !errors.As(err, &de) || !strings.Contains(de.Message, "too low for existing") {
		t.Errorf("refusal %v: want the kernel's \"requested channel counts are too low for existing indirection table …\"", err)
	}
	if got, _ := dev.Channels(); got.Combined != 4 {
		t.Errorf("refused SetChannels changed combined to %d", got.Combined)
	}
}
