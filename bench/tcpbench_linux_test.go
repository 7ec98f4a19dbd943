package bench

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

var (
	tcpBench       = flag.Duration("tcpbench", 0, "run TestTCPTSOCompare: TCP mode with software TSO off and on, each round this long (whole seconds)")
	tcpBenchRounds = flag.Int("tcpbench-rounds", 3, "TestTCPTSOCompare: rounds of TSO off then on")
)

// TestTCPTSOCompare measures what software TSO saves the sender: our
// client against our server in TCP mode at full speed, TSO off and on
// alternately in the same binary, on one veth pair. It reports the
// sender's and receiver's Gbit/s and the sending thread's CPU per byte and
// per segment, and the ratios on/off. Run it with
//
//	go test ./bench -run TestTCPTSOCompare -v -args -tcpbench=3s
func TestTCPTSOCompare(t *testing.T) {
	if *tcpBench == 0 {
		t.Skip("run with -args -tcpbench=DURATION")
	}
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	ctrl := netip.AddrPortFrom(pair.B.IPv4, 5201)
	reps, _ := startTCPServer(t, pair, ctrl)
	type sample struct{ sent, recv, user, sys, total, seg float64 }
	res := map[bool][]sample{}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %10s %10s %10s %10s %10s %12s %8s\n", "tso", "send Gb/s", "recv Gb/s", "ns/B user", "ns/B sys", "ns/B total", "ns/segment", "CPU %")
	for round := 0; round < *tcpBenchRounds; round++ {
		for _, tso := range []bool{false, true} {
			c := tcpClient(pair, ctrl, tso)
			c.Streams, c.Bitrate, c.Duration, c.Interval = 1, BitrateUnlimited, *tcpBench, -1
			var r *TCPReport
			c.OnTCPReport = func(x *TCPReport) { r = x }
			ctx, cancel := context.WithTimeout(context.Background(), *tcpBench+30*time.Second)
			_, err := c.Run(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if s := <-reps; s.err != nil {
				t.Fatal(s.err)
			}
			m := r.Sum
			if m.BadChecksum != 0 || m.Late != 0 {
				t.Errorf("tso=%v: %d bad checksums, %d late segments", tso, m.BadChecksum, m.Late)
			}
			res[tso] = append(res[tso], sample{m.SenderBitsPerSec, m.ReceiverBitsPerSec, r.Sender.CPU.User * 1e9 / float64(m.SentBytes),
				r.Sender.CPU.System * 1e9 / float64(m.SentBytes), m.SenderCPUNsPerByte, m.SenderCPUNsPerSegment})
			fmt.Fprintf(&b, "%-8v %10.3f %10.3f %10.3f %10.3f %10.3f %12.0f %8.0f\n", tso, m.SenderBitsPerSec/1e9, m.ReceiverBitsPerSec/1e9,
				r.Sender.CPU.User*1e9/float64(m.SentBytes), r.Sender.CPU.System*1e9/float64(m.SentBytes), m.SenderCPUNsPerByte, m.SenderCPUNsPerSegment, m.SenderCPUPercent)
		}
	}
	med := func(tso bool, f func(sample) float64) float64 {
		var v []float64
		for _, x := range res[tso] {
			v = append(v, f(x))
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	ratio := func(f func(sample) float64) float64 { return med(true, f) / med(false, f) }
	fmt.Fprintf(&b, "medians off: %.3f Gbit/s sent, %.3f received, %.3f ns/byte; on: %.3f, %.3f, %.3f\n",
		med(false, func(x sample) float64 { return x.sent / 1e9 }), med(false, func(x sample) float64 { return x.recv / 1e9 }), med(false, func(x sample) float64 { return x.total }),
		med(true, func(x sample) float64 { return x.sent / 1e9 }), med(true, func(x sample) float64 { return x.recv / 1e9 }), med(true, func(x sample) float64 { return x.total }))
	fmt.Fprintf(&b, "ratio on/off (medians of %d rounds): sender Gbit/s %.2f, receiver Gbit/s %.2f, sender CPU per byte %.2f (user %.2f, system %.2f), per segment %.2f\n",
		len(res[false]), ratio(func(x sample) float64 { return x.sent }), ratio(func(x sample) float64 { return x.recv }),
		ratio(func(x sample) float64 { return x.total }), ratio(func(x sample) float64 { return x.user }), ratio(func(x sample) float64 { return x.sys }),
		ratio(func(x sample) float64 { return x.seg }))
	t.Log("\n" + b.String())
}
