package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/internal/vethpair"
)

// demoRow is one backend's result in the demo table.
type demoRow struct {
	Backend     string  `json:"backend"`
	SentPackets int64   `json:"sent_packets"`
	RecvPackets int64   `json:"received_packets"`
	LostPackets int64   `json:"lost_packets"`
	Seconds     float64 `json:"seconds"`
	PPS         float64 `json:"packets_per_second"`
	BitsPerSec  float64 `json:"bits_per_second"`
	RatioSocket float64 `json:"ratio_to_socket,omitempty"`
	// CPUPerPacket is the busy time of all cores (both ends run on this
	// machine) per received packet, in nanoseconds: what a packet cost
	// the machine, sender and receiver together.
	CPUPerPacket float64 `json:"cpu_ns_per_packet"`
	// RecvThreadPerPacket and SendThreadPerPacket are the CPU time of the
	// receiving and sending threads per packet (their share of
	// CPUPerPacket; the rest is the kernel's softirq work).
	RecvThreadPerPacket float64 `json:"receiver_thread_ns_per_packet"`
	SendThreadPerPacket float64 `json:"sender_thread_ns_per_packet"`
	// Cores is the CPU use of each core during the run (mpstat -P ALL).
	Cores     []bench.CoreCPU    `json:"cores,omitempty"`
	Queues    []bench.QueueCount `json:"queues,omitempty"`
	Intervals []bench.Interval   `json:"intervals,omitempty"`
}

func newBenchDemoCmd(g *globals) *cobra.Command {
	var (
		seconds int
		queues  int
		length  int
		plot    string
	)
	c := &cobra.Command{
		Use:   "demo [--duration S] [--queues N] [--length L]",
		Short: "Build a veth pair in two namespaces and compare the data planes at full speed: AF_XDP (xdpio) and kernel sockets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if seconds < 1 || seconds > 60 || queues < 1 || queues > 64 || length < 16 || length > 1472 {
				return usagef("demo: --duration 1-60, --queues 1-64, --length 16-1472")
			}
			pair, err := vethpair.NewPair(vethpair.Config{Queues: queues})
			if err != nil {
				return fmt.Errorf("bench demo: %w", err)
			}
			defer pair.Close()
			if !g.json {
				fmt.Fprintf(g.stdout, "demo: %s (%s) → %s (%s), %d queues, %d-byte UDP payloads, %d streams, %d s per backend\n",
					pair.A.Link, pair.A.NS, pair.B.Link, pair.B.NS, queues, length, 2*queues, seconds)
			}
			var rows []demoRow
			for i, backend := range demoBackends {
				row, err := demoRun(cmd.Context(), g, pair, backend, 15300+i, 2*queues, time.Duration(seconds)*time.Second, length)
				if err != nil {
					return fmt.Errorf("bench demo, %s backend: %w", backend, err)
				}
				rows = append(rows, row)
			}
			for i := range rows {
				if base := rows[len(rows)-1].PPS; base > 0 {
					rows[i].RatioSocket = rows[i].PPS / base
				}
			}
			if plot != "" {
				if err := os.WriteFile(plot, demoSVG(rows, queues, length), 0o644); err != nil {
					return fmt.Errorf("bench demo: --plot: %w", err)
				}
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"queues": queues, "length": length, "seconds": seconds, "results": rows})
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "backend\tsent\treceived\tlost\tpackets/s\tbit/s\t× socket\tCPU ns/pkt\trx thread\ttx thread\tper RX queue\t\n")
			for _, r := range rows {
				pq := "-"
				if len(r.Queues) > 0 {
					pq = ""
					for _, q := range r.Queues {
						pq += fmt.Sprintf("q%d:%d ", q.Queue, q.Packets)
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%.2f\t%.0f\t%.0f\t%.0f\t%s\t\n", r.Backend, r.SentPackets, r.RecvPackets, r.LostPackets, r.PPS, bench.FormatBitrate(r.BitsPerSec), r.RatioSocket, r.CPUPerPacket, r.RecvThreadPerPacket, r.SendThreadPerPacket, pq)
			}
			tw.Flush()
			fmt.Fprintln(g.stdout, "(each backend at both ends; lost = sent but not received, as iperf3 counts it; CPU ns/pkt = busy time of all cores per received packet, rx/tx thread = the receiving/sending threads' share)")
			return nil
		},
	}
	c.Flags().IntVar(&seconds, "duration", 3, "seconds per backend")
	c.Flags().IntVar(&queues, "queues", 2, "queues of the veth pair")
	c.Flags().IntVarP(&length, "length", "l", 64, "UDP payload bytes")
	c.Flags().StringVar(&plot, "plot", "", "write an SVG chart (received packets/s over time per receiver, packets per queue) to this file")
	return c
}

