package main

import (
	"strings"
	"testing"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/plane"
)

// The demo's text: every interval line fills its header's columns, sent
// and received side by side; the table and the headline say what was
// sent, received and lost and what a packet cost at each end; ticks are
// round.
func TestDemoText(t *testing.T) {
	iv := func(start float64, pkts, lost int64) bench.Interval {
		return bench.Interval{Sum: bench.IntervalStream{Start: start, End: start + 1, Seconds: 1, Packets: pkts, LostPackets: lost}}
	}
	rows := []demoRow{
		{Backend: "xsk", SentPackets: 2000, RecvPackets: 1900, LostPackets: 100, SentPPS: 1000, PPS: 950, SendThreadPerPacket: 1300, RecvThreadPerPacket: 400, CPUPerPacket: 4000,
			Intervals: []bench.Interval{iv(0, 1000, 50), iv(1, 1000, 50)}, SentIntervals: []bench.Interval{iv(0, 1000, 0), iv(1, 1000, 0)},
			Queues: []plane.QueueCount{{Queue: 0, Packets: 1000}, {Queue: 1, Packets: 900}}},
		{Backend: "socket", SentPackets: 1000, RecvPackets: 1000, SentPPS: 500, PPS: 500, SendThreadPerPacket: 3000, RecvThreadPerPacket: 900, CPUPerPacket: 8000,
			Intervals: []bench.Interval{iv(0, 500, 0), iv(1, 500, 0)}, SentIntervals: []bench.Interval{iv(0, 500, 0), iv(1, 500, 0)}},
	}
	rows[0].RatioSocket, rows[1].RatioSocket = 1.9, 1
	var b strings.Builder
	writeDemoIntervals(&b, rows[0])
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "sender: AF_XDP (xdpio); receiver: AF_XDP (xdpio)") {
		t.Fatalf("intervals:\n%s", b.String())
	}
	head := strings.Fields(strings.ReplaceAll(lines[1], " pkts/s", "_pkts/s"))
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != len(head)+1 || f[2] != "1000" || f[3] != "950" || f[4] != "50" { // "0-1 s" is two fields
			t.Errorf("interval line %q under %q", l, lines[1])
		}
	}
	b.Reset()
	writeDemoTable(&b, rows)
	out := b.String()
	for _, want := range []string{"sender ns/pkt", "receiver ns/pkt", "100 (5.0%)", "- (no AF_XDP queues)", "q0:1000 q1:900",
		"headline: xsk received 1.90× the kernel socket's packets/s", "sent 2.00× as many", "1300 vs 3000 ns", "400 vs 900 ns",
		"xsk: the receiver is the limit: it lost 5.0%", "socket: the sender is the limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct{ max, want float64 }{{575147, 200000}, {9, 2}, {1, 0.2}, {0, 1}, {3.2e6, 1e6}} {
		if got := niceStep(c.max, 5); got != c.want {
			t.Errorf("niceStep(%v, 5) = %v, want %v", c.max, got, c.want)
		}
	}
	svg := string(demoSVG(rows, 2, 64))
	if strings.Count(svg, "<polyline") != 4 || !strings.Contains(svg, ">200k<") && !strings.Contains(svg, ">1k<") {
		t.Errorf("chart: want a sent and a received line per data plane and round ticks:\n%s", svg)
	}
}
