package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// variant is one server setup and the iperf3 client's options for it.
type variant struct {
	name     string
	server   []string // xdpio bench server's flags after -i IFACE -1 -p PORT; nil: the kernel's TCP (iperf3 -s)
	client   []string // iperf3 -c's extra options
	queues   int      // RX and TX queues of both veth ends
	netstack bool     // the server runs netstack (profiled with -profile)
	rateBase bool     // the icssg experiment's fixed rate is 60% of this one's median
}

// goal is a ratio the issue asks for: metric of variant num over den.
type goal struct {
	num, den string
	metric   string // "bps", "serverCPU", "machineCPU", "busiest", "minBps"
	want     string // the goal, as text
}

// experiment is one seed patch's experiment.
type experiment struct {
	name, seed, what string
	variants         []variant
	goals            []goal
}

const rx = "the server receives (iperf3 -c)"

func experiments() []experiment {
	ns := []string{"--backend", "xsk"}
	flags := func(f ...string) []string { return append(slices.Clone(ns), f...) }
	gv := []string{"--backend", "gvisor-xdp"}
	paced := []string{"-b", "1G", "-l", "1448", "--pacing-timer", "10"}
	return []experiment{
		{
			name: "enetc", seed: "software TSO (enetc: 1.63 → 2.34 Gbit/s, 1.44×)",
			what: "one TCP stream sent by the server (iperf3 -c -R), one queue",
			variants: []variant{
				{name: "netstack, TSO off", server: flags("--tso", "off"), client: []string{"-R"}, queues: 1, netstack: true},
				{name: "netstack, TSO on", server: flags("--tso", "on"), client: []string{"-R"}, queues: 1, netstack: true},
				{name: "gVisor link/xdp", server: gv, client: []string{"-R"}, queues: 1},
				{name: "kernel TCP", client: []string{"-R"}, queues: 1},
			},
			goals: []goal{
				{"netstack, TSO on", "netstack, TSO off", "bps", "≥ 1.4×"},
				{"netstack, TSO on", "gVisor link/xdp", "bps", "≥ 1.5×"},
				{"netstack, TSO on", "kernel TCP", "bps", "report"},
			},
		},
		{
			name: "ravb", seed: "RX checksum offload (ravb: do_csum, 7.4% of the CPU, gone)",
			what: "one TCP stream received by the server (" + rx + "), one queue",
			variants: []variant{
				{name: "netstack, stack checks", server: flags("--rx-csum", "off"), queues: 1, netstack: true},
				{name: "netstack, RX csum offload", server: flags("--rx-csum", "on", "--gro", "off"), queues: 1, netstack: true},
				{name: "netstack, RX csum offload + GRO", server: flags("--rx-csum", "on", "--gro", "on"), queues: 1, netstack: true, rateBase: true},
				{name: "gVisor link/xdp", server: gv, queues: 1},
				{name: "kernel TCP", queues: 1},
			},
			goals: []goal{
				{"netstack, RX csum offload", "netstack, stack checks", "bps", "≈ 1× (equal throughput)"},
				{"netstack, RX csum offload", "netstack, stack checks", "serverCPU", "≤ 0.95× (≥ 5% less CPU per byte)"},
				{"netstack, RX csum offload + GRO", "netstack, stack checks", "serverCPU", "report (GRO needs the offload's verdict)"},
				{"netstack, RX csum offload + GRO", "gVisor link/xdp", "bps", "≥ 1.5×"},
				{"netstack, RX csum offload + GRO", "kernel TCP", "bps", "report"},
			},
		},
		{
			name: "icssg", seed: "RX/TX coalescing (icssg: RX CPU 38% → 25%, 0.66×)",
			what: "one TCP stream received by the server at a fixed rate, one queue",
			variants: []variant{
				{name: "netstack, no coalescing", server: flags(), queues: 1, netstack: true},
				{name: "netstack, rx-usecs 64", server: flags("--rx-usecs", "64"), queues: 1, netstack: true},
				{name: "netstack, rx/tx-usecs 64", server: flags("--rx-usecs", "64", "--tx-usecs", "64"), queues: 1, netstack: true},
				{name: "netstack, adaptive", server: flags("--adaptive"), queues: 1, netstack: true},
				{name: "netstack, no coalescing, no GRO", server: flags("--gro", "off"), queues: 1, netstack: true},
				{name: "netstack, rx-usecs 64, no GRO", server: flags("--rx-usecs", "64", "--gro", "off"), queues: 1, netstack: true},
			},
			goals: []goal{
				{"netstack, rx-usecs 64", "netstack, no coalescing", "bps", "≈ 1× (equal throughput)"},
				{"netstack, rx-usecs 64", "netstack, no coalescing", "serverCPU", "≤ 0.7× (≥ 30% less CPU per byte)"},
				{"netstack, rx/tx-usecs 64", "netstack, no coalescing", "serverCPU", "≤ 0.7×"},
				{"netstack, adaptive", "netstack, no coalescing", "serverCPU", "≤ 0.7×"},
				{"netstack, rx-usecs 64, no GRO", "netstack, no coalescing, no GRO", "serverCPU", "≤ 0.7× (without GRO)"},
				{"netstack, no coalescing", "netstack, no coalescing, no GRO", "serverCPU", "report (GRO)"},
			},
		},
		{
			name: "icssg-paced", seed: "RX coalescing with a sender paced like a wire (icssg: RX CPU 38% → 25%, 0.66×)",
			what: "one TCP stream received by the server from a sender that writes one segment's worth every 10 µs at 1 Gbit/s (iperf3 -b 1G -l 1448 --pacing-timer 10: frames arrive spread out, as on icssg's 1 Gbit/s wire, not in TSO bursts), one queue",
			variants: []variant{
				{name: "netstack, no coalescing", server: flags(), client: paced, queues: 1, netstack: true},
				{name: "netstack, rx-usecs 64", server: flags("--rx-usecs", "64"), client: paced, queues: 1, netstack: true},
				{name: "netstack, rx-usecs 200", server: flags("--rx-usecs", "200"), client: paced, queues: 1, netstack: true},
			},
			goals: []goal{
				{"netstack, rx-usecs 200", "netstack, no coalescing", "bps", "≈ 1× (equal throughput)"},
				{"netstack, rx-usecs 64", "netstack, no coalescing", "serverCPU", "≤ 0.7× (≥ 30% less CPU per byte)"},
				{"netstack, rx-usecs 200", "netstack, no coalescing", "serverCPU", "≤ 0.7×"},
			},
		},
		{
			name: "r8169", seed: "RSS (r8169: iperf3 -P 20 from 3.8–8.2 to a stable 9.42 Gbit/s)",
			what: "iperf3 -P 20 to the server (" + rx + ")",
			variants: []variant{
				{name: "netstack, 1 queue", server: flags(), client: []string{"-P", "20"}, queues: 1, netstack: true},
				{name: "netstack, 2 queues", server: flags(), client: []string{"-P", "20"}, queues: 2, netstack: true},
				{name: "kernel TCP, 2 queues", client: []string{"-P", "20"}, queues: 2},
			},
			goals: []goal{
				{"netstack, 2 queues", "netstack, 1 queue", "bps", "> 1×"},
				{"netstack, 2 queues", "netstack, 1 queue", "minBps", "> 1× (steadier)"},
				{"netstack, 2 queues", "netstack, 1 queue", "busiest", "< 1×"},
			},
		},
	}
}