// demoSVG draws the demo: received packets/s per second for each receiver
// as lines, and the AF_XDP receiver's packets per RX queue as bars.
func demoSVG(rows []demoRow, queues, length int) []byte {
	const w, h, left, top, plotW, plotH = 780, 420, 70, 50, 420, 300
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	// Whole seconds only: the tail of the last second is too short to
	// mean a rate. Received = datagrams less iperf3's losses.
	rate := func(iv bench.Interval) (float64, bool) {
		if iv.Sum.Seconds < 0.5 {
			return 0, false
		}
		return float64(iv.Sum.Packets-iv.Sum.LostPackets) / iv.Sum.Seconds, true
	}
	var maxPPS, maxT float64
	for _, r := range rows {
		for _, iv := range r.Intervals {
			if v, ok := rate(iv); ok {
				maxPPS = max(maxPPS, v)
				maxT = max(maxT, iv.Sum.End)
			}
		}
	}
	maxPPS = max(maxPPS*1.15, 1)
	maxT = max(maxT, 1)
	si := func(v float64) string {
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2gM", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.3gk", v/1e3)
		}
		return fmt.Sprintf("%.0f", v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">xdpio bench demo: %d queues, %d-byte UDP payloads, each backend at both ends</text>`+"\n", left, queues, length)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	for i := 0; i <= 4; i++ {
		y := top + plotH - plotH*i/4
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-5, y+4, si(maxPPS*float64(i)/4))
	}
	for t := 0; t <= int(maxT); t++ {
		x := left + int(float64(plotW)*float64(t)/maxT)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%d</text>`+"\n", x, top+plotH+15, t)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds</text>`+"\n", left+plotW/2, top+plotH+32)
	fmt.Fprintf(&b, `<text x="15" y="%d" transform="rotate(-90 15 %d)" text-anchor="middle">received packets/s</text>`+"\n", top+plotH/2, top+plotH/2)
	for i, r := range rows {
		col := colors[i%len(colors)]
		var pts []string
		for _, iv := range r.Intervals {
			v, ok := rate(iv)
			if !ok {
				continue
			}
			mid := (iv.Sum.Start + iv.Sum.End) / 2
			x := left + int(float64(plotW)*mid/maxT)
			y := top + plotH - int(float64(plotH)*v/maxPPS)
			pts = append(pts, fmt.Sprintf("%d,%d", x, y))
			fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="3" fill="%s"/>`+"\n", x, y, col)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s receiver: %s packets/s on average</text>`+"\n", left+10, top+18+16*i, col, r.Backend, si(r.PPS))
	}
	// Packets per RX queue of each AF_XDP receiver, side by side.
	bx := left + plotW + 60
	var maxQ uint64 = 1
	nq := 0
	for _, r := range rows {
		for _, q := range r.Queues {
			maxQ = max(maxQ, q.Packets)
		}
		nq = max(nq, len(r.Queues))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">AF_XDP packets per RX queue</text>`+"\n", bx, top-8)
	groupW := 200 / max(nq, 1)
	var withQ []int
	for i, r := range rows {
		if len(r.Queues) > 0 {
			withQ = append(withQ, i)
		}
	}
	barW := max((groupW-8)/max(len(withQ), 1), 2)
	for qi := 0; qi < nq; qi++ {
		gx := bx + qi*groupW
		for k, ri := range withQ {
			if qi >= len(rows[ri].Queues) {
				continue
			}
			q := rows[ri].Queues[qi]
			bh := int(float64(plotH-20) * float64(q.Packets) / float64(maxQ))
			x := gx + k*barW
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x, top+plotH-bh, barW-1, bh, colors[ri%len(colors)])
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2, top+plotH-bh-4, si(float64(q.Packets)))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">q%d</text>`+"\n", gx+(groupW-8)/2, top+plotH+15, qi)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// demoBackends are the data planes the demo compares, in order; the last
// one is the baseline of the ratios.
var demoBackends = []string{"xsk", "asavie", "socket"}

// demoPlane returns backend's data plane on host h.
func demoPlane(backend string, h *vethpair.Host, onClose func([]bench.QueueCount)) bench.DataPlane {
	switch backend {
	case "xsk":
		return &bench.XSKDataPlane{Iface: h.Link, Do: h.Do, OnClose: onClose}
	case "asavie":
		return &bench.AsavieDataPlane{Iface: h.Link, Do: h.Do, OnClose: onClose}
	}
	return &bench.SocketDataPlane{Do: h.Do}
}

// demoRun runs one test with backend at both ends: the server in
// namespace B, the client sending from A at full speed.
func demoRun(ctx context.Context, g *globals, pair *vethpair.Pair, backend string, port, streams int, d time.Duration, length int) (demoRow, error) {
	row := demoRow{Backend: backend}
	dp := demoPlane(backend, pair.B, func(qs []bench.QueueCount) { row.Queues = qs })
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(pair.B.IPv4.String(), strconv.Itoa(port)))
		return err
	}); err != nil {
		return row, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srvDone := make(chan error, 1)
	var srvRep *bench.Report
	s := &bench.Server{DataPlane: dp, OnReport: func(r *bench.Report, err error) {
		srvRep = r
		srvDone <- err
		cancel()
	}}
	go s.Serve(sctx, ln)
	cl := &bench.Client{
		Server:    netip.AddrPortFrom(pair.B.IPv4, uint16(port)),
		DataPlane: demoPlane(backend, pair.A, nil),
		Streams:   streams,
		Duration:  d,
		Length:    length,
		Bitrate:   bench.BitrateUnlimited,
		Dial: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			err = pair.A.Do(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}
	if !g.json {
		fmt.Fprintf(g.stdout, "%s receiver:\n", backend)
		fmt.Fprint(g.stdout, bench.IntervalHeader)
		cl.OnInterval = func(iv bench.Interval) {
			s := iv.Sum
			if s.Seconds < 0.5 {
				return // the tail of the last second
			}
			fmt.Fprintf(g.stdout, "  %5.1f s  sent %9.0f packets/s  %s\n", s.End, float64(s.Packets)/max(s.Seconds, 1e-9), bench.FormatBitrate(s.BitsPerSecond))
		}
	}
	rep, err := cl.Run(ctx)
	if err != nil {
		return row, err
	}
	select {
	case err := <-srvDone:
		if err != nil {
			return row, err
		}
	case <-time.After(10 * time.Second):
		return row, fmt.Errorf("server did not finish")
	}
	if srvRep == nil {
		return row, fmt.Errorf("server sent no report")
	}
	row.Intervals = srvRep.Intervals // what the receiver got, second by second
	sum := rep.End.SumReceived
	row.SentPackets = rep.End.SumSent.Packets
	row.RecvPackets = sum.Packets - sum.LostPackets
	row.LostPackets = sum.LostPackets
	row.Seconds = sum.Seconds
	if row.Seconds == 0 {
		row.Seconds = d.Seconds()
	}
	row.PPS = float64(row.RecvPackets) / row.Seconds
	row.BitsPerSec = row.PPS * float64(length) * 8
	if n := float64(row.RecvPackets); n > 0 {
		if h := srvRep.End.HostCPU; h != nil {
			row.CPUPerPacket = h.BusySeconds * 1e9 / n
			row.RecvThreadPerPacket = h.DataThreadSeconds * 1e9 / n
			row.Cores = h.Cores
		}
		if h := rep.End.HostCPU; h != nil {
			row.SendThreadPerPacket = h.DataThreadSeconds * 1e9 / n
		}
	}
	return row, nil
}
