// Package exutil holds what the example programs share: flags, queue
// lists, signal handling and the once-a-second per-queue report. It is
// glue for the examples, not part of xdpio's API.
package exutil

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Flags are the options every example takes.
type Flags struct {
	Iface    string
	Queues   string
	Duration time.Duration
	Copy     bool
	Generic  bool
	Batch    int
	Nap      time.Duration
}

// Register adds the common flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Iface, "i", "", "interface to bind to (required)")
	fs.StringVar(&f.Queues, "q", "all", "queues: all, or a list such as 0,1,3 or 0-3")
	fs.DurationVar(&f.Duration, "t", 0, "stop after this long (e.g. 10s); 0 runs until Ctrl-C")
	fs.BoolVar(&f.Copy, "copy", false, "force copy mode (default: zero-copy when the driver has it)")
	fs.BoolVar(&f.Generic, "skb", false, "attach the XDP program in generic (SKB) mode")
	fs.IntVar(&f.Batch, "batch", 64, "descriptors per batch")
	fs.DurationVar(&f.Nap, "nap", 0, "while packets flow, nap this long on a timer before polling the socket (xsk.SocketConfig.RxNap, e.g. 30us): fewer wake-ups, more packets/s, up to this much more latency")
}

// Config turns the flags into an xsk.Config.
func (f *Flags) Config() (xsk.Config, error) {
	var cfg xsk.Config
	qs, err := ParseQueues(f.Queues)
	if err != nil {
		return cfg, err
	}
	cfg.Queues = qs
	if f.Copy {
		cfg.Socket.Bind = xsk.BindCopy
	}
	if f.Generic {
		cfg.Program.Attach = xsk.AttachGeneric
	}
	if f.Nap < 0 {
		return cfg, fmt.Errorf("-nap %v: must not be negative", f.Nap)
	}
	cfg.Socket.RxNap = f.Nap
	return cfg, nil
}

// MaxQueue is the highest queue number ParseQueues accepts (Linux gives
// a device at most 4096 queues).
const MaxQueue = 4095

// ParseQueues parses "all" (nil), "3", "0,2" or "0-3" into queue numbers
// 0..MaxQueue, in the order given.
func ParseQueues(s string) ([]int, error) {
	if s == "" || s == "all" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 || a > MaxQueue {
			return nil, fmt.Errorf("bad queue %q in %q: want 0..%d", part, s, MaxQueue)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a || b > MaxQueue {
				return nil, fmt.Errorf("bad queue range %q in %q: want low-high within 0..%d", part, s, MaxQueue)
			}
		}
		if len(out)+b-a+1 > MaxQueue+1 {
			return nil, fmt.Errorf("queues %q: more than %d", s, MaxQueue+1)
		}
		for q := a; q <= b; q++ {
			out = append(out, q)
		}
	}
	return out, nil
}

// Context returns a context cancelled by SIGINT/SIGTERM or after d (if
// non-zero).
func Context(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if d <= 0 {
		return ctx, stop
	}
	ctx2, cancel := context.WithTimeout(ctx, d)
	return ctx2, func() { cancel(); stop() }
}

// Report prints, once a second until ctx ends, the packets per second of
// each socket (RX or TX, as what picks), then the totals. It returns the
// total count.
func Report(ctx context.Context, w io.Writer, socks []*xsk.Socket, what string, pick func(xsk.Stats) uint64) uint64 {
	last := make([]uint64, len(socks))
	start := time.Now()
	prev := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	read := func() []uint64 {
		cur := make([]uint64, len(socks))
		for i, s := range socks {
			if st, err := s.Stats(); err == nil {
				cur[i] = pick(st)
			}
		}
		return cur
	}
	for {
		select {
		case <-ctx.Done():
			cur := read()
			var total uint64
			el := time.Since(start).Seconds()
			for i, s := range socks {
				total += cur[i]
				fmt.Fprintf(w, "total queue %d: %d packets %s, %.0f pkts/s\n", s.Queue(), cur[i], what, float64(cur[i])/el)
			}
			fmt.Fprintf(w, "total: %d packets %s in %.1f s, %.0f pkts/s\n", total, what, el, float64(total)/el)
			return total
		case now := <-tick.C:
			cur := read()
			dt := now.Sub(prev).Seconds()
			prev = now
			var sum float64
			var parts []string
			for i, s := range socks {
				pps := float64(cur[i]-last[i]) / dt
				sum += pps
				parts = append(parts, fmt.Sprintf("q%d %10.0f", s.Queue(), pps))
			}
			copy(last, cur)
			fmt.Fprintf(w, "%6.1fs  %s pkts/s  | sum %10.0f pkts/s %s\n", now.Sub(start).Seconds(), strings.Join(parts, "  "), sum, what)
		}
	}
}
