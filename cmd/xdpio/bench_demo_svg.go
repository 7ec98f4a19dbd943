package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/xdpio/xdpio/bench"
)

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

// The chart's layout: three panels side by side under the title, each
// with its title above and its legend below.
const (
	svgW         = 1100
	svgPanelY    = 80  // the panels' titles
	svgTop       = 92  // the plots' top
	svgPlotH     = 250 // the plots' height
	svgLegendY   = svgTop + svgPlotH + 64
	svgLegendRow = 20
)

// svgPanel is a plot area: x from left, w wide, svgTop to svgTop+svgPlotH.
type svgPanel struct{ left, w int }

var (
	svgRates  = svgPanel{70, 460}  // packets/s over time
	svgCPU    = svgPanel{615, 230} // CPU time per packet
	svgQueues = svgPanel{925, 155} // packets per RX queue
)

// frame draws the panel's box, its title and its y axis up to top with
// ticks every step.
func (p svgPanel) frame(b *strings.Builder, title string, top, step float64) {
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", p.left-40, svgPanelY, title)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", p.left, svgTop, p.w, svgPlotH)
	for v := 0.0; v <= top+step/2; v += step {
		y := p.y(v, top)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", p.left+1, y, p.left+p.w-1, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", p.left-5, y+4, siShort(v))
	}
}

// y is where v sits on an axis that ends at top.
func (svgPanel) y(v, top float64) float64 { return svgTop + svgPlotH - svgPlotH*v/top }

// axisTop is a round top for an axis that must hold max, and its step.
func axisTop(max float64, n int) (top, step float64) {
	step = niceStep(max, n)
	return math.Max(math.Ceil(max/step), 1) * step, step
}