func experimentNamed(name string) *experiment {
	for _, e := range experiments() {
		if e.name == name {
			return &e
		}
	}
	return nil
}

// atRate gives every variant iperf3's -b rate.
func (e experiment) atRate(rate string) experiment {
	e.what += " of " + rate + "bit/s (iperf3 -b " + rate + ")"
	vs := slices.Clone(e.variants)
	for i := range vs {
		vs[i].client = append(slices.Clone(vs[i].client), "-b", rate)
	}
	e.variants = vs
	return e
}

// metric returns one run's value of a metric.
func metric(x result, name string) float64 {
	switch name {
	case "bps":
		return x.bps
	case "minBps":
		return x.minBps
	case "serverCPU":
		return x.serverCPU / x.bytes
	case "machineCPU":
		return x.machineCPU / x.bytes
	case "busiest":
		return x.busiest
	case "framesPerBatch":
		return x.framesPerBatch
	case "framesPerPacket":
		return x.framesPerPacket
	}
	panic("seeds: no metric " + name)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread formats the median and range of v with f.
func spread(v []float64, f func(float64) string) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s [%s–%s]", f(median(v)), f(slices.Min(v)), f(slices.Max(v)))
}

func values(rs []result, name string) []float64 {
	v := make([]float64, len(rs))
	for i, x := range rs {
		v[i] = metric(x, name)
	}
	return v
}

func gbit(v float64) string  { return strconv.FormatFloat(v/1e9, 'f', 2, 64) }
func perGB(v float64) string { return strconv.FormatFloat(v*1e9, 'f', 2, 64) }
func pct(v float64) string   { return strconv.FormatFloat(100*v, 'f', 0, 64) + "%" }
func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }
func one(v float64) string   { return strconv.FormatFloat(v, 'f', 1, 64) }

