//go:build linux

// Command xskbench measures AF_XDP receive (rxdrop) and transmit (txonly)
// packet rates of xdpio's xsk package against github.com/asavie/xdp and
// kernel UDP sockets (recvmmsg), on a veth pair with several queues in two
// network namespaces it creates and removes itself. Run it as root:
//
//	go run ./cmd/xskbench [-queues 4] [-sizes 64,1514] [-rounds 4] [-window 800ms] [-json]
//
// rxdrop: an XDP live-frames generator (internal/trafficgen) in namespace
// A sends UDP frames out of veth-a; every receiver takes them on veth-b
// with one socket and one goroutine per queue and drops them. The
// "offered" column is what the generator sent during the same window: it
// must stay well above what the receiver took, or the run measured the
// generator (the report warns). The generator's rate into a bare XDP_DROP
// program is a row of its own. txonly: one socket per queue of veth-b
// sends; an XDP_DROP program on veth-a counts what arrives ("offered" is
// then the sender's own count).
//
// Backends: xdpio (Receive/Release, Wait when the RX ring is empty);
// xdpio-nap (the same with SocketConfig.RXNap = -nap); xdpio-busypoll
// (preferred busy polling, with napi_defer_hard_irqs and
// gro_flush_timeout set on the veth; the report warns when no socket got a
// NAPI ID, as on veth, where it cannot run); asavie (github.com/asavie/xdp
// with a loop as good as xdpio's: poll only on an empty ring); asavie-doc
// (its documented loop: poll before every receive); asavie-nap (the tuned
// loop with xdpio's nap policy written by hand, to show what the policy is
// worth apart from the library); socket (kernel UDP sockets, recvmmsg);
// c (c/xskpeer.c, raw AF_XDP syscalls with libxdp-style rings and the same
// loop, run in this process through cgo, or as a child process without
// cgo; skipped with a reason when it cannot be built); c-nap (the C peer
// with the nap policy of xdpio-nap); c-proc (the C peer as a child
// process, only when named in -backends). The -group backends receive
// every queue in one thread instead of one per queue: xdpio-group
// (xsk.Poller), xdpio-group-nap (the same with RXNap), and the same loop
// written by hand on asavie/xdp (asavie-group, asavie-group-nap: poll on
// all its sockets' descriptors) and in C (c-group, c-group-nap). On a
// machine with fewer CPUs than queues, they show what the shape of the
// receiver is worth apart from the library. xdpio-coalesce is one
// coalesce.GroupReceiver for every queue with rx-usecs -nap.
// xdpio-rule, xdpio-expr and xdpio-expr10 (only when named in -backends)
// are xdpio's rxdrop behind a filter every generated frame passes: the
// hand-built xsk.UDPPort rule, the expression "udp dst port PORT"
// compiled by package filter, and a 10-clause expression.
//
// On veth the kernel's receive work (XDP, the copy into the UMEM, the
// stack for kernel sockets) runs in the sender's context, so the two
// CPUs are shared by generator and receivers; the machine is noisy, so
// compare only the ratios of one run.
//
// Each backend is measured once per round, in rotating order, and the
// report gives medians and the ratios xdpio/asavie and xdpio/socket.
// Progress goes to stderr; the table (or, with -json, a JSON document) to
// stdout. Exit status: 0 ok, 1 failure, 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/internal/vethpair"
)

