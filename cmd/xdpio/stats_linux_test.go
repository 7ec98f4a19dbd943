//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// statsPair is a 2-queue veth pair whose B end counts in its per-queue
// ethtool -S counters the frames A sends: veth counts a frame in
// rx_queue_N_xdp_packets when its NAPI takes it, which needs GRO on at
// the receiver and TSO off at the sender.
func statsPair(t *testing.T) *netnstest.Pair {
	t.Helper()
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	hostOut(t, p.B, "ethtool", "-K", p.B.Link, "gro", "on")
	hostOut(t, p.A, "ethtool", "-K", p.A.Link, "tso", "off")
	return p
}

// ethtoolS is `ethtool -S` of h's link: the oracle.
func ethtoolS(t *testing.T, h *netnstest.Host) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := h.EthtoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sendAndWait sends n UDP datagrams from A to B (port 9, no listener;
// unconnected, so that B's ICMP answers fail no write) and waits until
// ethtool -S counts them in B's rx_queue_N_xdp_packets.
func sendAndWait(t *testing.T, p *netnstest.Pair, n int) {
	t.Helper()
	was, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets")
	err := p.A.Do(func() error {
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
	for deadline := time.Now().Add(5 * time.Second); ; {
		now, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets")
		if now-was >= uint64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ethtool -S counted %d of %d datagrams", now-was, n)
		}
	}
}

// statsTable parses `xdpio stats`'s text: the source line, then each
// row's counters by column ("-" left out).
func statsTable(t *testing.T, out string) (string, map[string]map[string]uint64) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("stats printed %d lines:\n%s", len(lines), out)
	}
	cols := strings.Fields(lines[1])
	if len(cols) < 2 || cols[0] != "queue" {
		t.Fatalf("header %q", lines[1])
	}
	rows := map[string]map[string]uint64{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		label := f[0]
		if label == "rx" || label == "tx" {
			label, f = f[0]+" "+f[1], f[1:]
		}
		if len(f) != len(cols) {
			t.Fatalf("row %q: %d values for %d columns", l, len(f)-1, len(cols)-1)
		}
		rows[label] = map[string]uint64{}
		for i, v := range f[1:] {
			if v == "-" {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("row %q: %q", l, v)
			}
			rows[label][cols[i+1]] = n
		}
	}
	return lines[0], rows
}

// oracleName is the ethtool -S string of a counter xdpio shows in row
// "rx 1" as rx_xdp_packets: rx_queue_1_xdp_packets.
func oracleName(row, counter string) string {
	typ, id, _ := strings.Cut(row, " ")
	dir, rest, _ := strings.Cut(counter, "_")
	if dir != typ {
		return ""
	}
	return fmt.Sprintf("%s_queue_%s_%s", dir, id, rest)
}

// checkAgainst checks each queue row's counters against ethtool -S read
// before (lo) and after (hi) xdpio, and that every per-queue string of
// ethtool -S is shown: a cell is "-" exactly where ethtool -S has no
// such string.
func checkAgainst(t *testing.T, what string, rows map[string]map[string]uint64, cols []string, lo, hi map[string]uint64) {
	t.Helper()
	shown := 0
	for row, m := range rows {
		if row == "total" {
			continue
		}
		for _, c := range cols {
			name := oracleName(row, c)
			v, ok := m[c]
			_, want := lo[name]
			if ok != want {
				t.Errorf("%s: %s %s shown %v, ethtool -S has %q: %v", what, row, c, ok, name, want)
				continue
			}
			if !ok {
				continue
			}
			shown++
			if v < lo[name] || v > hi[name] {
				t.Errorf("%s: %s %s = %d; ethtool -S %s read %d before, %d after", what, row, c, v, name, lo[name], hi[name])
			}
		}
	}
	perQueue := 0
	for name := range lo {
		if strings.HasPrefix(name, "rx_queue_") || strings.HasPrefix(name, "tx_queue_") {
			perQueue++
		}
	}
	if shown != perQueue || perQueue != 2*7+2*2 {
		t.Errorf("%s: %d counters shown, ethtool -S has %d per-queue strings (veth: 7 per RX, 2 per TX queue)", what, shown, perQueue)
	}
}

