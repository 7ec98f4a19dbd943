package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// demoIntervals are 12 quarter-second intervals and a 4 ms tail, with
// pkts packets each, of which those of the first second lose lostStart
// and the others lost.
func demoIntervals(pkts, lostStart, lost int64) []bench.Interval {
	var ivs []bench.Interval
	for i := 0; i < 12; i++ {
		l := lost
		if i < 4 {
			l = lostStart
		}
		start := float64(i) * 0.25
		ivs = append(ivs, bench.Interval{Sum: bench.IntervalStream{Start: start, End: start + 0.25, Seconds: 0.25, Packets: pkts, LostPackets: l}})
	}
	return append(ivs, bench.Interval{Sum: bench.IntervalStream{Start: 3, End: 3.004, Seconds: 0.004, Packets: 999, LostPackets: 999}})
}

// The steady state leaves the first second out only when it lost
// measurably more than the rest (over a point more, and over twice as
// much), and the tail after the last whole interval never counts.
func TestDemoSteadyState(t *testing.T) {
	for _, c := range []struct {
		name                  string
		lostStart, lost       int64
		want                  demoSteady
		wantPPS, wantSeconds  float64
		wantStartup, wantLost float64
	}{
		{name: "startup loss", lostStart: 200, lost: 0,
			want: demoSteady{From: 1, StartupExcluded: true, Limit: "sender"}, wantPPS: 4000, wantSeconds: 2, wantStartup: 20, wantLost: 0},
		{name: "even loss", lostStart: 50, lost: 50,
			want: demoSteady{Limit: "receiver"}, wantPPS: 3800, wantSeconds: 3, wantStartup: 5, wantLost: 5},
		{name: "startup loss within a point", lostStart: 15, lost: 10,
			want: demoSteady{Limit: "receiver"}, wantPPS: (12*1000 - 4*15 - 8*10) / 3.0, wantSeconds: 3, wantStartup: 1.5, wantLost: 100 * float64(4*15+8*10) / 12000},
		{name: "startup loss not twice the rest", lostStart: 150, lost: 80,
			want: demoSteady{Limit: "receiver"}, wantPPS: (12*1000 - 4*150 - 8*80) / 3.0, wantSeconds: 3, wantStartup: 15, wantLost: 100 * float64(4*150+8*80) / 12000},
		{name: "no loss", want: demoSteady{Limit: "sender"}, wantPPS: 4000, wantSeconds: 3},
		{name: "under a point", lostStart: 9, lost: 9, want: demoSteady{Limit: "sender"}, wantPPS: (12*1000 - 12*9) / 3.0, wantSeconds: 3, wantStartup: 0.9, wantLost: 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := demoSteadyState(demoIntervals(1000, c.lostStart, c.lost))
			c.want.PPS, c.want.Seconds, c.want.StartupLostPercent, c.want.LostPercent = c.wantPPS, c.wantSeconds, c.wantStartup, c.wantLost
			if diff := cmp.Diff(c.want, got, cmp.Comparer(func(a, b float64) bool { return a == b || (a-b)*(a-b) < 1e-12 })); diff != "" {
				t.Errorf("steady state (-want +got):\n%s", diff)
			}
		})
	}
	if got := demoSteadyState(nil); got != (demoSteady{}) {
		t.Errorf("no intervals: %+v", got)
	}
}

// wrap keeps every word, in order, within the width but for a word
// longer than a line, indents the lines after the first and keeps the
// first's indent.
func TestWrap(t *testing.T) {
	s := "  headline: xsk received 2.45× the kernel socket's packets/s (695595 vs 283658) at 0.41× the machine's CPU " +
		strings.Repeat("x", 120) + " time per packet (3031 vs 7433 ns, all cores)."
	lines := wrap(s, 40, "    ")
	if !strings.HasPrefix(lines[0], "  headline:") {
		t.Errorf("first line %q lost its indent", lines[0])
	}
	for i, l := range lines {
		if i > 0 && !strings.HasPrefix(l, "    ") {
			t.Errorf("line %d %q not indented", i, l)
		}
		if n := utf8.RuneCountInString(l); n > 40 && !strings.Contains(l, strings.Repeat("x", 120)) {
			t.Errorf("line %d is %d wide: %q", i, n, l)
		}
	}
	if got, want := strings.Fields(strings.Join(lines, " ")), strings.Fields(s); !cmp.Equal(got, want) {
		t.Errorf("words changed (-want +got):\n%s", cmp.Diff(want, got))
	}
	if got := wrap("", 10, " "); len(got) != 0 {
		t.Errorf("wrap of nothing: %q", got)
	}
}

