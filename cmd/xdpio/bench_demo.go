package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
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
	// the machine, sender and receiver together.
	CPUPerPacket float64 `json:"cpu_ns_per_packet"`
	// RecvThreadPerPacket is the receiving threads' CPU time per packet
	// received, SendThreadPerPacket the sending threads' per packet sent
	// (their share of CPUPerPacket; the rest is the kernel's softirq
	// work, the veth's transfer included).
	RecvThreadPerPacket float64 `json:"receiver_thread_ns_per_packet"`
	SendThreadPerPacket float64 `json:"sender_thread_ns_per_packet"`
	// Cores is the CPU use of each core during the run (mpstat -P ALL).
	Cores  []bench.CoreCPU    `json:"cores,omitempty"`
	Queues []plane.QueueCount `json:"queues,omitempty"`
	// Intervals are the receiver's, SentIntervals the sender's, second
	// by second.
	Intervals     []bench.Interval `json:"intervals,omitempty"`
	SentIntervals []bench.Interval `json:"sent_intervals,omitempty"`
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
server receives in B. For each it reports packets sent, received and lost,
the CPU time per packet of the sending and the receiving threads and of the
whole machine, and the packets each AF_XDP RX queue took. Progress goes to
stderr, one line per phase.`,
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
				fmt.Fprintf(g.stdout, "demo: client in %s (%s) sends to server in %s (%s): %d queues, %d-byte UDP payloads, %d streams at full speed, %d s per data plane\n",
					pair.A.NS, pair.A.Link, pair.B.NS, pair.B.Link, queues, length, 2*queues, seconds)
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
				if base := rows[len(rows)-1].PPS; base > 0 {
					rows[i].RatioSocket = rows[i].PPS / base
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
	c.Flags().StringVar(&plot, "plot", "", "write an SVG chart to this file: packets/s sent and received over time per data plane, and packets per AF_XDP RX queue")
	return c
}

// writeDemoIntervals prints a run's seconds under a header whose columns
// they fill: what the sender sent and the receiver received.
func writeDemoIntervals(w io.Writer, r demoRow) {
	fmt.Fprintf(w, "\n%s at both ends (sender: %s; receiver: %s)\n", r.Backend, demoPlaneWords[r.Backend], demoPlaneWords[r.Backend])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "interval\tsent pkts/s\treceived pkts/s\tlost pkts/s\t\n")
	for i, iv := range r.Intervals {
		s := iv.Sum
		if s.Seconds < 0.5 {
			continue // the tail after the last second
		}
		recv := float64(s.Packets-s.LostPackets) / s.Seconds
		sent := "-"
		if i < len(r.SentIntervals) && r.SentIntervals[i].Sum.Seconds > 0 {
			sent = fmt.Sprintf("%.0f", float64(r.SentIntervals[i].Sum.Packets)/r.SentIntervals[i].Sum.Seconds)
		}
		fmt.Fprintf(tw, "%.0f-%.0f s\t%s\t%.0f\t%.0f\t\n", s.Start, s.End, sent, recv, float64(s.LostPackets)/s.Seconds)
	}
	tw.Flush()
}

// writeDemoTable prints the comparison: per data plane, what was sent,
// received and lost, what a packet cost at each end, and the headline.
func writeDemoTable(w io.Writer, rows []demoRow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "both ends\tsent\treceived\tlost\tsent/s\treceived/s\t× socket\tsender ns/pkt\treceiver ns/pkt\tmachine ns/pkt\tper RX queue\t\n")
	for _, r := range rows {
		pq := "- (no AF_XDP queues)"
		if len(r.Queues) > 0 {
			var qs []string
			for _, q := range r.Queues {
				qs = append(qs, fmt.Sprintf("q%d:%d", q.Queue, q.Packets))
			}
			pq = strings.Join(qs, " ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d (%.1f%%)\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t%s\t\n", r.Backend, r.SentPackets, r.RecvPackets, r.LostPackets,
			100*float64(r.LostPackets)/max(float64(r.SentPackets), 1), r.SentPPS, r.PPS, r.RatioSocket, r.SendThreadPerPacket, r.RecvThreadPerPacket, r.CPUPerPacket, pq)
	}
	tw.Flush()
	fmt.Fprintln(w, "(lost: sent but not received, as iperf3 counts it; per second, lost is the gaps in the sequence numbers the receiver saw in that second, so sent − received differs from it by what was in flight at the second's edges; rates are over the sending window; sender/receiver ns/pkt: CPU time of the sending threads per packet sent and of the receiving threads per packet received; machine ns/pkt: busy time of all cores per packet received, the kernel's softirq work included; both ends share this machine's cores)")
	for _, l := range demoHeadline(rows) {
		fmt.Fprintln(w, l)
	}
}

// demoHeadline says where the difference between xsk and the kernel
// socket comes from: the receiver's rate, what the sender managed, the
// losses and the per-packet cost at each end; and which end was the
// limit.
func demoHeadline(rows []demoRow) []string {
	var x, s *demoRow
	for i := range rows {
		switch rows[i].Backend {
		case "xsk":
			x = &rows[i]
		case "socket":
			s = &rows[i]
		}
	}
	if x == nil || s == nil || s.PPS == 0 || s.SentPPS == 0 {
		return nil
	}
	lost := func(r *demoRow) float64 { return 100 * float64(r.LostPackets) / max(float64(r.SentPackets), 1) }
	limit := func(r *demoRow) string {
		if lost(r) < 1 {
			if r.Backend == "xsk" {
				return "the sender is the limit: the receiver took all it sent (on veth the sending thread's system calls also run the receiving side's XDP and copy)"
			}
			return "the sender is the limit: the receiver took all it sent"
		}
		return fmt.Sprintf("the receiver is the limit: it lost %.1f%% of what was sent", lost(r))
	}
	return []string{
		fmt.Sprintf("headline: xsk received %.2f× the kernel socket's packets/s (%.0f vs %.0f).", x.PPS/s.PPS, x.PPS, s.PPS),
		fmt.Sprintf("  sending: xsk's sender sent %.2f× as many (%.0f vs %.0f packets/s) at %.0f vs %.0f ns of CPU per packet.", x.SentPPS/s.SentPPS, x.SentPPS, s.SentPPS, x.SendThreadPerPacket, s.SendThreadPerPacket),
		fmt.Sprintf("  receiving: %.0f vs %.0f ns of CPU per packet in the receiving thread; xsk lost %.1f%%, the socket %.1f%%.", x.RecvThreadPerPacket, s.RecvThreadPerPacket, lost(x), lost(s)),
		fmt.Sprintf("  xsk: %s; socket: %s.", limit(x), limit(s)),
	}
}

// niceStep is a round tick step (1, 2 or 5 × 10^k) that cuts max into
// about n steps.
func niceStep(max float64, n int) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// siShort writes a count with k/M prefixes, for chart ticks and labels.
func siShort(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// demoSVG draws the demo: packets/s received (solid) and sent (dashed)
// each second for each data plane, points at the end of each interval,
// and the packets each AF_XDP receiver's RX queues took as bars with
// their own axis. Legends sit outside the plots.
func demoSVG(rows []demoRow, queues, length int) []byte {
	const w, h = 940, 520
	const left, top, plotW, plotH = 80, 50, 440, 300
	const bx, bw = 640, 220 // the bar chart's plot area
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	whole := func(iv bench.Interval) bool { return iv.Sum.Seconds >= 0.5 }
	recvRate := func(iv bench.Interval) float64 {
		return float64(iv.Sum.Packets-iv.Sum.LostPackets) / iv.Sum.Seconds
	}
	sentRate := func(iv bench.Interval) float64 { return float64(iv.Sum.Packets) / iv.Sum.Seconds }
	var maxPPS, maxT float64
	for _, r := range rows {
		for _, iv := range r.Intervals {
			if whole(iv) {
				maxPPS, maxT = max(maxPPS, recvRate(iv)), max(maxT, iv.Sum.End)
			}
		}
		for _, iv := range r.SentIntervals {
			if whole(iv) {
				maxPPS, maxT = max(maxPPS, sentRate(iv)), max(maxT, iv.Sum.End)
			}
		}
	}
	maxT = max(math.Round(maxT), 1)
	step := niceStep(maxPPS, 5)
	top1 := max(math.Ceil(maxPPS/step), 1) * step
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">xdpio bench demo: %d queues, %d-byte UDP payloads; each data plane at both ends (client sends in A, server receives in B)</text>`+"\n", 20, queues, length)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	ypos := func(v, topV float64) float64 { return top + plotH - plotH*v/topV }
	for v := 0.0; v <= top1+step/2; v += step {
		y := ypos(v, top1)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", left, y, left+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y+4, siShort(v))
	}
	xpos := func(t float64) float64 { return left + plotW*t/maxT }
	tstep := max(niceStep(maxT, 6), 1) // whole seconds: the intervals' ends
	for t := 0.0; t <= maxT+tstep/2; t += tstep {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xpos(t), top+plotH+15, siShort(t))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds (each point: the interval ending there)</text>`+"\n", left+plotW/2, top+plotH+32)
	fmt.Fprintf(&b, `<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">packets/s</text>`+"\n", top+plotH/2, top+plotH/2)
	line := func(ivs []bench.Interval, rate func(bench.Interval) float64, col, dash string) {
		var pts []string
		for _, iv := range ivs {
			if !whole(iv) {
				continue
			}
			x, y := xpos(iv.Sum.End), ypos(rate(iv), top1)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, col)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
	}
	for i, r := range rows {
		col := colors[i%len(colors)]
		line(r.Intervals, recvRate, col, "")
		line(r.SentIntervals, sentRate, col, ` stroke-dasharray="6 4"`)
	}
	// The legend, under the plots.
	ly := top + plotH + 60
	for i, r := range rows {
		col := colors[i%len(colors)]
		y := ly + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left, y-4, left+25, y-4, col)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", left+30, y-4, left+55, y-4, col)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s at both ends: received %s/s (solid), sent %s/s (dashed), lost %.1f%%</text>`+"\n",
			left+62, y, r.Backend, siShort(math.Round(r.PPS/1e3)*1e3), siShort(math.Round(r.SentPPS/1e3)*1e3), 100*float64(r.LostPackets)/max(float64(r.SentPackets), 1))
	}
	// Packets per RX queue of each AF_XDP receiver, with their own axis.
	var maxQ float64 = 1
	nq := 0
	var withQ, without []int
	for i, r := range rows {
		for _, q := range r.Queues {
			maxQ = max(maxQ, float64(q.Packets))
		}
		nq = max(nq, len(r.Queues))
		if len(r.Queues) > 0 {
			withQ = append(withQ, i)
		} else {
			without = append(without, i)
		}
	}
	qstep := niceStep(maxQ, 5)
	qtop := max(math.Ceil(maxQ/qstep), 1) * qstep
	fmt.Fprintf(&b, `<text x="%d" y="%d">packets received per RX queue (AF_XDP)</text>`+"\n", bx-40, top-16)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", bx, top, bw, plotH)
	for v := 0.0; v <= qtop+qstep/2; v += qstep {
		y := ypos(v, qtop)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", bx-5, y+4, siShort(v))
	}
	groupW := bw / max(nq, 1)
	barW := max((groupW-8)/max(len(withQ), 1), 2)
	for qi := 0; qi < nq; qi++ {
		gx := bx + qi*groupW + 4
		for k, ri := range withQ {
			if qi >= len(rows[ri].Queues) {
				continue
			}
			q := rows[ri].Queues[qi]
			y := ypos(float64(q.Packets), qtop)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", gx+k*barW, y, barW-1, float64(top+plotH)-y, colors[ri%len(colors)])
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">q%d</text>`+"\n", gx+(groupW-8)/2, top+plotH+15, qi)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">RX queue</text>`+"\n", bx+bw/2, top+plotH+32)
	for k, ri := range withQ {
		y := ly + 18*k
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", bx, y-10, colors[ri%len(colors)])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", bx+18, y, rows[ri].Backend)
	}
	for k, ri := range without {
		y := ly + 18*(len(withQ)+k)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s: no bars, it reads kernel UDP</text>`+"\n", bx, y, colors[ri%len(colors)], rows[ri].Backend)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">sockets (one per stream), not RX queues</text>`+"\n", bx, y+14, colors[ri%len(colors)])
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
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
		"--port", strconv.Itoa(port), "--bind", pair.B.IPv4.String(), "--interval", "1"}
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
		DataPlane: dp,
		Streams:   streams,
		Duration:  d,
		Length:    length,
		Bitrate:   bitrate,
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
	row.Intervals = srvRep.Intervals // what the receiver got, second by second
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