// write prints the experiment's table and its goals' ratios.
func (e experiment) write(w *bytes.Buffer, res [][]result) {
	fmt.Fprintf(w, "## %s: %s\n\n%s.\n\n", e.name, e.seed, e.what)
	fmt.Fprintf(w, "| variant | Gbit/s | per second min / max (Gbit/s) | retransmits | server CPU s/GB | machine CPU s/GB | busiest core | RX frames per wake-up | RX frames per packet (GRO) |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, v := range e.variants {
		rs := res[i]
		var retr []float64
		for _, x := range rs {
			retr = append(retr, x.retransmits)
		}
		batch, gro := "–", "–"
		if v.netstack {
			batch, gro = spread(values(rs, "framesPerBatch"), one), spread(values(rs, "framesPerPacket"), one)
		}
		fmt.Fprintf(w, "| %s | %s | %s / %s | %s | %s | %s | %s | %s | %s |\n", v.name,
			spread(values(rs, "bps"), gbit), gbit(median(values(rs, "minBps"))), gbit(median(maxes(rs))),
			strconv.FormatFloat(median(retr), 'f', 0, 64),
			spread(values(rs, "serverCPU"), perGB), spread(values(rs, "machineCPU"), perGB), spread(values(rs, "busiest"), pct), batch, gro)
	}
	fmt.Fprintf(w, "\n| ratio | metric | per round: median [min–max] | goal |\n|---|---|---|---|\n")
	for _, g := range e.goals {
		n, d := e.index(g.num), e.index(g.den)
		var per []float64
		for r := range min(len(res[n]), len(res[d])) {
			if dv := metric(res[d][r], g.metric); dv > 0 {
				per = append(per, metric(res[n][r], g.metric)/dv)
			}
		}
		fmt.Fprintf(w, "| %s ÷ %s | %s | %s | %s |\n", g.num, g.den, metricName(g.metric), spread(per, ratio), g.want)
	}
}

func maxes(rs []result) []float64 {
	v := make([]float64, len(rs))
	for i, x := range rs {
		v[i] = x.maxBps
	}
	return v
}

func metricName(m string) string {
	return map[string]string{
		"bps": "throughput", "minBps": "slowest second", "serverCPU": "server CPU per byte",
		"machineCPU": "machine CPU per byte", "busiest": "busiest core's load",
	}[m]
}

func (e experiment) index(name string) int {
	for i, v := range e.variants {
		if v.name == name {
			return i
		}
	}
	panic("seeds: no variant " + name)
}

// profiles runs each netstack variant of e once more with the server's
// CPU profile on, and reports the profile's checksum share and the
// packages the time went to.
func (r *runner) profiles(w *bytes.Buffer, e experiment) error {
	fmt.Fprintf(w, "\nCPU profiles of the server, one run each (xdpio --cpuprofile; go tool pprof -top):\n\n")
	for i, v := range e.variants {
		if !v.netstack {
			continue
		}
		prof := filepath.Join(r.dir, fmt.Sprintf("%s-%d.prof", e.name, i))
		x, err := r.once(v, prof)
		if err != nil {
			return err
		}
		out, err := exec.CommandContext(r.ctx, "go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", r.bin, prof).Output()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w", prof, err)
		}
		p := parseTop(out)
		if keep := os.Getenv("SEEDS_KEEP_PROFILES"); keep != "" {
			os.Rename(prof, filepath.Join(keep, filepath.Base(prof)))
		}
		fmt.Fprintf(w, "- %s (%s Gbit/s): checksumming %.1f%% of the profile (gVisor's %.1f%%, xdpio's offload %.1f%%); by package: %s\n",
			v.name, gbit(x.bps), p.share(gvisorSum)+p.share(offloadSum), p.share(gvisorSum), p.share(offloadSum), p.packages(8))
	}
	return nil
}

var (
	gvisorSum  = regexp.MustCompile(`^gvisor\.dev/gvisor/pkg/tcpip/checksum\.`)
	offloadSum = regexp.MustCompile(`^github\.com/xdpio/xdpio/offload\.(Checksum|checksum|sum|Fold|Combine|PseudoHeader|CopyChecksum|VerifyRX|Update)`)
)

// topProfile is pprof -top's functions and their flat shares (percent).
type topProfile map[string]float64

// parseTop reads `go tool pprof -top`'s lines: flat flat% sum% cum cum% name.
func parseTop(out []byte) topProfile {
	p := topProfile{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		if err != nil {
			continue
		}
		p[strings.Join(f[5:], " ")] += v
	}
	return p
}

// share is the flat share of the functions re matches.
func (p topProfile) share(re *regexp.Regexp) float64 {
	var s float64
	for name, v := range p {
		if re.MatchString(name) {
			s += v
		}
	}
	return s
}

// packages lists the n packages with the largest flat shares.
func (p topProfile) packages(n int) string {
	by := map[string]float64{}
	for name, v := range p {
		by[pkgOf(name)] += v
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if by[keys[i]] != by[keys[j]] {
			return by[keys[i]] > by[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var s []string
	for _, k := range keys[:min(n, len(keys))] {
		s = append(s, fmt.Sprintf("%s %.1f%%", k, by[k]))
	}
	return strings.Join(s, ", ")
}

// pkgOf is the package of a function name as pprof prints it
// (gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*sender).sendData).
func pkgOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return fn
	}
	return strings.TrimPrefix(strings.TrimPrefix(fn[:slash+1+dot], "gvisor.dev/gvisor/pkg/"), "github.com/xdpio/xdpio/")
}
