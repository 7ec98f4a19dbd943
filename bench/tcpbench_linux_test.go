package bench

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

var tcpBench = flag.Duration("tcpbench", 0, "run TestTCPTSOCompare: TCP mode with software TSO off and on, each round this long (whole seconds)")

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
	type sum struct {
		sent, recv, user, sys, segs float64
		n                           int
	}
	res := map[bool]*sum{false: {}, true: {}}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %10s %10s %10s %10s %10s %12s %8s\n", "tso", "send Gb/s", "recv Gb/s", "ns/B user", "ns/B sys", "ns/B total", "ns/segment", "CPU %")
	for round := 0; round < 3; round++ {
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
			x := res[tso]
			x.sent += m.SenderBitsPerSec
			x.recv += m.ReceiverBitsPerSec
			x.user += r.Sender.CPU.User * 1e9 / float64(m.SentBytes)
			x.sys += r.Sender.CPU.System * 1e9 / float64(m.SentBytes)
			x.segs += m.SenderCPUNsPerSegment
			x.n++
			fmt.Fprintf(&b, "%-8v %10.3f %10.3f %10.3f %10.3f %10.3f %12.0f %8.0f\n", tso, m.SenderBitsPerSec/1e9, m.ReceiverBitsPerSec/1e9,
				r.Sender.CPU.User*1e9/float64(m.SentBytes), r.Sender.CPU.System*1e9/float64(m.SentBytes), m.SenderCPUNsPerByte, m.SenderCPUNsPerSegment, m.SenderCPUPercent)
		}
	}
	off, on := res[false], res[true]
	fmt.Fprintf(&b, "ratio on/off (means of %d rounds): sender Gbit/s %.2f, receiver Gbit/s %.2f, sender CPU/byte user %.2f, system %.2f, total %.2f\n",
		off.n, on.sent/off.sent, on.recv/off.recv, on.user/off.user, on.sys/off.sys, (on.user+on.sys)/(off.user+off.sys))
	t.Log("\n" + b.String())
}