type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the flag package printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xskbench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("xskbench", flag.ContinueOnError)
	o := Options{}
	fs.IntVar(&o.Queues, "queues", 4, "queues of each veth end (one socket per queue)")
	sizes := fs.String("sizes", "64,1514", "comma-separated frame sizes in bytes (without FCS)")
	fs.IntVar(&o.Rounds, "rounds", 4, "rounds; the report gives medians")
	fs.DurationVar(&o.Window, "window", 800*time.Millisecond, "measurement window per backend and round")
	fs.DurationVar(&o.Warmup, "warmup", 200*time.Millisecond, "warm-up before each window")
	fs.IntVar(&o.Batch, "batch", 64, "receive batch of every backend")
	fs.IntVar(&o.TXBatch, "tx-batch", 0, "frames per Transmit of xdpio's sender (0: the whole TX ring, as asavie/xdp's example sends)")
	fs.IntVar(&o.RingSize, "ring", 2048, "AF_XDP ring sizes (xdpio and asavie/xdp)")
	fs.IntVar(&o.NumFrames, "frames", 4096, "UMEM frames per socket (xdpio and asavie/xdp)")
	fs.IntVar(&o.FrameSize, "frame-size", 2048, "UMEM frame size (xdpio and asavie/xdp)")
	fs.IntVar(&o.TXBudget, "tx-budget", 2048, "xdpio TX frames per kick in copy mode (XDP_MAX_TX_SKB_BUDGET)")
	fs.IntVar(&o.Spin, "spin", 0, "empty RX-ring checks before an AF_XDP receiver sleeps in poll (xdpio and asavie alike)")
	fs.DurationVar(&o.Nap, "nap", 30*time.Microsecond, "RX nap of the xdpio-nap backend (SocketConfig.RXNap) and of asavie-nap and c-nap (the same policy by hand)")
	fs.DurationVar(&o.BusyPoll, "busy-poll", 50*time.Microsecond, "SO_BUSY_POLL of the xdpio-busypoll backend (SO_PREFER_BUSY_POLL on)")
	fs.IntVar(&o.BusyPollBudget, "busy-poll-budget", 64, "SO_BUSY_POLL_BUDGET of the xdpio-busypoll backend")
	fs.IntVar(&o.BusyPollSpin, "busy-poll-spin", 32, "empty busy polls before an xdpio-busypoll receiver sleeps in poll")
	fs.IntVar(&o.NAPIDefer, "napi-defer", 2, "napi_defer_hard_irqs of the receiving veth while xdpio-busypoll runs")
	fs.DurationVar(&o.GROFlushTimeout, "gro-flush-timeout", 200*time.Microsecond, "gro_flush_timeout of the receiving veth while xdpio-busypoll runs")
	fs.BoolVar(&o.EagerComplete, "eager-complete", true, "xdpio sender reclaims TX completions every loop, so its LIFO pool reuses cache-warm frames (false: only when the pool runs short, which cycles through the whole UMEM)")
	fs.IntVar(&o.Sockets, "sockets", 0, "SO_REUSEPORT kernel UDP sockets (default: the number of queues)")
	fs.IntVar(&o.Flows, "flows", 64, "UDP flows (source ports), a power of two")
	port := fs.Uint("port", 7777, "UDP destination port")
	modes := fs.String("modes", "", "comma-separated modes to run: rxdrop, txonly (default both)")
	backends := fs.String("backends", "", "comma-separated backends: generator, xdpio, xdpio-nap, xdpio-group, xdpio-group-nap, xdpio-coalesce, xdpio-busypoll, asavie, asavie-doc, asavie-nap, asavie-group, asavie-group-nap, socket, c, c-nap, c-group, c-group-nap, c-proc, xdpio-rule, xdpio-expr, xdpio-expr10 (default all but c-proc and the xdpio filter backends; c needs a C compiler and kernel headers)")
	fs.BoolVar(&o.Verbose, "v", false, "log veth and socket counters of every rxdrop measurement")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	procs := fs.Int("procs", 0, "GOMAXPROCS of the benchmark (default: one P for every locked thread — a receiver or sender per queue and a generator worker per CPU — and one for the rest)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return usageError{fmt.Errorf("-sizes: %w", err)}
		}
		o.Sizes = append(o.Sizes, n)
	}
	if *port == 0 || *port > 65535 {
		return usageError{fmt.Errorf("-port %d: must be 1-65535", *port)}
	}
	o.Port = uint16(*port)
	if o.Sockets == 0 {
		o.Sockets = o.Queues
	}
	o.Modes = splitList(*modes)
	o.Backends = splitList(*backends)
	if err := o.validate(); err != nil {
		return usageError{err}
	}

	// Every Go receiver and sender owns a locked thread per queue, and the
	// generator one per CPU. With fewer Ps than locked threads, a locked
	// goroutine runs only after another thread hands it a P (a futex
	// wake-up and a context switch each time), which on this 2-core
	// machine cost the Go backends (xdpio and asavie/xdp alike) up to a
	// third of their packet rate against the C receiver, whose threads
	// need no P. The harness is not what is measured: give every locked
	// thread its P.
	if *procs <= 0 {
		*procs = o.Queues + runtime.NumCPU() + 1
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*procs))

	pair, err := vethpair.NewPair(vethpair.Config{Queues: o.Queues})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := pair.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("remove test namespaces: %w", cerr)
		}
	}()
	fmt.Fprintf(os.Stderr, "xskbench: veth pair %s/%s <-> %s/%s, %d queues\n", pair.A.NS, pair.A.Link, pair.B.NS, pair.B.Link, o.Queues)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := measure(ctx, pair, o, os.Stderr)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted (everything created was removed): %w", err)
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(os.Stdout, rep)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
