package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// demoWidth is the widest line the demo's text prints.
const demoWidth = 100

// wrap cuts s into lines of at most width columns at spaces: the first
// keeps s's leading spaces, the others start with indent. A word longer
// than a line is left whole.
func wrap(s string, width int, indent string) []string {
	var lines []string
	lead := s[:len(s)-len(strings.TrimLeft(s, " "))] // the first line keeps its indent
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = lead + w
		case len([]rune(line))+1+len([]rune(w)) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = indent + w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// writeWrapped prints s wrapped to demoWidth.
func writeWrapped(w io.Writer, s, indent string) {
	for _, l := range wrap(s, demoWidth, indent) {
		fmt.Fprintln(w, l)
	}
}

// demoTextStep is the span of one line of a run's intervals in the text:
// two of the chart's points.
const demoTextStep = 0.5

// writeDemoIntervals prints a run's intervals, half a second a line,
// under a header whose columns they fill: what the sender sent and the
// receiver received and lost.
func writeDemoIntervals(w io.Writer, r demoRow) {
	fmt.Fprintf(w, "\n%s at both ends (sender: %s; receiver: %s)\n", r.Backend, demoPlaneWords[r.Backend], demoPlaneWords[r.Backend])
	type span struct {
		recv, sent demoWindow
		sentPkts   int64
	}
	var spans []span
	at := func(start float64) *span {
		k := int(math.Floor(start/demoTextStep + 1e-6))
		for len(spans) <= k {
			spans = append(spans, span{})
		}
		return &spans[k]
	}
	for _, iv := range r.Intervals {
		if demoWhole(iv.Sum) {
			at(iv.Sum.Start).recv.add(iv.Sum)
		}
	}
	for _, iv := range r.SentIntervals {
		if demoWhole(iv.Sum) {
			sp := at(iv.Sum.Start)
			sp.sent.seconds += iv.Sum.Seconds
			sp.sentPkts += iv.Sum.Packets
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "interval\tsent pkts/s\treceived pkts/s\tlost pkts/s\tlost\t\n")
	for k, sp := range spans {
		if sp.recv.seconds == 0 {
			continue
		}
		sent := "-"
		if sp.sent.seconds > 0 {
			sent = fmt.Sprintf("%.0f", float64(sp.sentPkts)/sp.sent.seconds)
		}
		from := float64(k) * demoTextStep
		fmt.Fprintf(tw, "%.1f-%.1f s\t%s\t%.0f\t%.0f\t%.1f%%\t\n", from, from+demoTextStep, sent,
			float64(sp.recv.packets-sp.recv.lost)/sp.recv.seconds, float64(sp.recv.lost)/sp.recv.seconds, sp.recv.lostPercent())
	}
	tw.Flush()
}

// demoNotes says how the table counts, under it.
const demoNotes = "notes: lost is what was sent but not received, as iperf3 counts it; in an interval, " +
	"lost is the gaps in the sequence numbers the receiver saw then, so sent − received differs " +
	"from it by what was in flight at the interval's edges. Rates are over the sending window. " +
	"Sender and receiver ns/pkt: CPU time of the sending threads per packet sent and of the " +
	"receiving threads per packet received; machine ns/pkt: busy time of all cores per packet " +
	"received, the kernel's softirq work included; both ends share this machine's cores. " +
	"× socket: over the kernel socket's figure."

// lostPercent is the share of what r sent that it lost.
func (r *demoRow) lostPercent() float64 {
	return 100 * float64(r.LostPackets) / max(float64(r.SentPackets), 1)
}

// writeDemoTable prints the comparison: per data plane, what was sent,
// received and lost; what a packet cost at each end and the machine;
// what each RX queue took; the notes and the headline.
func writeDemoTable(w io.Writer, rows []demoRow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "both ends\tsent\treceived\tlost\tlost %%\tsent/s\treceived/s\t× socket\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t%.0f\t%.0f\t%.2f\t\n", r.Backend, r.SentPackets, r.RecvPackets, r.LostPackets,
			r.lostPercent(), r.SentPPS, r.PPS, r.RatioSocket)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "both ends\tsender ns/pkt\treceiver ns/pkt\tmachine ns/pkt\t× socket\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t\n", r.Backend, r.SendThreadPerPacket, r.RecvThreadPerPacket, r.CPUPerPacket, r.CPURatioSocket)
	}
	tw.Flush()
	var qs []string
	for _, r := range rows {
		if len(r.Queues) == 0 {
			qs = append(qs, r.Backend+": none (kernel UDP sockets, not RX queues)")
			continue
		}
		var each []string
		for _, q := range r.Queues {
			each = append(each, fmt.Sprintf("q%d %d", q.Queue, q.Packets))
		}
		qs = append(qs, r.Backend+": "+strings.Join(each, ", "))
	}
	fmt.Fprintln(w)
	writeWrapped(w, "packets per RX queue: "+strings.Join(qs, "; "), "  ")
	fmt.Fprintln(w)
	writeWrapped(w, demoNotes, "  ")
	fmt.Fprintln(w)
	for i, l := range demoHeadline(rows) {
		indent := "    "
		if i == 0 {
			indent = "  "
		}
		writeWrapped(w, l, indent)
	}
}

// demoHeadline says where the difference between xsk and the kernel
// socket comes from: the receiver's rate and the machine's CPU per
// packet, what the sender managed, the losses and the per-packet cost at
// each end; and, from the steady state, which end was the limit. Every
// figure is the run's.
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
	lines := []string{
		fmt.Sprintf("headline: xsk received %.2f× the kernel socket's packets/s (%.0f vs %.0f) at %.2f× the machine's CPU time per packet (%.0f vs %.0f ns, all cores).",
			x.PPS/s.PPS, x.PPS, s.PPS, x.CPUPerPacket/max(s.CPUPerPacket, 1), x.CPUPerPacket, s.CPUPerPacket),
		fmt.Sprintf("  sending: xsk's sender sent %.2f× as many (%.0f vs %.0f packets/s) at %.0f vs %.0f ns of CPU per packet in the sending threads.",
			x.SentPPS/s.SentPPS, x.SentPPS, s.SentPPS, x.SendThreadPerPacket, s.SendThreadPerPacket),
		fmt.Sprintf("  receiving: %.0f vs %.0f ns of CPU per packet in the receiving threads; over the whole run xsk lost %.1f%%, the socket %.1f%%.",
			x.RecvThreadPerPacket, s.RecvThreadPerPacket, x.lostPercent(), s.lostPercent()),
	}
	for _, r := range []*demoRow{x, s} {
		lines = append(lines, "  "+demoVerdict(r))
	}
	return lines
}

// demoVerdict says which end limits r in its steady state, and what the
// steady state is.
func demoVerdict(r *demoRow) string {
	st := r.Steady
	scope := fmt.Sprintf("over the whole run (its first %g s lost %.1f%%, not measurably more than the rest)", demoStartup, st.StartupLostPercent)
	if st.StartupExcluded {
		scope = fmt.Sprintf("after the first %g s (which lost %.1f%%, more than the rest: a startup effect, left out)", demoStartup, st.StartupLostPercent)
	}
	limit := fmt.Sprintf("the receiver is the limit: it lost %.1f%% of what was sent", st.LostPercent)
	if st.Limit == "sender" {
		limit = fmt.Sprintf("the sender is the limit: the receiver took what it sent (%.1f%% lost)", st.LostPercent)
		if r.Backend == "xsk" {
			limit += "; on veth the sending thread's system calls also run the receiving side's XDP and copy"
		}
	}
	return fmt.Sprintf("%s, steady state %s: %s.", r.Backend, scope, limit)
}
