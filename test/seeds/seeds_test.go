package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
)

// A real iperf3 3.12 client's -J output (-P 2, 3 s at 10 Mbit/s a stream
// on loopback): the receiver's bytes and rate, the sender's
// retransmissions, and the per-second sums with the first second left out.
func TestParseIperf3(t *testing.T) {
	b, err := os.ReadFile("testdata/iperf3-P2.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseIperf3(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.bytes != 7602176 || r.retransmits != 0 || math.Abs(r.bps-20.27e6) > 0.01e6 {
		t.Errorf("parsed %+v, want 7602176 bytes at 20.27 Mbit/s, no retransmits", r)
	}
	if r.minBps != 18874972.144337267 || r.maxBps != 20971500.000019073 {
		t.Errorf("per second %v–%v, want the 2nd and 3rd seconds' 18.87–20.97 Mbit/s", r.minBps, r.maxBps)
	}
	for _, bad := range []string{"", "{", `{"error": "unable to connect to server"}`, `{"end": {}}`} {
		if _, err := parseIperf3([]byte(bad)); err == nil {
			t.Errorf("parseIperf3(%q): no error", bad)
		}
	}
}

// pprof -top's lines are read into flat shares; checksum functions of
// gVisor and of offload are told apart, and packages are summed.
func TestParseTop(t *testing.T) {
	const top = `File: xdpio
Type: cpu
Duration: 7.10s, Total samples = 6.50s (91.55%)
Showing nodes accounting for 6.50s, 100% of 6.50s total
      flat  flat%   sum%        cum   cum%
     1.30s 20.00% 20.00%      1.30s 20.00%  runtime/internal/syscall.Syscall6
     0.65s 10.00% 30.00%      0.65s 10.00%  gvisor.dev/gvisor/pkg/tcpip/checksum.calculateChecksum
     0.33s  5.00% 35.00%      0.33s  5.00%  github.com/xdpio/xdpio/offload.sumAVX2
     0.20s  3.00% 38.00%      0.40s  6.00%  gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*sender).sendData
     0.13s  2.00% 40.00%      0.13s  2.00%  gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).Read
     0.07s  1.00% 41.00%      0.07s  1.00%  github.com/xdpio/xdpio/netstack.(*Endpoint).deliver.func1
`
	p := parseTop([]byte(top))
	if g, o := p.share(gvisorSum), p.share(offloadSum); g != 10 || o != 5 {
		t.Errorf("checksum shares gVisor %v%%, offload %v%%; want 10 and 5", g, o)
	}
	got := p.packages(3)
	if want := "runtime/internal/syscall 20.0%, tcpip/checksum 10.0%, offload 5.0%"; got != want {
		t.Errorf("packages: %q, want %q", got, want)
	}
	if !strings.Contains(p.packages(10), "tcpip/transport/tcp 5.0%") || !strings.Contains(p.packages(10), "netstack 1.0%") {
		t.Errorf("packages: %q, want tcp's two functions summed and netstack's", p.packages(10))
	}
}

// A ratio's per-round values come from the same round of both variants.
func TestGoalRatios(t *testing.T) {
	e := experiment{name: "x", variants: []variant{{name: "a"}, {name: "b"}},
		goals: []goal{{"b", "a", "bps", "≥ 2×"}, {"b", "a", "serverCPU", "less"}}}
	res := [][]result{
		{{bps: 1e9, bytes: 1e9, serverCPU: 2}, {bps: 2e9, bytes: 2e9, serverCPU: 2}},
		{{bps: 3e9, bytes: 3e9, serverCPU: 3}, {bps: 2e9, bytes: 2e9, serverCPU: 1}},
	}
	var buf bytes.Buffer
	e.write(&buf, res)
	out := buf.String()
	// Round 1: 3/1, round 2: 2/2; CPU per byte (3/3)/(2/1) = 0.5, (1/2)/(2/2) = 0.5.
	for _, want := range []string{"| b ÷ a | throughput | 2.00× [1.00×–3.00×] | ≥ 2× |", "| b ÷ a | server CPU per byte | 0.50× [0.50×–0.50×] | less |", "| a | 1.50 [1.00–2.00] |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
