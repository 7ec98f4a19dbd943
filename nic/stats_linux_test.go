//go:build linux

package nic_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
)

// veth keeps no netdev qstats: Stats falls back to its per-queue ethtool
// -S counters, and reads what ethtool -S (the oracle) reads, counter for
// counter, before and after traffic that goes through them.
func TestStatsVethDriverStrings(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	netnstest.RequireTool(t, "ethtool")
	// veth counts a frame in rx_queue_N_xdp_packets when its NAPI takes
	// it: the receiver needs GRO on, the sender TSO off.
	run(t, p.B, "ethtool", "-K", p.B.Link, "gro", "on")
	run(t, p.A, "ethtool", "-K", p.A.Link, "tso", "off")
	var d *nic.Device
	if err := p.B.Do(func() (err error) { d, err = nic.Open(p.B.Link); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.QueueStats(); !errors.Is(err, nic.ErrNotSupported) {
		t.Fatalf("veth QueueStats: %v; this test is about a driver without qstats", err)
	}

	stats := func() (nic.Snapshot, map[string]uint64, map[string]uint64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o1, err := p.B.EthtoolStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var s nic.Snapshot
		if err := p.B.Do(func() (err error) { s, err = d.Stats(); return err }); err != nil {
			t.Fatalf("Stats: %v", err)
		}
		o2, err := p.B.EthtoolStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s, o1, o2
	}
	check := func(s nic.Snapshot, o1, o2 map[string]uint64) {
		t.Helper()
		if s.Source != nic.StatsDriver {
			t.Fatalf("source %q, want %q", s.Source, nic.StatsDriver)
		}
		seen := map[string]bool{}
		for _, q := range s.Queues {
			for k, v := range q.Counters {
				dir, rest, _ := strings.Cut(k, "_")
				name := fmt.Sprintf("%s_queue_%d_%s", dir, q.Queue, rest)
				lo, ok := o1[name]
				if !ok || dir != string(q.Type) {
					t.Errorf("%s %d %s: ethtool -S has no %s", q.Type, q.Queue, k, name)
					continue
				}
				if v < lo || v > o2[name] {
					t.Errorf("%s %d %s = %d; ethtool -S %s read %d before, %d after", q.Type, q.Queue, k, v, name, lo, o2[name])
				}
				seen[name] = true
			}
		}
		for name := range o1 {
			if (strings.HasPrefix(name, "rx_queue_") || strings.HasPrefix(name, "tx_queue_")) && !seen[name] {
				t.Errorf("ethtool -S %s is in no queue's counters", name)
			}
		}
		if len(seen) != 2*7+2*2 {
			t.Errorf("%d per-queue counters, want veth's 7 per RX and 2 per TX queue of 2 each", len(seen))
		}
	}
	before, o1, o2 := stats()
	check(before, o1, o2)

	const n = 200
	err := p.A.Do(func() error {
		// Unconnected: B's ICMP port unreachable fails no write.
		c, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		to := &net.UDPAddr{IP: p.B.IPv4.AsSlice(), Port: 9}
		for i := range n {
			if _, err := c.WriteToUDP([]byte(strconv.Itoa(i)), to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The frames are counted when B's NAPI has run: wait for ethtool -S.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := p.B.EthtoolStats(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := netnstest.SumStats(m, "rx_queue_", "_xdp_packets")
		was, _ := netnstest.SumStats(o2, "rx_queue_", "_xdp_packets")
		if got-was >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ethtool -S counted %d of %d datagrams in rx_queue_N_xdp_packets", got-was, n)
		}
		runtime.Gosched()
	}
	after, o3, o4 := stats()
	check(after, o3, o4)
	// Delta: between what ethtool -S counted from just after the first
	// snapshot to just before the second, and from just before the
	// first to just after the second; and at least the datagrams sent.
	var sum uint64
	for _, q := range after.Delta(before).Queues {
		sum += q.Counters["rx_xdp_packets"]
	}
	total := func(m map[string]uint64) uint64 { v, _ := netnstest.SumStats(m, "rx_queue_", "_xdp_packets"); return v }
	if sum < n || sum < total(o3)-total(o2) || sum > total(o4)-total(o1) {
		t.Errorf("the delta counts %d rx_xdp_packets; %d datagrams were sent, ethtool -S counted %d-%d", sum, n, total(o3)-total(o2), total(o4)-total(o1))
	}

	// The namespace matters: from a thread outside B's, the driver's
	// counters and /proc/net/dev would be another namespace's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, err := d.Stats(); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("Stats from outside the device's namespace: %v, want an error naming the namespace", err)
	}
}

// lo keeps no per-queue counters at all (no qstats; ethtool -S, the
// oracle, says "no stats available"): Stats shows the device's totals,
// which the kernel's sysfs files (the oracle) agree with. Read-only.
func TestStatsLoDeviceTotals(t *testing.T) {
	ethtool := netnstest.RequireTool(t, "ethtool")
	if out, err := exec.Command(ethtool, "-S", "lo").CombinedOutput(); err == nil {
		t.Skipf("skipping: lo has driver statistics here:\n%s", out)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := nic.Open("lo")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sysfs := func(name string) uint64 {
		b, err := os.ReadFile("/sys/class/net/lo/statistics/" + name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	names := map[string]string{"rx_packets": "rx_packets", "rx_bytes": "rx_bytes", "tx_packets": "tx_packets", "tx_bytes": "tx_bytes", "rx_errs": "rx_errors", "tx_errs": "tx_errors"}
	lo := map[string]uint64{}
	for k, f := range names {
		lo[k] = sysfs(f)
	}
	s, err := d.Stats()
	if err != nil {
		t.Fatalf("Stats(lo): %v", err)
	}
	if s.Source != nic.StatsDevice || len(s.Queues) != 1 || s.Queues[0].Type != nic.WholeDevice || s.Queues[0].Queue != -1 || len(s.Queues[0].Counters) != 16 {
		t.Fatalf("Stats(lo) = %+v, want one WholeDevice row of /proc/net/dev's 16 counters", s)
	}
	for k, f := range names {
		v, hi := s.Queues[0].Counters[k], sysfs(f)
		if v < lo[k] || v > hi {
			t.Errorf("lo %s = %d; sysfs %s read %d before, %d after", k, v, f, lo[k], hi)
		}
	}
}
