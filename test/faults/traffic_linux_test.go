//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
)

// genPort is the UDP port the generator sends to and the examples filter
// on (-port): the namespaces' own background frames (IPv6 neighbour
// discovery, MLD) never reach the programs' sockets.
const genPort = 9

// pacedGen sends the generator's 64-byte frames from A to B in bursts, a
// few tens of thousands a second: enough to see traffic flow, little
// enough to leave the CPUs to the program under test.
type pacedGen struct {
	g    *trafficgen.Generator
	sent uint64 // frames sent since the last reset, counted in the kernel
}

const burst = 512

func newGen(t *testing.T, pair *netnstest.Pair) *pacedGen {
	t.Helper()
	var g *trafficgen.Generator
	if err := pair.A.Do(func() (err error) {
		g, err = trafficgen.New(trafficgen.Config{
			Ifindex: pair.A.Ifindex,
			Frame: trafficgen.FrameSpec{
				SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC,
				Src: pair.A.IPv4, Dst: pair.B.IPv4,
				DstPort: genPort, Size: 64,
			},
		})
		return err
	}); err != nil {
		t.Fatalf("generator: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return &pacedGen{g: g}
}

// drive sends bursts for d.
func (p *pacedGen) drive(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		p.once(t, ctx)
		time.Sleep(5 * time.Millisecond)
	}
}

// once sends one burst.
func (p *pacedGen) once(t *testing.T, ctx context.Context) {
	t.Helper()
	res, err := p.g.Run(ctx, burst, time.Second)
	p.sent += res.Packets
	if err != nil {
		t.Errorf("generator: %v", err)
	}
}

// counterOn attaches an XDP counter (count and drop) to h's veth.
func counterOn(t *testing.T, h *netnstest.Host) *trafficgen.Counter {
	t.Helper()
	return attachCounter(t, h, trafficgen.Drop)
}

// counterPassOn is counterOn whose frames go on to h's kernel.
func counterPassOn(t *testing.T, h *netnstest.Host) *trafficgen.Counter {
	t.Helper()
	return attachCounter(t, h, trafficgen.Pass)
}

func attachCounter(t *testing.T, h *netnstest.Host, action trafficgen.Action) *trafficgen.Counter {
	t.Helper()
	var c *trafficgen.Counter
	if err := h.Do(func() (err error) {
		c, err = trafficgen.AttachCounter(h.Ifindex, action)
		return err
	}); err != nil {
		t.Fatalf("counter on %s: %v", h.Link, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// background bounds the frames of the namespaces' own (IPv6 neighbour
// discovery, MLD reports when a link comes up) that a counter on A sees
// besides the program's.
const background = 64

// Lines the programs print at exit.
var (
	rxTotalRe   = regexp.MustCompile(`(?m)^total: (\d+) packets received in`)
	rxKernelRe  = regexp.MustCompile(`(?m)^queue \d+ kernel counters: rx_dropped (\d+) \(fill ring empty \d+\), rx_ring_full (\d+)`)
	txSummaryRe = regexp.MustCompile(`(?m)^submitted (\d+) frames: (\d+) sent \(completed by the kernel\), (\d+) not completed`)
	fwdTotalRe  = regexp.MustCompile(`(?m)^total: (\d+) packets forwarded in`)
	echoTotalRe = regexp.MustCompile(`(?m)^received (\d+) datagrams, echoed (\d+) \(\d+ bytes\); dropped (\d+): .*; the kernel dropped (\d+) before the sockets`)
	// A failed test as the bench server reports it: "error: ..." in its
	// report, or one "xdpio: bench server: ..." line on stderr.
	benchErrorRe = regexp.MustCompile(`(?m)^(?:error: |xdpio: bench server: ).*$`)
)

func atoi(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// iperf3JSON is the part of iperf3 -J output the tests read.
type iperf3JSON struct {
	Error string `json:"error"`
	End   struct {
		SumSent struct {
			Packets int64 `json:"packets"`
		} `json:"sum_sent"`
		SumReceived struct {
			Packets     int64 `json:"packets"`
			LostPackets int64 `json:"lost_packets"`
		} `json:"sum_received"`
	} `json:"end"`
}

// iperfRun is an iperf3 UDP client running in A against the bench server.
type iperfRun struct {
	cmd     *exec.Cmd
	out     syncBuffer
	errOut  syncBuffer
	done    chan struct{}
	waitErr error
	end     time.Time
}

// startIperf starts `iperf3 -c B -u -b 100M -t secs -J` in A.
func startIperf(t *testing.T, ctx context.Context, pair *netnstest.Pair, secs int) *iperfRun {
	t.Helper()
	r := &iperfRun{done: make(chan struct{})}
	r.cmd = pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", strconv.Itoa(benchPort),
		"-u", "-b", "100M", "-t", strconv.Itoa(secs), "-J")
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errOut
	r.cmd.WaitDelay = 2 * time.Second
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("iperf3: %v", err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		r.end = time.Now()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// result waits up to d for the client and returns its report: the JSON
// (with the error iperf3 put there, if any) and its exit status. A client
// still running after d is killed, and reported with exit status -1.
func (r *iperfRun) result(t *testing.T, d time.Duration) (iperf3JSON, int) {
	t.Helper()
	var j iperf3JSON
	select {
	case <-r.done:
	case <-time.After(d):
		r.cmd.Process.Kill()
		<-r.done
		j.Error = fmt.Sprintf("client hung: still running %v later, killed", d)
		return j, -1
	}
	if err := json.Unmarshal([]byte(r.out.String()), &j); err != nil {
		j.Error = fmt.Sprintf("unreadable -J output (%v): %.200q %s", err, r.out.String(), strings.TrimSpace(r.errOut.String()))
	}
	return j, r.cmd.ProcessState.ExitCode()
}

// received is what the server received: iperf3's "packets" of the
// receiving end is the highest sequence number seen, lost the gaps.
func (j iperf3JSON) received() int64 {
	return j.End.SumReceived.Packets - j.End.SumReceived.LostPackets
}

// clean checks a report with no fault in it: no error, every datagram in.
func (j iperf3JSON) clean() error {
	sent, got, lost := j.End.SumSent.Packets, j.received(), j.End.SumReceived.LostPackets
	if j.Error != "" {
		return fmt.Errorf("iperf3: %s", j.Error)
	}
	if sent == 0 || got != sent || lost != 0 {
		return fmt.Errorf("iperf3: sent %d, server received %d, lost %d", sent, got, lost)
	}
	return nil
}

func (j iperf3JSON) String() string {
	if j.Error != "" {
		return "error: " + j.Error
	}
	return fmt.Sprintf("sent %d, received %d, lost %d", j.End.SumSent.Packets, j.received(), j.End.SumReceived.LostPackets)
}
