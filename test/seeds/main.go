// Command seeds reproduces the four seed patches' experiments in user
// space, with the real iperf3 against `xdpio bench server` over a veth
// pair in two namespaces of its own, and prints the table issue #29 asks
// for (make seeds). Each experiment compares variants of the server in
// interleaved rounds (round 1 runs every variant once, then round 2 …),
// and reports each variant's median and range, and its ratio to the
// experiment's baseline as the median and range of the per-round ratios:
//
//   - enetc, software TSO: one stream from the server (iperf3 -c -R),
//     netstack with --tso on against --tso off; the kernel's TCP and
//     gVisor's own AF_XDP endpoint (--backend gvisor-xdp) in the same
//     rounds;
//   - ravb, RX checksum offload: one stream to the server, --rx-csum on
//     (GRO off) against off: throughput, the server's CPU time per byte,
//     and (with -profile) the share of the server's CPU profile in
//     checksumming; and the offload with GRO, which needs its verdict;
//   - icssg, coalescing: one stream to the server at a fixed rate below
//     the maximum (-rate, or 60% of the median of netstack with GRO in
//     the ravb experiment), --rx-usecs/--tx-usecs/--adaptive against
//     none, with GRO and without: the server's CPU time per byte, and
//     the frames a wake-up of the receive loop took; and icssg-paced, the
//     same with a sender that spreads its frames as a 1 Gbit/s wire does
//     (iperf3 -l 1448 --pacing-timer 10), where a wake-up takes a few;
//   - r8169, RSS: iperf3 -P 20 to the server with the veth pair at one
//     queue against two (both ends, ethtool -L): total throughput, its
//     per-second minimum and maximum, and the busiest core's load.
//
// The server's CPU time is what the kernel accounts to its process
// (wait4's rusage: user and system); the machine's (all processes and
// interrupts, /proc/stat) is reported too. The peer's device has TX
// checksumming off (ethtool -K veth-a tx off), as a NIC that sends whole
// checksums: --rx-csum off needs it, and every variant runs so. Single-
// stream experiments run with one queue at both ends, which gVisor's
// endpoint needs.
//
// It needs root, iperf3 and ethtool, and a quiet machine: each run takes
// -t seconds plus about two.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/internal/cpustat"
	"github.com/xdpio/xdpio/internal/vethpair"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "seeds:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	rounds  int
	secs    int
	rate    string
	only    map[string]bool
	profile bool
	out     string
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds, 1-50")
	flag.IntVar(&o.secs, "t", 5, "seconds per iperf3 run, 2-60")
	flag.StringVar(&o.rate, "rate", "", "the icssg experiment's fixed rate (iperf3's -b, such as 2G); default 60% of netstack's median in the ravb experiment")
	only := flag.String("only", "", "comma-separated experiments to run (enetc, ravb, icssg, icssg-paced, r8169); default all")
	flag.BoolVar(&o.profile, "profile", false, "after the rounds, profile the server once per netstack variant (--cpuprofile) and report where its time goes")
	flag.StringVar(&o.out, "o", "", "also write the report (markdown) to this file")
	flag.Parse()
	if o.rounds < 1 || o.rounds > 50 || o.secs < 2 || o.secs > 60 || flag.NArg() > 0 {
		return o, errors.New("usage: seeds [-rounds 1-50] [-t 2-60] [-rate RATE] [-only LIST] [-profile] [-o FILE]")
	}
	o.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if experimentNamed(s) == nil {
			return o, fmt.Errorf("-only %s: no such experiment (enetc, ravb, icssg, icssg-paced, r8169)", s)
		}
		o.only[s] = true
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	for _, p := range []string{"iperf3", "ethtool", "ss", "go"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is needed (make deps installs it): %w", p, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "seeds")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "xdpio")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xdpio")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/xdpio (run from the repository's root): %w", err)
	}
	pair, err := vethpair.NewPair(vethpair.Config{Queues: 2})
	if err != nil {
		return err
	}
	defer pair.Close()
	r := &runner{ctx: ctx, o: o, bin: bin, dir: dir, pair: pair, queues: 2}
	if err := r.sh(pair.A, "ethtool", "-K", pair.A.Link, "tx", "off"); err != nil {
		return err
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# Seed experiments\n\n%s\n\n", r.header())
	for _, e := range experiments() {
		if len(o.only) > 0 && !o.only[e.name] {
			continue
		}
		if e.name == "icssg" {
			rate, err := r.fixedRate()
			if err != nil {
				return err
			}
			e = e.atRate(rate)
		}
		res, err := r.experiment(e)
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		e.write(&report, res)
		if o.profile {
			if err := r.profiles(&report, e); err != nil {
				return fmt.Errorf("%s profile: %w", e.name, err)
			}
		}
		report.WriteString("\n")
	}
	os.Stdout.Write(report.Bytes())
	if o.out != "" {
		return os.WriteFile(o.out, report.Bytes(), 0o644)
	}
	return nil
}

