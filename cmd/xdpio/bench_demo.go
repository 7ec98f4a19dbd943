package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/vethpair"
)

// demoRow is one backend's result in the demo table.
type demoRow struct {
	Backend string `json:"backend"`
	// Sender and Receiver say which end runs which data plane: the
	// client sends from namespace A, the server receives in B.
	Sender      string  `json:"sender"`
	Receiver    string  `json:"receiver"`
	SentPackets int64   `json:"sent_packets"`
	RecvPackets int64   `json:"received_packets"`
	LostPackets int64   `json:"lost_packets"`
	Seconds     float64 `json:"seconds"`
	// SentPPS and PPS are packets sent and received per second.
	SentPPS     float64 `json:"sent_packets_per_second"`
	PPS         float64 `json:"packets_per_second"`
	BitsPerSec  float64 `json:"bits_per_second"`
	RatioSocket float64 `json:"ratio_to_socket,omitempty"`
	// CPUPerPacket is the busy time of all cores (both ends run on this
	// machine) per received packet, in nanoseconds: what a packet cost
	// the machine, sender and receiver together. CPURatioSocket is it
	// over the socket backend's.
	CPUPerPacket   float64 `json:"cpu_ns_per_packet"`
	CPURatioSocket float64 `json:"cpu_ratio_to_socket,omitempty"`
	// RecvThreadPerPacket is the receiving threads' CPU time per packet
	// received, SendThreadPerPacket the sending threads' per packet sent
	// (their share of CPUPerPacket; the rest is the kernel's softirq
	// work, the veth's transfer included).
	RecvThreadPerPacket float64 `json:"receiver_thread_ns_per_packet"`
	SendThreadPerPacket float64 `json:"sender_thread_ns_per_packet"`
	// Steady is the receiver's steady state: the run without its first
	// second when that lost measurably more than the rest.
	Steady demoSteady `json:"steady"`
	// Cores is the CPU use of each core during the run (mpstat -P ALL).
	Cores  []bench.CoreCPU    `json:"cores,omitempty"`
	Queues []plane.QueueCount `json:"queues,omitempty"`
	// Intervals are the receiver's, SentIntervals the sender's, every
	// demoInterval.
	Intervals     []bench.Interval `json:"intervals,omitempty"`
	SentIntervals []bench.Interval `json:"sent_intervals,omitempty"`
}

// demoInterval is the reporting period of both ends: 12 points a line
// in a 3 s run.
const demoInterval = 250 * time.Millisecond

// demoStartup is the start of a run, in seconds, that is looked at for a
// startup effect: loss there that the rest of the run does not have. A
// whole second, though such an effect lasts less: a receiver that fell
// behind counts the packets the kernel dropped meanwhile only when it
// reaches those after them, up to a ring's worth later.
const demoStartup = 1.0

// demoSteady is a receiver's steady state, from its intervals: the whole
// run, or the run after its first demoStartup seconds when those lost
// measurably more (a startup effect, left out).
type demoSteady struct {
	// From is where it starts: 0, or demoStartup with the start left out.
	From float64 `json:"from_seconds"`
	// Seconds is how long it lasted, PPS the packets received per second
	// in it, LostPercent the share of the packets sent in it that were
	// lost.
	Seconds     float64 `json:"seconds"`
	PPS         float64 `json:"packets_per_second"`
	LostPercent float64 `json:"lost_percent"`
	// StartupLostPercent is the loss in the first demoStartup seconds,
	// StartupExcluded whether it was left out: it was more than one
	// point above the rest's and more than twice it.
	StartupLostPercent float64 `json:"startup_lost_percent"`
	StartupExcluded    bool    `json:"startup_excluded"`
	// Limit is the end that limits the steady state: "sender" when the
	// receiver took what was sent (less than 1% lost), else "receiver";
	// "" without intervals.
	Limit string `json:"limit"`
}

// demoWindow sums receiver intervals.
type demoWindow struct {
	packets, lost int64 // iperf3's: lost is in packets
	seconds       float64
}

func (w *demoWindow) add(s bench.IntervalStream) {
	w.packets += s.Packets
	w.lost += s.LostPackets
	w.seconds += s.Seconds
}

func (w demoWindow) lostPercent() float64 {
	if w.packets <= 0 {
		return 0
	}
	return 100 * float64(w.lost) / float64(w.packets)
}

// demoWhole says whether an interval is a whole one, not the few
// milliseconds after the last.
func demoWhole(s bench.IntervalStream) bool { return s.Seconds >= demoInterval.Seconds()/2 }