// demoTestRows are an xsk run that lost its start and a socket run that
// lost evenly.
func demoTestRows() []demoRow {
	rows := []demoRow{
		{Backend: "xsk", SentPackets: 12000, RecvPackets: 11200, LostPackets: 800, SentPPS: 4000, PPS: 3733, SendThreadPerPacket: 1300, RecvThreadPerPacket: 400, CPUPerPacket: 3000,
			Intervals: demoIntervals(1000, 200, 0), SentIntervals: demoIntervals(1000, 0, 0),
			Queues: []plane.QueueCount{{Queue: 0, Packets: 5200}, {Queue: 1, Packets: 6000}}},
		{Backend: "socket", SentPackets: 6000, RecvPackets: 5700, LostPackets: 300, SentPPS: 2000, PPS: 1900, SendThreadPerPacket: 3000, RecvThreadPerPacket: 900, CPUPerPacket: 7500,
			Intervals: demoIntervals(500, 25, 25), SentIntervals: demoIntervals(500, 0, 0)},
	}
	for i := range rows {
		for j := range rows[i].SentIntervals {
			rows[i].SentIntervals[j].Sum.LostPackets = 0
		}
		rows[i].Steady = demoSteadyState(rows[i].Intervals)
		rows[i].RatioSocket, rows[i].CPURatioSocket = rows[i].PPS/rows[1].PPS, rows[i].CPUPerPacket/rows[1].CPUPerPacket
	}
	return rows
}

// The demo's text fits 100 columns; every interval line fills its
// header's columns, half a second a line, sent and received side by
// side; the tables and the headline say what was sent, received and lost
// and what a packet cost at each end; the verdict is the steady state's,
// and says when the start was left out.
func TestDemoText(t *testing.T) {
	rows := demoTestRows()
	var b strings.Builder
	writeDemoIntervals(&b, rows[0])
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 8 || !strings.Contains(lines[0], "sender: AF_XDP (xdpio); receiver: AF_XDP (xdpio)") {
		t.Fatalf("intervals:\n%s", b.String())
	}
	head := strings.Fields(strings.ReplaceAll(lines[1], " pkts/s", "_pkts/s"))
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		want := []string{strconv.FormatFloat(float64(i)*0.5, 'f', 1, 64) + "-" + strconv.FormatFloat(float64(i+1)*0.5, 'f', 1, 64), "s", "4000", "4000", "0", "0.0%"}
		if i < 2 {
			want[3], want[4], want[5] = "3200", "800", "20.0%"
		}
		if len(f) != len(head)+1 || !cmp.Equal(f, want) { // "0.0-0.5 s" is two fields
			t.Errorf("interval line %q under %q, want %q", l, lines[1], want)
		}
	}
	b.Reset()
	writeDemoTable(&b, rows)
	out := b.String()
	for _, want := range []string{"sender ns/pkt", "receiver ns/pkt", "machine ns/pkt", "800    6.7%", "0.40",
		"packets per RX queue: xsk: q0 5200, q1 6000; socket: none (kernel UDP sockets, not RX queues)",
		"headline: xsk received 1.96× the kernel socket's packets/s (3733 vs 1900) at 0.40× the machine's CPU time per packet",
		"sent 2.00× as many", "1300 vs 3000 ns", "400 vs 900 ns", "xsk lost 6.7%, the socket 5.0%",
		"xsk, steady state after the first 1 s (which lost 20.0%, more than the rest: a startup effect, left out): the sender is the limit",
		"socket, steady state over the whole run (its first 1 s lost 5.0%, not measurably more than the rest): the receiver is the limit: it lost 5.0%"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > demoWidth {
			t.Errorf("a %d-column line: %q", n, l)
		}
	}
	for _, c := range []struct{ max, want float64 }{{575147, 200000}, {9, 2}, {1, 0.2}, {0, 1}, {3.2e6, 1e6}} {
		if got := niceStep(c.max, 5); got != c.want {
			t.Errorf("niceStep(%v, 5) = %v, want %v", c.max, got, c.want)
		}
	}
}

// The chart is well-formed SVG with a sent and a received line of 12
// points per data plane, three CPU bars per data plane with their values,
// a bar per AF_XDP queue, the startup shaded when it was left out, and
// no room to spare under the legends.
func TestDemoSVG(t *testing.T) {
	rows := demoTestRows()
	svg := demoSVG(rows, 2, 64)
	counts := map[string]int{}
	var height float64
	var lastY float64
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("malformed SVG: %v\n%s", err, svg)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		counts[se.Name.Local]++
		for _, a := range se.Attr {
			v, _ := strconv.ParseFloat(a.Value, 64)
			switch {
			case se.Name.Local == "svg" && a.Name.Local == "height":
				height = v
			case se.Name.Local == "text" && a.Name.Local == "y":
				lastY = max(lastY, v)
			}
		}
	}
	if counts["polyline"] != 4 || counts["circle"] != 4*12 {
		t.Errorf("%d lines, %d points: want a sent and a received line of 12 points per data plane", counts["polyline"], counts["circle"])
	}
	if height < lastY || height > lastY+24 {
		t.Errorf("height %v, last text at %v: the chart should end under its last line", height, lastY)
	}
	s := string(svg)
	for _, want := range []string{"CPU time per packet (ns)", ">3000<", ">1300<", ">400<", ">7500<", ">3000<", ">900<", "packets per RX queue",
		"socket: no bars", "(dashed)", ">startup<", "startup: left out of the steady state of xsk", "each point: the 0.25 s interval"} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	rows[0].Steady.StartupExcluded = false
	if s := string(demoSVG(rows, 2, 64)); strings.Contains(s, "startup") {
		t.Errorf("chart shades a startup no verdict left out")
	}
}