// runner runs iperf3 against one server at a time on its veth pair.
type runner struct {
	ctx    context.Context
	o      options
	bin    string
	dir    string
	pair   *vethpair.Pair
	queues int // the channels both ends have now

	netstackRX []float64 // the ravb experiment's netstack bit rates, for icssg's rate
}

// header says how the runs were made.
func (r *runner) header() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	ip3, _ := exec.Command("iperf3", "--version").Output()
	first, _, _ := strings.Cut(string(ip3), "\n")
	return fmt.Sprintf("%d interleaved rounds of %d s per run; Linux %s, %s, %d CPUs; veth pair in two namespaces, the peer's TX checksumming off. "+
		"Medians with [min–max]; a ratio is to the experiment's first variant, the median and range of the per-round ratios. "+
		"CPU: the server process's user+system time (wait4), and the machine's busy time (/proc/stat), per GB received.",
		r.o.rounds, r.o.secs, strings.TrimSpace(string(kernel)), strings.TrimSpace(first), runtime.NumCPU())
}

// sh runs a command in h's namespace.
func (r *runner) sh(h *vethpair.Host, name string, args ...string) error {
	if out, err := h.Command(r.ctx, name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), h.NS, err, bytes.TrimSpace(out))
	}
	return nil
}

// channels gives both veth ends n RX and n TX queues.
func (r *runner) channels(n int) error {
	if n == r.queues {
		return nil
	}
	for _, h := range []*vethpair.Host{r.pair.A, r.pair.B} {
		if err := r.sh(h, "ethtool", "-L", h.Link, "rx", fmt.Sprint(n), "tx", fmt.Sprint(n)); err != nil {
			return err
		}
	}
	r.queues = n
	return nil
}

// result is one iperf3 run's numbers.
type result struct {
	bps            float64 // received, bits/s (iperf3's receiver)
	bytes          float64 // received
	retransmits    float64 // the sender's (iperf3's count)
	minBps, maxBps float64 // per second, the first second left out
	serverCPU      float64 // seconds, user+system of the server process
	machineCPU     float64 // seconds of busy time on all cores
	busiest        float64 // the busiest core's busy share, 0-1

	// netstack's: the frames a receive batch (one wake-up) held, and the
	// frames a packet GRO handed the stack held, on average.
	framesPerBatch, framesPerPacket float64
}

// netstackFrames is the server's summary of netstack's receive.
var netstackFrames = regexp.MustCompile(`frames (\d+) in \((\d+) batches, (\d+) packets after GRO`)

// once runs the variant's server and iperf3's client once. prof, when
// set, is where the server writes its CPU profile.
func (r *runner) once(v variant, prof string) (result, error) {
	if err := r.channels(v.queues); err != nil {
		return result{}, err
	}
	const port = "5201"
	var argv []string
	if v.server == nil {
		argv = []string{"iperf3", "-s", "-1", "-p", port}
	} else {
		argv = append([]string{r.bin, "bench", "server", "-i", r.pair.B.Link, "-1", "-p", port, "--interval", "0"}, v.server...)
		if prof != "" {
			argv = append(argv, "--cpuprofile", prof)
		}
	}
	sctx, cancel := context.WithTimeout(r.ctx, time.Duration(r.o.secs+30)*time.Second)
	defer cancel()
	srv := r.pair.B.Command(sctx, argv[0], argv[1:]...)
	var sout bytes.Buffer
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		return result{}, err
	}
	defer srv.Process.Kill()
	if err := r.listening(port); err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", v.name, err, sout.Bytes())
	}
	meter := cpustat.Start()
	args := append([]string{"-c", r.pair.B.IPv4.String(), "-p", port, "-t", fmt.Sprint(r.o.secs), "-J"}, v.client...)
	cli := r.pair.A.Command(sctx, "iperf3", args...)
	var cout bytes.Buffer
	cli.Stdout, cli.Stderr = &cout, &cout
	cerr := cli.Run()
	use := meter.Finish()
	res, perr := parseIperf3(cout.Bytes())
	if cerr != nil || perr != nil {
		return result{}, fmt.Errorf("%s: iperf3 %s: %v %v\n%s\nserver:\n%s", v.name, strings.Join(args, " "), cerr, perr, tail(cout.Bytes()), sout.Bytes())
	}
	if err := srv.Wait(); err != nil {
		return result{}, fmt.Errorf("%s: the server: %w\n%s", v.name, err, sout.Bytes())
	}
	res.serverCPU = (srv.ProcessState.UserTime() + srv.ProcessState.SystemTime()).Seconds()
	if m := netstackFrames.FindSubmatch(sout.Bytes()); m != nil {
		f, _ := strconv.ParseFloat(string(m[1]), 64)
		b, _ := strconv.ParseFloat(string(m[2]), 64)
		p, _ := strconv.ParseFloat(string(m[3]), 64)
		if b > 0 && p > 0 {
			res.framesPerBatch, res.framesPerPacket = f/b, f/p
		}
	} else if v.netstack {
		return result{}, fmt.Errorf("%s: no frame counts in the server's output:\n%s", v.name, sout.Bytes())
	}
	if len(use.Cores) < 2 {
		return result{}, errors.New("/proc/stat could not be read")
	}
	res.machineCPU = use.BusySeconds
	for _, c := range use.Cores[1:] {
		res.busiest = max(res.busiest, c.Busy()/100)
	}
	return res, nil
}

