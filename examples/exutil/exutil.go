package exutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Flags are the options every example takes. Parse fills and validates
// them; each field holds what its flag said.
type Flags struct {
	Iface    string        // -i
	Queues   string        // -q, checked by ParseQueues
	Duration time.Duration // -t, ≥ 0 (0: until Ctrl-C)
	Copy     bool          // -copy
	Generic  bool          // -skb
	Batch    int           // -batch, 1..MaxBatch
	Nap      time.Duration // -nap, ≥ 0
	// Frames is -frames: UMEM frames per queue (xsk.UMEMConfig.NumFrames),
	// 0 for the library's default (4096), else MinFrames..MaxFrames.
	Frames int

	fs *flag.FlagSet // what Parse parsed, for the usage text of errors
}

// Bounds of the common flags.
const (
	// DefaultBatch is -batch's default.
	DefaultBatch = 64
	// MaxBatch is the largest -batch: a batch of descriptors never holds
	// more than a UMEM has frames (4096 by default), and the rings hold
	// 2048 by default, so a larger batch could never fill.
	MaxBatch = 4096
	// MinFrames is the smallest non-zero -frames: with fewer, the fill
	// and TX rings starve before one batch is in flight.
	MinFrames = 16
	// MaxFrames is the largest -frames: 1 Mi frames of 4096 bytes, 4 GiB
	// of locked memory per queue (the library itself takes up to 16 Mi).
	MaxFrames = 1 << 20
)

// Register adds the common flags to fs, except those named in omit (such
// as "skb" for a program that loads no XDP program): a flag that would
// have no effect is better unknown than silently ignored. Omitted flags
// keep their default values.
func (f *Flags) Register(fs *flag.FlagSet, omit ...string) {
	f.Queues, f.Batch = "all", DefaultBatch
	add := func(name string, register func(name string)) {
		if !slices.Contains(omit, name) {
			register(name)
		}
	}
	add("i", func(n string) { fs.StringVar(&f.Iface, n, "", "interface to bind to (required)") })
	add("q", func(n string) {
		fs.StringVar(&f.Queues, n, "all", fmt.Sprintf("queues: all, or a list such as 0,1,3 or 0-3 (queue numbers 0-%d)", MaxQueue))
	})
	add("t", func(n string) {
		fs.DurationVar(&f.Duration, n, 0, "stop after this long once the sockets are open (e.g. 10s), not negative; 0 runs until Ctrl-C")
	})
	add("copy", func(n string) {
		fs.BoolVar(&f.Copy, n, false, "force copy mode (default: zero-copy when the driver has it)")
	})
	add("skb", func(n string) {
		fs.BoolVar(&f.Generic, n, false, "attach the XDP program in generic (SKB) mode")
	})
	add("batch", func(n string) {
		fs.IntVar(&f.Batch, n, DefaultBatch, fmt.Sprintf("descriptors per batch, 1-%d: at most the %d frames of a default UMEM; the rings hold 2048 by default, so a larger batch never fills", MaxBatch, MaxBatch))
	})
	add("nap", func(n string) {
		fs.DurationVar(&f.Nap, n, 0, "while packets flow, nap this long on a timer before polling the socket (xsk.SocketConfig.RXNap, e.g. 30us), not negative: fewer wake-ups, more packets/s, up to this much more latency")
	})
	add("frames", func(n string) {
		fs.IntVar(&f.Frames, n, 0, fmt.Sprintf("UMEM frames per queue (xsk.UMEMConfig.NumFrames), %d-%d, of 4096 bytes each; 0 is the library's default, 4096 (16 MiB). "+
			"Without CAP_IPC_LOCK the UMEMs of all queues must fit RLIMIT_MEMLOCK, often 8 MiB: at most 2048 frames on one queue", MinFrames, MaxFrames))
	})
}

// NewFlagSet returns an empty flag set for the program name that reports
// errors instead of exiting (Parse returns them) and whose usage text
// starts with synopsis.
func NewFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs, on which f was registered next to the
// program's own flags, and validates the result: it rejects arguments that
// are not flags (the flag package stops at the first one, so the flags
// after it would be silently ignored), checks the common flags (Check),
// then runs check, if not nil, on the program's own. Every error is a
// *UsageError carrying fs's usage text; -h and -help give one wrapping
// flag.ErrHelp.
func (f *Flags) Parse(fs *flag.FlagSet, args []string, check func() error) error {
	f.fs = fs
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: every option is a -flag (flag parsing stops at the first argument that is not one, so flags after it would be ignored)", fs.Arg(0))
	}
	if err == nil {
		err = f.Check()
	}
	if err == nil && check != nil {
		err = check()
	}
	if err != nil {
		return f.Usage(err)
	}
	return nil
}

