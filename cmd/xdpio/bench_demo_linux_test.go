//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// The demo's AF_XDP receiver keeps up from the start. Over the demo's own
// server process and client, at full speed for 3 s, by the server's own
// quarter-second counts, its first second loses no more than the rest (at
// most 5 points more, or twice as much: on a loaded machine a burst of
// loss, a few percent of a second, can fall anywhere in a run, the first
// second too). Before xsk.NewUMEM read its pages once (its test checks
// that cause itself), the receiver's first pass over its frames trapped
// into the hypervisor for each page and fell behind the sender: 5 runs
// lost 10–94% of their first second against 0.5–17% of the rest, and 4
// failed this test. (A receiver that falls behind counts the packets the
// kernel dropped only when it reaches those after the gap, so the loss
// shows up to half a second late: hence a whole second.) The demo runs no
// outside program (its network is made over netlink), so it runs here
// with an empty PATH, as `make demo`, which installs no package, needs.
func TestDemoStartupLoss(t *testing.T) {
	netnstest.RequirePriv(t)
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	t.Setenv("PATH", "/nonexistent")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	row, err := demoRun(ctx, pair, "xsk", 15390, 4, 3*time.Second, 64, bench.BitrateUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	var first, rest demoWindow
	for _, iv := range row.Intervals {
		s := iv.Sum
		switch {
		case s.Seconds < 0.2: // the tail after the last quarter
		case s.Start < 1-1e-3:
			first.add(s)
		default:
			rest.add(s)
		}
	}
	t.Logf("first 1 s: %d packets, %d lost (%.2f%%); the rest: %d packets, %d lost (%.2f%%)",
		first.packets, first.lost, first.lostPercent(), rest.packets, rest.lost, rest.lostPercent())
	if first.seconds < 0.9 || rest.seconds < 1.5 {
		t.Fatalf("the receiver's intervals cover %.2f s and %.2f s: want 1 s and 2 s", first.seconds, rest.seconds)
	}
	if first.lostPercent() > max(2*rest.lostPercent(), rest.lostPercent()+5) {
		t.Errorf("the first 1 s lost %.2f%%, the rest %.2f%%: the receiver fell behind at the start", first.lostPercent(), rest.lostPercent())
	}
}