// demoSteadyState finds the steady state in a receiver's intervals.
func demoSteadyState(ivs []bench.Interval) demoSteady {
	var start, rest demoWindow
	for _, iv := range ivs {
		if !demoWhole(iv.Sum) {
			continue
		}
		if iv.Sum.Start < demoStartup-1e-6 {
			start.add(iv.Sum)
		} else {
			rest.add(iv.Sum)
		}
	}
	d := demoSteady{StartupLostPercent: start.lostPercent()}
	use := demoWindow{packets: start.packets + rest.packets, lost: start.lost + rest.lost, seconds: start.seconds + rest.seconds}
	if rest.seconds > 0 && start.lostPercent() > rest.lostPercent()+1 && start.lostPercent() > 2*rest.lostPercent() {
		d.From, d.StartupExcluded, use = demoStartup, true, rest
	}
	d.Seconds, d.LostPercent = use.seconds, use.lostPercent()
	if use.seconds > 0 {
		d.Limit = "receiver"
		if d.LostPercent < 1 {
			d.Limit = "sender"
		}
		d.PPS = float64(use.packets-use.lost) / use.seconds
	}
	return d
}

// demoPlaneWords says what a backend is, for the demo's text.
var demoPlaneWords = map[string]string{
	"xsk":    "AF_XDP (xdpio)",
	"asavie": "AF_XDP (asavie/xdp)",
	"socket": "kernel UDP sockets",
}