// listening waits until the server in B listens on port (its control
// connection is the kernel's, for every backend).
func (r *runner) listening(port string) error {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, err := r.pair.B.Command(r.ctx, "ss", "-Hltn", "sport = :"+port).Output()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(out)) > 0 {
			return nil
		}
	}
	return errors.New("the server did not listen within 15 s")
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// experiment runs every variant of e in interleaved rounds.
func (r *runner) experiment(e experiment) ([][]result, error) {
	res := make([][]result, len(e.variants))
	for round := 1; round <= r.o.rounds; round++ {
		for i, v := range e.variants {
			fmt.Fprintf(os.Stderr, "seeds: %s round %d/%d: %s\n", e.name, round, r.o.rounds, v.name)
			x, err := r.once(v, "")
			if err != nil {
				return nil, err
			}
			res[i] = append(res[i], x)
		}
	}
	if e.name == "ravb" {
		for i, v := range e.variants {
			if v.rateBase {
				for _, x := range res[i] {
					r.netstackRX = append(r.netstackRX, x.bps)
				}
			}
		}
	}
	return res, nil
}

// fixedRate is the icssg experiment's rate: -rate, or 60% of netstack's
// median in the ravb experiment, or (when that did not run) a short run
// of its own.
func (r *runner) fixedRate() (string, error) {
	if r.o.rate != "" {
		return r.o.rate, nil
	}
	if len(r.netstackRX) == 0 {
		e := *experimentNamed("ravb")
		e.variants = slices.DeleteFunc(e.variants, func(v variant) bool { return !v.rateBase })
		x, err := r.once(e.variants[0], "")
		if err != nil {
			return "", err
		}
		r.netstackRX = []float64{x.bps}
	}
	return fmt.Sprintf("%.0fM", 0.6*median(r.netstackRX)/1e6), nil
}

// iperf3JSON is the part of iperf3's -J output read here.
type iperf3JSON struct {
	Error     string `json:"error"`
	Intervals []struct {
		Sum struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent struct {
			Retransmits float64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
}

// parseIperf3 reads a client's -J output.
func parseIperf3(b []byte) (result, error) {
	var j iperf3JSON
	if err := json.Unmarshal(b, &j); err != nil {
		return result{}, fmt.Errorf("iperf3 -J: %w", err)
	}
	if j.Error != "" {
		return result{}, fmt.Errorf("iperf3: %s", j.Error)
	}
	if j.End.SumReceived.Bytes == 0 {
		return result{}, errors.New("iperf3 -J: nothing received")
	}
	res := result{bps: j.End.SumReceived.BitsPerSecond, bytes: j.End.SumReceived.Bytes, retransmits: j.End.SumSent.Retransmits}
	for i, iv := range j.Intervals {
		if i == 0 && len(j.Intervals) > 1 {
			continue // slow start
		}
		if res.minBps == 0 || iv.Sum.BitsPerSecond < res.minBps {
			res.minBps = iv.Sum.BitsPerSecond
		}
		res.maxBps = max(res.maxBps, iv.Sum.BitsPerSecond)
	}
	return res, nil
}