// veth keeps no netdev qstats: `xdpio stats` shows its per-queue ethtool
// -S counters (the oracle, run before and after), says so, and --json
// says it in "source".
func TestCLIStatsVethFallback(t *testing.T) {
	p := statsPair(t)
	ns, dev := p.B.NS, p.B.Link
	sendAndWait(t, p, 50)

	lo := ethtoolS(t, p.B)
	out, code, err := cli(t, "--netns", ns, "stats", dev)
	hi := ethtoolS(t, p.B)
	if code != 0 {
		t.Fatalf("stats: %v", err)
	}
	src, rows := statsTable(t, out)
	if want := dev + ": source: ethtool -S (driver strings); the driver keeps no netdev qstats"; src != want {
		t.Errorf("first line %q, want %q", src, want)
	}
	if len(rows) != 5 || rows["rx 0"] == nil || rows["rx 1"] == nil || rows["tx 0"] == nil || rows["tx 1"] == nil || rows["total"] == nil {
		t.Errorf("rows %v, want rx 0, rx 1, tx 0, tx 1 and total:\n%s", rows, out)
	}
	cols := strings.Fields(strings.Split(out, "\n")[1])[1:]
	checkAgainst(t, "text", rows, cols, lo, hi)
	if got := rows["total"]["rx_xdp_packets"]; got != rows["rx 0"]["rx_xdp_packets"]+rows["rx 1"]["rx_xdp_packets"] || got < 50 {
		t.Errorf("total rx_xdp_packets %d: not the queues' sum, or fewer than the 50 datagrams sent", got)
	}
	t.Logf("xdpio stats:\n%s", out)

	lo = ethtoolS(t, p.B)
	out, code, err = cli(t, "--netns", ns, "--json", "stats", dev)
	hi = ethtoolS(t, p.B)
	var j struct {
		Device string `json:"device"`
		Source string `json:"source"`
		Queues []struct {
			Type     string            `json:"type"`
			Queue    *int              `json:"queue"`
			Counters map[string]uint64 `json:"counters"`
		} `json:"queues"`
		Total map[string]uint64 `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.Source != "ethtool -S (driver strings)" || j.Device != dev || len(j.Queues) != 4 {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	jrows := map[string]map[string]uint64{}
	colSet := map[string]bool{}
	for _, q := range j.Queues {
		if q.Queue == nil {
			t.Fatalf("--json: queue %s without a number", q.Type)
		}
		jrows[fmt.Sprintf("%s %d", q.Type, *q.Queue)] = q.Counters
		for c := range q.Counters {
			colSet[c] = true
		}
	}
	cols = cols[:0]
	for c := range colSet {
		cols = append(cols, c)
	}
	checkAgainst(t, "--json", jrows, cols, lo, hi)

	// --queue picks that queue's RX and TX rows.
	out, code, err = cli(t, "--netns", ns, "stats", dev, "--queue", "1")
	if _, rows := statsTable(t, out); code != 0 || len(rows) != 3 || rows["rx 1"] == nil || rows["tx 1"] == nil || rows["total"] == nil {
		t.Errorf("--queue 1: %v\n%s", err, out)
	}
}

// notifyWriter is a syncBuffer that signals each write on wrote.
type notifyWriter struct {
	syncBuffer
	wrote chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// waitFor waits until ok holds of what w holds, for at most 10 s.
func (w *notifyWriter) waitFor(t *testing.T, what string, done <-chan error, ok func(string) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !ok(w.String()) {
		select {
		case <-w.wrote:
		case err := <-done:
			t.Fatalf("the command ended waiting for %s: %v\n%s", what, err, w.String())
		case <-timeout:
			t.Fatalf("no %s after 10 s:\n%s", what, w.String())
		}
	}
}

// --watch with the ethtool -S fallback: the rates are deltas of the
// driver's counters, and the total over the run is what ethtool -S
// counted between its first and its last snapshot (datagrams sent only
// after the first). Under --json each line names the source.
func TestCLIStatsWatchFallback(t *testing.T) {
	p := statsPair(t)
	ns, dev := p.B.NS, p.B.Link
	const n = 120

	w := &notifyWriter{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	lo := ethtoolS(t, p.B)
	go func() {
		done <- runWith(ctx, &globals{stdout: w, stderr: w}, []string{"--netns", ns, "stats", dev, "--watch", "100ms"})
	}()
	// The header comes after the first snapshot: send after it.
	w.waitFor(t, "header", done, func(s string) bool { return strings.Contains(s, "\ntime ") })
	sendAndWait(t, p, n)
	// The total runs to the last interval's snapshot: wait for one taken
	// after ethtool -S counted the datagrams (4 rows an interval).
	rows := strings.Count(w.String(), "\n")
	w.waitFor(t, "an interval after the traffic", done, func(s string) bool { return strings.Count(s, "\n") >= rows+8 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stats --watch: %v\n%s", err, w.String())
	}
	hi := ethtoolS(t, p.B)
	out := w.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if want := dev + ": source: ethtool -S (driver strings); the driver keeps no netdev qstats"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	var cols []string
	var total map[string]uint64
	for i, l := range lines {
		f := strings.Fields(l)
		if strings.HasPrefix(l, "total over ") && i+2 < len(lines) {
			cols = strings.Fields(lines[i+1])
			tf := strings.Fields(lines[i+2])
			if tf[0] != "total" || tf[1] != "all" || len(tf) != len(cols)+2 {
				t.Fatalf("total row %q under %q", lines[i+2], lines[i+1])
			}
			total = map[string]uint64{}
			for j, c := range cols {
				total[c], _ = strconv.ParseUint(tf[j+2], 10, 64)
			}
		}
		if len(f) > 2 && (f[1] == "rx" || f[1] == "tx") && strings.Count(f[0], ":") != 2 {
			t.Errorf("interval row %q: no time", l)
		}
	}
	if total == nil {
		t.Fatalf("no total:\n%s", out)
	}
	sum := func(m map[string]uint64) uint64 { v, _ := netnstest.SumStats(m, "rx_queue_", "_xdp_packets"); return v }
	got := total["rx_xdp_packets"]
	if got < n || got > sum(hi)-sum(lo) {
		t.Errorf("total rx_xdp_packets %d over the run; %d datagrams sent after the first snapshot; ethtool -S counted %d from before the run to after it", got, n, sum(hi)-sum(lo))
	}
	t.Logf("xdpio stats --watch:\n%s", out)

	// --json: every interval and the total name the source; the
	// intervals add up to the total.
	out, code, err := cli(t, "--netns", ns, "--json", "stats", dev, "--watch", "100ms", "--count", "2")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("--json --watch --count 2: %v\n%s", err, out)
	}
	var sumRX uint64
	for i, l := range lines {
		var v struct {
			Source string `json:"source"`
			Queues []struct {
				Counters map[string]uint64 `json:"counters"`
			} `json:"queues"`
			Total map[string]uint64 `json:"total"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Source != "ethtool -S (driver strings)" {
			t.Errorf("line %d %q: %v, want source ethtool -S (driver strings)", i, l, err)
		}
		for _, q := range v.Queues {
			sumRX += q.Counters["rx_xdp_packets"]
		}
		if i == 2 && v.Total["rx_xdp_packets"] != sumRX {
			t.Errorf("intervals add up to %d rx_xdp_packets, the total says %d", sumRX, v.Total["rx_xdp_packets"])
		}
	}
}