func newBenchDemoCmd(g *globals) *cobra.Command {
	var (
		seconds int
		queues  int
		length  int
		plot    string
	)
	c := &cobra.Command{
		Use:   "demo [--duration S] [--queues N] [--length L] [--plot FILE.svg]",
		Short: "Build a veth pair in two namespaces and compare the data planes at full speed: AF_XDP (xdpio) and kernel sockets",
		Long: `Build a veth pair in two namespaces and run the UDP test at full speed with
each data plane at both ends in turn: the client sends from namespace A, the
server receives in B. For each it reports packets sent, received and lost
every half second (the chart and --json: every quarter) and in total, the
CPU time per packet of the sending and the receiving threads and of the
whole machine, and the packets each AF_XDP RX queue took. Its verdict (which
end is the limit) is the steady state's: the run without its first second
when that lost measurably more than the rest, which it then says. Progress
goes to stderr, one line per phase.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if seconds < 1 || seconds > 60 || queues < 1 || queues > 64 || length < 16 || length > 1472 {
				return usagef("demo: --duration 1-60, --queues 1-64, --length 16-1472")
			}
			progress := func(format string, a ...any) { fmt.Fprintf(g.stderr, "demo: "+format+"\n", a...) }
			progress("building a veth pair with %d queues in two namespaces", queues)
			pair, err := vethpair.NewPair(vethpair.Config{Queues: queues})
			if err != nil {
				return fmt.Errorf("bench demo: %w", err)
			}
			defer pair.Close()
			if !g.json {
				writeWrapped(g.stdout, fmt.Sprintf("demo: client in %s (%s) sends to server in %s (%s): %d queues, %d-byte UDP payloads, %d streams at full speed, %d s per data plane",
					pair.A.NS, pair.A.Link, pair.B.NS, pair.B.Link, queues, length, 2*queues, seconds), "  ")
			}
			var rows []demoRow
			for i, backend := range demoBackends {
				progress("[%d/%d] %s at both ends: sending for %d s", i+1, len(demoBackends), demoPlaneWords[backend], seconds)
				row, err := demoRun(cmd.Context(), pair, backend, 15300+i, 2*queues, time.Duration(seconds)*time.Second, length, bench.BitrateUnlimited)
				if err != nil {
					return fmt.Errorf("bench demo, %s backend: %w", backend, err)
				}
				rows = append(rows, row)
				if !g.json {
					writeDemoIntervals(g.stdout, row)
				}
			}
			for i := range rows {
				base := rows[len(rows)-1]
				if base.PPS > 0 {
					rows[i].RatioSocket = rows[i].PPS / base.PPS
				}
				if base.CPUPerPacket > 0 {
					rows[i].CPURatioSocket = rows[i].CPUPerPacket / base.CPUPerPacket
				}
			}
			if plot != "" {
				progress("writing the chart to %s", plot)
				if err := os.WriteFile(plot, demoSVG(rows, queues, length), 0o644); err != nil {
					return fmt.Errorf("bench demo: --plot: %w", err)
				}
			}
			progress("done")
			if g.json {
				return writeJSON(g.stdout, map[string]any{"queues": queues, "length": length, "seconds": seconds, "results": rows, "headline": demoHeadline(rows)})
			}
			writeDemoTable(g.stdout, rows)
			return nil
		},
	}
	c.Flags().IntVar(&seconds, "duration", 3, "seconds per data plane")
	c.Flags().IntVar(&queues, "queues", 2, "queues of the veth pair")
	c.Flags().IntVarP(&length, "length", "l", 64, "UDP payload bytes")
	c.Flags().StringVar(&plot, "plot", "", "write an SVG chart to this file: packets/s sent and received over time per data plane, CPU time per packet, and packets per AF_XDP RX queue")
	return c
}

// demoBackends are the data planes the demo compares, in order; the last
// one is the baseline of the ratios.
var demoBackends = []string{"xsk", "asavie", "socket"}

// demoServerEnv, set in the demo's server process, makes a test binary
// (which is not xdpio) run xdpio's main: the demo runs its server by
// executing its own binary.
const demoServerEnv = "XDPIO_DEMO_SERVER"

// demoRun runs one test with backend at both ends: the server in
// namespace B, in a process of its own (`xdpio bench server -1 -J`, as an
// iperf3 user runs it), the client in this process, sending from A at
// full speed. Two processes, because in one the Go scheduler is shared:
// the sending goroutines, busy without a pause, then hold both Ps for a
// whole 10 ms slice while the receiving goroutine, back from poll with
// frames to take, waits for one; at 150k packets/s a queue's 2048-entry
// fill ring lasts 13 ms, and the socket dropped a third of the frames
// for want of fill entries.
func demoRun(ctx context.Context, pair *vethpair.Pair, backend string, port, streams int, d time.Duration, length int, bitrate uint64) (demoRow, error) {
	row := demoRow{Backend: backend, Sender: backend, Receiver: backend}
	exe, err := os.Executable()
	if err != nil {
		return row, fmt.Errorf("the server process: %w", err)
	}
	args := []string{"--netns", pair.B.NS, "bench", "server", "-1", "--json", "--backend", backend,
		"--port", strconv.Itoa(port), "--bind", pair.B.IPv4.String(),
		"--interval", strconv.FormatFloat(demoInterval.Seconds(), 'f', -1, 64)}
	if backend != "socket" {
		args = append(args, "--interface", pair.B.Link)
	}
	sctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	srv := exec.CommandContext(sctx, exe, args...)
	srv.Env = append(os.Environ(), demoServerEnv+"=1")
	var srvOut, srvErr bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvErr
	if err := srv.Start(); err != nil {
		return row, fmt.Errorf("the server process: %w", err)
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	defer func() {
		cancel()
		<-srvDone
	}()
	// The client's data plane, as `xdpio --netns A bench client -i LINK
	// --backend BACKEND` has it.
	dp, _, err := (&globals{netns: pair.A.NS}).dataPlane(backend, pair.A.Link, nil)
	if err != nil {
		return row, err
	}
	cl := &bench.Client{
		Server:    netip.AddrPortFrom(pair.B.IPv4, uint16(port)),
		UDP:       true, // the demo compares the UDP data planes
		DataPlane: dp,
		Streams:   streams,
		Duration:  d,
		Length:    length,
		Bitrate:   bitrate,
		Interval:  demoInterval,
		// The server process needs a moment to listen: retry a refused
		// connection for up to 10 s.
		Dial: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			for deadline := time.Now().Add(10 * time.Second); ; {
				err = pair.A.Do(func() (err error) {
					c, err = (&net.Dialer{}).DialContext(ctx, network, address)
					return err
				})
				if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) || ctx.Err() != nil {
					return c, err
				}
				select {
				case <-srvDone:
					return nil, fmt.Errorf("the server process ended: %s", strings.TrimSpace(srvErr.String()))
				case <-time.After(20 * time.Millisecond):
				}
			}
		},
	}
	rep, err := cl.Run(ctx)
	if err != nil {
		return row, err
	}
	select {
	case err := <-srvDone:
		srvDone <- err // for the deferred wait
		if err != nil {
			return row, fmt.Errorf("the server process: %v: %s", err, strings.TrimSpace(srvErr.String()))
		}
	case <-time.After(10 * time.Second):
		return row, fmt.Errorf("the server process did not finish")
	}
	srvRep := new(bench.Report)
	if err := json.Unmarshal(srvOut.Bytes(), srvRep); err != nil {
		return row, fmt.Errorf("the server's report: %w", err)
	}
	row.Queues = srvRep.End.RXQueues
	row.Intervals = srvRep.Intervals // what the receiver got, interval by interval
	row.Steady = demoSteadyState(row.Intervals)
	row.SentIntervals = rep.Intervals
	sum := rep.End.SumReceived
	row.SentPackets = rep.End.SumSent.Packets
	row.RecvPackets = sum.Packets - sum.LostPackets
	row.LostPackets = sum.LostPackets
	// Both rates over the sending window: the receiver's own count of
	// seconds runs on while it drains what was in flight when the sender
	// stopped (a tenth of a second), and would make a test without loss
	// look as if it received less than it was sent.
	row.Seconds = rep.End.SumSent.Seconds
	if row.Seconds == 0 {
		row.Seconds = sum.Seconds
	}
	if row.Seconds == 0 {
		row.Seconds = d.Seconds()
	}
	row.PPS = float64(row.RecvPackets) / row.Seconds
	row.SentPPS = float64(row.SentPackets) / row.Seconds
	row.BitsPerSec = row.PPS * float64(length) * 8
	if n := float64(row.RecvPackets); n > 0 {
		if h := srvRep.End.HostCPU; h != nil {
			row.CPUPerPacket = h.BusySeconds * 1e9 / n
			row.RecvThreadPerPacket = h.DataThreadSeconds * 1e9 / n
			row.Cores = h.Cores
		}
	}
	if h := rep.End.HostCPU; h != nil && row.SentPackets > 0 {
		row.SendThreadPerPacket = h.DataThreadSeconds * 1e9 / float64(row.SentPackets)
	}
	return row, nil
}