// Check validates the common flags; each error names its flag and the
// flag's range.
func (f *Flags) Check() error {
	if _, err := ParseQueues(f.Queues); err != nil {
		return fmt.Errorf("-q: %w", err)
	}
	if f.Duration < 0 {
		return fmt.Errorf("-t %v: must not be negative (0 runs until Ctrl-C)", f.Duration)
	}
	if f.Batch < 1 || f.Batch > MaxBatch {
		return fmt.Errorf("-batch %d: must be 1-%d descriptors (at most a default UMEM's %d frames; the rings hold 2048 by default)", f.Batch, MaxBatch, MaxBatch)
	}
	if f.Nap < 0 {
		return fmt.Errorf("-nap %v: must not be negative", f.Nap)
	}
	if f.Frames != 0 && (f.Frames < MinFrames || f.Frames > MaxFrames) {
		return fmt.Errorf("-frames %d: must be 0 (the library's default, 4096) or %d-%d frames per queue", f.Frames, MinFrames, MaxFrames)
	}
	return nil
}

// Usage wraps err, a bad flag value found after Parse (one that depends on
// the interface, say), in a *UsageError with the usage text of the flag
// set Parse parsed.
func (f *Flags) Usage(err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	ue = &UsageError{Err: err}
	if f.fs != nil {
		var b strings.Builder
		out := f.fs.Output()
		f.fs.SetOutput(&b)
		f.fs.Usage()
		f.fs.SetOutput(out)
		ue.Usage = b.String()
	}
	return ue
}

// UsageError is a bad command line: Exit prints it with the usage text and
// gives exit status 2.
type UsageError struct {
	Err   error
	Usage string // the program's usage text, flags included
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Exit prints err, if not nil, to w as an error of the program name and
// returns the exit status for it: 0 for nil, and for -h or -help after
// printing the usage; 2 for a *UsageError, after its message and the
// usage; 1 for any other error (the operation failed).
func Exit(w io.Writer, name string, err error) int {
	if err == nil {
		return 0
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(w, ue.Usage)
			return 0
		}
		fmt.Fprintf(w, "%s: %v\n%s", name, err, ue.Usage)
		return 2
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}

// Config turns the flags into an xsk.Config.
func (f *Flags) Config() (xsk.Config, error) {
	var cfg xsk.Config
	if err := f.Check(); err != nil {
		return cfg, err
	}
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
	cfg.Socket.RXNap = f.Nap
	cfg.UMEM.NumFrames = f.Frames
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

// Context returns a context cancelled by SIGINT or SIGTERM. The examples'
// -t is not part of it: it counts from when the sockets are open (see
// Report), not from when the program started.
func Context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Report prints, once a second, the packets per second of each socket (RX
// or TX, as what picks), until ctx ends or, if d is positive, d has passed
// since Report started; then the totals. Every full second gets one line,
// the last one too (-t 2s prints the lines of 1.0 s and 2.0 s), labelled
// with the time it was read, truncated to a tenth of a second: a line that
// comes late because Report was held up (its writer blocked, the process
// descheduled) says so, and no second gets two lines. It returns the
// total count; the caller stops its goroutines after it.
func Report(ctx context.Context, w io.Writer, socks []*xsk.Socket, what string, pick func(xsk.Stats) uint64, d time.Duration) uint64 {
	last := make([]uint64, len(socks))
	start := time.Now()
	prev := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d) // after the ticker: the last tick is due by then
		defer t.Stop()
		deadline = t.C
	}
	read := func() []uint64 {
		cur := make([]uint64, len(socks))
		for i, s := range socks {
			if st, err := s.Stats(); err == nil {
				cur[i] = pick(st)
			}
		}
		return cur
	}
	// sec is the whole second of the last line. The ticker only wakes
	// Report: a tick may come late, and one that could not be delivered
	// for a whole second is dropped, so the lines go by the clock.
	sec := 0
	line := func(now time.Time) {
		el := now.Sub(start)
		if int(el/time.Second) <= sec {
			return // this second has its line
		}
		sec = int(el / time.Second)
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
		fmt.Fprintf(w, "%6.1fs  %s pkts/s  | sum %10.0f pkts/s %s\n", tenths(el), strings.Join(parts, "  "), sum, what)
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-deadline:
			done = true
		case <-tick.C:
			line(time.Now())
		}
	}
	// The tick of the last full second may have lost the race with the
	// end: its line comes now, unless it was printed.
	now := time.Now()
	line(now)
	cur := read()
	var total uint64
	el := now.Sub(start).Seconds()
	for i, s := range socks {
		total += cur[i]
		fmt.Fprintf(w, "total queue %d: %d packets %s, %.0f pkts/s\n", s.Queue(), cur[i], what, float64(cur[i])/el)
	}
	fmt.Fprintf(w, "total: %d packets %s in %.1f s, %.0f pkts/s\n", total, what, el, float64(total)/el)
	return total
}

// tenths returns d in seconds truncated to a tenth, so that %.1f does not
// round 13.96 s up to the 14.0 of the next second's line.
func tenths(d time.Duration) float64 {
	return float64(d/(100*time.Millisecond)) / 10
}

// ShapeNames lists the values of -shape.
const ShapeNames = "auto, per-queue or one"

// ParseShape reads a -shape value: auto, per-queue or one.
func ParseShape(s string) (xsk.Shape, error) {
	for _, sh := range []xsk.Shape{xsk.ShapeAuto, xsk.ShapePerQueue, xsk.ShapeOne} {
		if s == sh.String() {
			return sh, nil
		}
	}
	return xsk.ShapeAuto, fmt.Errorf("-shape %q: must be %s", s, ShapeNames)
}