// lo has no per-queue counters at all (ethtool -S, the oracle, says "no
// stats available"): `xdpio stats lo` shows its totals, says so, and
// agrees with the kernel's sysfs counters. Read-only.
func TestCLIStatsLo(t *testing.T) {
	ethtool := netnstest.RequireTool(t, "ethtool")
	if out, err := exec.Command(ethtool, "-S", "lo").CombinedOutput(); err == nil {
		t.Skipf("skipping: lo has driver statistics here:\n%s", out)
	}
	sysfs := func(name string) uint64 {
		b, err := os.ReadFile("/sys/class/net/lo/statistics/" + name)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	before := sysfs("rx_packets")
	out, code, err := cli(t, "stats", "lo")
	after := sysfs("rx_packets")
	if code != 0 {
		t.Fatalf("stats lo: %v", err)
	}
	src, rows := statsTable(t, out)
	if want := "lo: source: device totals (/proc/net/dev); the driver keeps no per-queue counters (no netdev qstats, none in ethtool -S)"; src != want {
		t.Errorf("first line %q, want %q", src, want)
	}
	if len(rows) != 1 || rows["device"] == nil {
		t.Fatalf("rows %v, want the one device row:\n%s", rows, out)
	}
	if v := rows["device"]["rx_packets"]; v < before || v > after {
		t.Errorf("rx_packets %d; sysfs read %d before, %d after", v, before, after)
	}
	t.Logf("xdpio stats lo:\n%s", out)

	out, code, err = cli(t, "--json", "stats", "lo")
	var j struct {
		Source string `json:"source"`
		Queues []struct {
			Type     string            `json:"type"`
			Queue    *int              `json:"queue"`
			Counters map[string]uint64 `json:"counters"`
		} `json:"queues"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.Source != "device totals (/proc/net/dev)" || len(j.Queues) != 1 || j.Queues[0].Type != "device" || j.Queues[0].Queue != nil {
		t.Errorf("--json: %v\n%s", err, out)
	}

	out, code, err = cli(t, "stats", "lo", "--watch", "50ms", "--count", "1")
	if code != 0 || !strings.Contains(out, " device ") || !strings.Contains(out, "total over") || !strings.HasPrefix(out, "lo: source: device totals") {
		t.Errorf("--watch: %v\n%s", err, out)
	}
	_, code, err = cli(t, "stats", "lo", "--queue", "0")
	oneLine(t, code, 1, err, "--queue 0: lo keeps no per-queue counters")
	var ue *usageError
	if errors.As(err, &ue) {
		t.Errorf("--queue 0 on lo: a usage error")
	}
}