// demoSVG draws the demo in three panels: packets/s received (solid) and
// sent (dashed) every interval for each data plane, with the startup
// left out of a verdict shaded; the CPU time per packet of the machine,
// the sending threads and the receiving threads; and the packets each
// AF_XDP receiver's RX queues took. Legends sit under the plots.
func demoSVG(rows []demoRow, queues, length int) []byte {
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	color := func(i int) string { return colors[i%len(colors)] }
	recvRate := func(s bench.IntervalStream) float64 { return float64(s.Packets-s.LostPackets) / s.Seconds }
	sentRate := func(s bench.IntervalStream) float64 { return float64(s.Packets) / s.Seconds }
	var maxPPS, maxT float64
	startup := false
	for _, r := range rows {
		for _, iv := range r.Intervals {
			if demoWhole(iv.Sum) {
				maxPPS, maxT = max(maxPPS, recvRate(iv.Sum)), max(maxT, iv.Sum.End)
			}
		}
		for _, iv := range r.SentIntervals {
			if demoWhole(iv.Sum) {
				maxPPS, maxT = max(maxPPS, sentRate(iv.Sum)), max(maxT, iv.Sum.End)
			}
		}
		startup = startup || r.Steady.StartupExcluded
	}
	maxT = max(math.Round(maxT*4)/4, demoInterval.Seconds())

	// Each legend's last line, for the height.
	bottom := svgLegendY
	var b strings.Builder
	b.WriteString("@HEAD@")
	fmt.Fprintf(&b, `<text x="20" y="26" font-size="16">xdpio bench demo: each data plane at both ends of one veth pair, at full speed</text>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="46" fill="#444">%d queues, %d-byte UDP payloads, %d streams; the client sends from namespace A, the server receives in B; both share this machine's cores</text>`+"\n",
		queues, length, 2*queues)

	// Packets/s over time.
	p := svgRates
	top, step := axisTop(maxPPS, 5)
	xpos := func(t float64) float64 { return float64(p.left) + float64(p.w)*t/maxT }
	if startup {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#f0f0f0"/>`+"\n", p.left, svgTop, xpos(demoStartup)-float64(p.left), svgPlotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#666">startup</text>`+"\n", (float64(p.left)+xpos(demoStartup))/2, svgTop+svgPlotH-6)
	}
	p.frame(&b, "packets/s received (solid) and sent (dashed)", top, step)
	tstep := max(niceStep(maxT, 6), demoInterval.Seconds())
	for t := 0.0; t <= maxT+tstep/2; t += tstep {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xpos(t), svgTop+svgPlotH+16, strconv.FormatFloat(t, 'f', -1, 64))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds (each point: the %s s interval ending there)</text>`+"\n",
		p.left+p.w/2, svgTop+svgPlotH+34, strconv.FormatFloat(demoInterval.Seconds(), 'f', -1, 64))
	line := func(ivs []bench.Interval, rate func(bench.IntervalStream) float64, col, dash string) {
		var pts []string
		for _, iv := range ivs {
			if !demoWhole(iv.Sum) {
				continue
			}
			x, y := xpos(iv.Sum.End), p.y(rate(iv.Sum), top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", x, y, col)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
	}
	for i, r := range rows {
		line(r.Intervals, recvRate, color(i), "")
		line(r.SentIntervals, sentRate, color(i), ` stroke-dasharray="6 4"`)
	}
	y := svgLegendY
	for i, r := range rows {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", p.left, y-4, p.left+22, y-4, color(i))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", p.left+26, y-4, p.left+48, y-4, color(i))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s: received %s/s (solid), sent %s/s (dashed), lost %.1f%%</text>`+"\n",
			p.left+56, y, r.Backend, siShort(math.Round(r.PPS/1e3)*1e3), siShort(math.Round(r.SentPPS/1e3)*1e3), r.lostPercent())
		y += svgLegendRow
	}
	if startup {
		var who []string
		for _, r := range rows {
			if r.Steady.StartupExcluded {
				who = append(who, r.Backend)
			}
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="48" height="12" fill="#f0f0f0" stroke="#ccc"/>`+"\n", p.left, y-11)
		fmt.Fprintf(&b, `<text x="%d" y="%d">startup: left out of the steady state of %s</text>`+"\n", p.left+56, y, strings.Join(who, ", "))
		y += svgLegendRow
	}
	bottom = max(bottom, y)

	// CPU time per packet: the machine's, the sending threads' and the
	// receiving threads', per data plane.
	p = svgCPU
	var maxCPU float64
	for _, r := range rows {
		maxCPU = max(maxCPU, r.CPUPerPacket, r.SendThreadPerPacket, r.RecvThreadPerPacket)
	}
	top, step = axisTop(maxCPU, 5)
	p.frame(&b, "CPU time per packet (ns)", top, step)
	kinds := []struct {
		opacity float64
		what    string
		ns      func(demoRow) float64
	}{
		{1, "all cores, per packet received", func(r demoRow) float64 { return r.CPUPerPacket }},
		{0.55, "sending threads, per packet sent", func(r demoRow) float64 { return r.SendThreadPerPacket }},
		{0.25, "receiving threads, per packet received", func(r demoRow) float64 { return r.RecvThreadPerPacket }},
	}
	groupW := p.w / max(len(rows), 1)
	barW := max((groupW-12)/len(kinds), 2)
	for i, r := range rows {
		gx := p.left + i*groupW + 6
		for k, kind := range kinds {
			v := kind.ns(r)
			by := p.y(v, top)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s" fill-opacity="%.2f" stroke="%s"/>`+"\n",
				gx+k*barW, by, barW-2, float64(svgTop+svgPlotH)-by, color(i), kind.opacity, color(i))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle" font-size="9">%.0f</text>`+"\n", gx+k*barW+(barW-2)/2, by-3, v)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", gx+(groupW-12)/2, svgTop+svgPlotH+16, r.Backend)
	}
	y = svgLegendY
	for _, kind := range kinds {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="#555" fill-opacity="%.2f" stroke="#555"/>`+"\n", p.left-40, y-10, kind.opacity)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`+"\n", p.left-22, y, kind.what)
		y += svgLegendRow
	}
	bottom = max(bottom, y)

	// Packets per RX queue of each AF_XDP receiver.
	p = svgQueues
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
	top, step = axisTop(maxQ, 5)
	p.frame(&b, "packets per RX queue", top, step)
	groupW = p.w / max(nq, 1)
	barW = max((groupW-8)/max(len(withQ), 1), 2)
	for qi := 0; qi < nq; qi++ {
		gx := p.left + qi*groupW + 4
		for k, ri := range withQ {
			if qi >= len(rows[ri].Queues) {
				continue
			}
			by := p.y(float64(rows[ri].Queues[qi].Packets), top)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", gx+k*barW, by, barW-1, float64(svgTop+svgPlotH)-by, color(ri))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">q%d</text>`+"\n", gx+(groupW-8)/2, svgTop+svgPlotH+16, qi)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">AF_XDP RX queue</text>`+"\n", p.left+p.w/2, svgTop+svgPlotH+34)
	y = svgLegendY
	for _, ri := range withQ {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", p.left-40, y-10, color(ri))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`+"\n", p.left-22, y, rows[ri].Backend)
		y += svgLegendRow
	}
	for _, ri := range without {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="%s">%s: no bars (it reads kernel</text>`+"\n", p.left-40, y, color(ri), rows[ri].Backend)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="%s">UDP sockets, not RX queues)</text>`+"\n", p.left-40, y+14, color(ri))
		y += svgLegendRow + 14
	}
	bottom = max(bottom, y)

	h := bottom + 4
	b.WriteString("</svg>\n")
	head := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", svgW, h) +
		fmt.Sprintf(`<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, h)
	return []byte(strings.Replace(b.String(), "@HEAD@", head, 1))
}