// demoRecorded is a demo run's --json output (make demo on the 2-core VM,
// intervals' per-stream figures taken out).
const demoRecorded = "testdata/demo-run.json"

// The chart, drawn as a browser would by rsvg-convert, for a recorded run
// and for one whose start was left out: the image has the SVG's size, the
// three panels hold the data planes' colours (lines, bars), the title
// strip above the panels holds none, and the legends end near the
// bottom. XDPIO_DEMO_PNG=DIR keeps the images there to look at.
func TestDemoChartPNG(t *testing.T) {
	rsvg := netnstest.RequireTool(t, "rsvg-convert")
	data, err := os.ReadFile(demoRecorded)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Queues  int       `json:"queues"`
		Length  int       `json:"length"`
		Results []demoRow `json:"results"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Results) != 3 {
		t.Fatalf("%s: %d results", demoRecorded, len(rec.Results))
	}
	dir := os.Getenv("XDPIO_DEMO_PNG")
	if dir == "" {
		dir = t.TempDir()
	}
	for name, c := range map[string]struct {
		rows   []demoRow
		queues int
	}{"recorded": {rec.Results, rec.Queues}, "startup": {demoTestRows(), 2}} {
		t.Run(name, func(t *testing.T) {
			svg := demoSVG(c.rows, c.queues, 64)
			svgPath, pngPath := filepath.Join(dir, "demo-"+name+".svg"), filepath.Join(dir, "demo-"+name+".png")
			if err := os.WriteFile(svgPath, svg, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(rsvg, "-o", pngPath, svgPath).CombinedOutput(); err != nil {
				t.Fatalf("rsvg-convert: %v\n%s", err, out)
			}
			f, err := os.Open(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := strconv.Atoi(regexp.MustCompile(`height="(\d+)"`).FindStringSubmatch(string(svg))[1])
			if b := img.Bounds(); b.Dx() != svgW || b.Dy() != h {
				t.Fatalf("image %v, want %d × %d", b, svgW, h)
			}
			series := []color.RGBA{{0x1f, 0x77, 0xb4, 255}, {0xd6, 0x27, 0x28, 255}, {0x2c, 0xa0, 0x2c, 255}}
			colored := func(r image.Rectangle, want color.RGBA) int {
				n := 0
				for y := r.Min.Y; y < r.Max.Y; y++ {
					for x := r.Min.X; x < r.Max.X; x++ {
						cr, cg, cb, _ := img.At(x, y).RGBA()
						if near(cr>>8, want.R) && near(cg>>8, want.G) && near(cb>>8, want.B) {
							n++
						}
					}
				}
				return n
			}
			plot := func(p svgPanel) image.Rectangle { return image.Rect(p.left, svgTop, p.left+p.w, svgTop+svgPlotH) }
			for i := range c.rows {
				col := series[i]
				if n := colored(plot(svgRates), col); n < 300 {
					t.Errorf("%s's lines: %d pixels of its colour in the rates panel", c.rows[i].Backend, n)
				}
				if n := colored(plot(svgCPU), col); n < 100 {
					t.Errorf("%s's CPU bars: %d pixels of its colour", c.rows[i].Backend, n)
				}
				if len(c.rows[i].Queues) > 0 {
					if n := colored(plot(svgQueues), col); n < 100 {
						t.Errorf("%s's queue bars: %d pixels of its colour", c.rows[i].Backend, n)
					}
				}
				if n := colored(image.Rect(0, 0, svgW, svgPanelY-14), col); n > 0 {
					t.Errorf("%d pixels of %s's colour in the title strip", n, c.rows[i].Backend)
				}
			}
			// The last row with anything on it is close to the bottom.
			last := 0
			for y := 0; y < h; y++ {
				for x := 0; x < svgW; x++ {
					if r, g, b, _ := img.At(x, y).RGBA(); r>>8 < 200 || g>>8 < 200 || b>>8 < 200 {
						last = y
						break
					}
				}
			}
			if h-last > 24 {
				t.Errorf("%d px of nothing under the chart (last drawn row %d of %d)", h-last, last, h)
			}
			t.Logf("%s: %d × %d", pngPath, svgW, h)
		})
	}
}

func near(a uint32, b uint8) bool { return a+12 >= uint32(b) && a <= uint32(b)+12 }
