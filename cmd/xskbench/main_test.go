//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestMeasureSmoke runs every mode and backend once with tiny windows and
// checks that each one moved packets, that receivers never count more
// than was offered, that the ratios are there, and that no XDP program is
// left on either veth afterwards.
func TestMeasureSmoke(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := Options{
		Queues: 2, Sizes: []int{64, 1514}, Rounds: 1,
		Warmup: 50 * time.Millisecond, Window: 200 * time.Millisecond,
		Batch: 64, RingSize: 2048, NumFrames: 4096, FrameSize: 2048, TXBudget: 2048,
		Sockets: 2, Flows: 64, Port: 7777, EagerComplete: true,
		Nap: 30 * time.Microsecond, BusyPoll: 50 * time.Microsecond, BusyPollBudget: 64, BusyPollSpin: 32,
		NAPIDefer: 2, GROFlushTimeout: 200 * time.Microsecond,
		// Every backend, the ones measured only on request too.
		Backends: append(slices.Clone(rxBackends), beSocketGSO),
	}
	var log bytes.Buffer
	rep, err := measure(ctx, pair, o, &log)
	if err != nil {
		t.Fatalf("measure: %v\n%s", err, log.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("progress:\n%s", log.String())
		}
	}()
	type key struct {
		mode, be string
		size     int
	}
	seen := map[key]bool{}
	for _, r := range rep.Results {
		seen[key{r.Mode, r.Backend, r.Size}] = true
		if r.PPS <= 0 {
			t.Errorf("%s %d B %s: %.0f pps, want > 0", r.Mode, r.Size, r.Backend, r.PPS)
		}
		// What arrived cannot exceed what was offered, apart from the
		// counters being read a moment apart, frames that were already
		// on a ring (up to one ring per queue) when the window began,
		// and, for the kernel socket, datagrams queued in its 32 MiB
		// buffer.
		slack := 1.05
		if r.Backend == beSocket {
			slack = 1.3
		}
		queued := float64(o.Queues*o.RingSize) / o.Window.Seconds()
		if r.PPS > slack*r.OfferedPPS+queued {
			t.Errorf("%s %d B %s: received %.0f pps of %.0f offered", r.Mode, r.Size, r.Backend, r.PPS, r.OfferedPPS)
		}
	}
	// The C peer is optional (a C compiler and kernel headers); when it
	// was skipped the report says why.
	if why, ok := rep.Skipped[beC]; ok {
		t.Logf("C peer skipped: %s", why)
		if why == "" {
			t.Error("C peer skipped without a reason")
		}
	}
	for _, size := range o.Sizes {
		for _, be := range rxBackends {
			if _, skip := rep.Skipped[be]; skip {
				continue
			}
			if !seen[key{modeRX, be, size}] {
				t.Errorf("no rxdrop result for %s at %d B", be, size)
			}
		}
		for _, be := range txBackends {
			if _, skip := rep.Skipped[be]; skip {
				continue
			}
			if !seen[key{modeTX, be, size}] {
				t.Errorf("no txonly result for %s at %d B", be, size)
			}
		}
	}
	names := map[string]int{}
	for _, r := range rep.Ratios {
		names[r.Mode+" "+r.Name]++
		if r.Paired <= 0 {
			t.Errorf("%s %d B %s: paired ratio %v, want > 0", r.Mode, r.Size, r.Name, r.Paired)
		}
	}
	for _, n := range []string{"rxdrop xdpio/asavie", "rxdrop xdpio/socket", "txonly xdpio/asavie"} {
		if names[n] != len(o.Sizes) {
			t.Errorf("ratio %q appears %d times, want %d", n, names[n], len(o.Sizes))
		}
	}
	var out bytes.Buffer
	printTable(&out, rep)
	if !strings.Contains(out.String(), "xdpio/asavie") {
		t.Errorf("table lacks the ratios:\n%s", out.String())
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Errorf("JSON round trip: %v, %d results", err, len(back.Results))
	}
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		nh, err := h.Handle()
		if err != nil {
			t.Fatal(err)
		}
		l, err := nh.LinkByIndex(h.Ifindex)
		nh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			t.Errorf("%s: XDP program %d still attached after measure", h.Link, x.ProgId)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "abc"},
		{"-sizes", "20"},
		{"-queues", "0"},
		{"-modes", "bogus"},
		{"-backends", "nope"},
		{"extra"},
	} {
		err := run(context.Background(), args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

// Without a working C compiler the C peer is skipped with a reason, not a
// failure of the run.
func TestBuildCPeerUnavailable(t *testing.T) {
	ctx := context.Background()
	t.Setenv("CC", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := buildCPeer(ctx, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no C compiler") {
		t.Errorf("no compiler on PATH: %v, want a 'no C compiler' error", err)
	}
	t.Setenv("CC", "/bin/false")
	if _, err := buildCPeer(ctx, t.TempDir()); err == nil {
		t.Error("a compiler that fails: no error")
	}
}
