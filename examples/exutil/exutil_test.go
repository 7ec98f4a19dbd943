package exutil

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

func TestParseQueues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"all", nil, false},
		{"", nil, false},
		{"3", []int{3}, false},
		{"0,2", []int{0, 2}, false},
		{"0-3", []int{0, 1, 2, 3}, false},
		{" 1 - 2 ,5", []int{1, 2, 5}, false},
		{"-1", nil, true},
		{"3-1", nil, true},
		{"x", nil, true},
		{"0-4096", nil, true},
		{"0-1000000000", nil, true}, // a range that size must be an error, not a billion-entry list
		{"0-4095,0", nil, true},
	} {
		got, err := ParseQueues(tc.in)
		if (err != nil) != tc.err || !equal(got, tc.want) {
			t.Errorf("ParseQueues(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzParseQueues: any string is a list of queues or an error, never a
// panic or an unbounded list; a list written back out parses to itself.
func FuzzParseQueues(f *testing.F) {
	for _, s := range []string{"all", "0", "0,1", "0-3", "1-1,7", "4095", "0-4095", "-", ",", "1-", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		qs, err := ParseQueues(s)
		if err != nil {
			if qs != nil {
				t.Fatalf("ParseQueues(%q) returned %v with error %v", s, qs, err)
			}
			return
		}
		if len(qs) > MaxQueue+1 {
			t.Fatalf("ParseQueues(%q): %d queues", s, len(qs))
		}
		parts := make([]string, len(qs))
		for i, q := range qs {
			if q < 0 || q > MaxQueue {
				t.Fatalf("ParseQueues(%q): queue %d out of range", s, q)
			}
			parts[i] = strconv.Itoa(q)
		}
		if len(qs) == 0 {
			return
		}
		again, err := ParseQueues(strings.Join(parts, ","))
		if err != nil || !equal(again, qs) {
			t.Fatalf("ParseQueues(%q) = %v, which reads back as %v, %v", s, qs, again, errors.Unwrap(err))
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parse registers the common flags on a fresh flag set and parses args.
func parse(args ...string) (Flags, error) {
	var f Flags
	fs := NewFlagSet("ex", "ex -i IFACE [flags]")
	f.Register(fs)
	return f, f.Parse(fs, args, nil)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{nil, ""},
		{[]string{"-batch", "1", "-frames", "16", "-t", "0", "-nap", "0"}, ""},
		{[]string{"-batch", "4096", "-frames", "1048576", "-q", "0-4095"}, ""},
		{[]string{"-batch", "0"}, "-batch 0: must be 1-4096"},
		{[]string{"-batch", "4097"}, "-batch 4097: must be 1-4096"},
		{[]string{"-frames", "15"}, "-frames 15: must be 0 (the library's default, 4096) or 16-1048576"},
		{[]string{"-frames", "1048577"}, "-frames 1048577"},
		{[]string{"-t", "-1ns"}, "-t -1ns: must not be negative"},
		{[]string{"-nap", "-1s"}, "-nap -1s: must not be negative"},
		{[]string{"-q", "x"}, "-q: bad queue"},
		{[]string{"x", "-t", "1s"}, `unexpected argument "x": every option is a -flag`},
		{[]string{"-batch", "x"}, `invalid value "x" for flag -batch`},
		{[]string{"-h"}, "help requested"},
	} {
		_, err := parse(tc.args...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			continue
		}
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(ue.Usage, "usage: ex -i IFACE") {
			t.Errorf("%q: %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}

// Config carries -frames and -nap into the xsk.Config.
func TestConfig(t *testing.T) {
	f, err := parse("-frames", "1024", "-nap", "30us", "-q", "1,3", "-copy", "-skb")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil || cfg.UMEM.NumFrames != 1024 || cfg.Socket.RXNap != 30*time.Microsecond || !equal(cfg.Queues, []int{1, 3}) ||
		cfg.Socket.Bind != xsk.BindCopy || cfg.Program.Attach != xsk.AttachGeneric {
		t.Fatalf("Config = %+v, %v", cfg, err)
	}
	f.Batch = 0 // set behind Parse's back
	if _, err := f.Config(); err == nil || !strings.Contains(err.Error(), "-batch") {
		t.Fatalf("Config with -batch 0: %v", err)
	}
}

// Register leaves out the flags a program names, keeping their defaults.
func TestRegisterOmit(t *testing.T) {
	var f Flags
	fs := NewFlagSet("ex", "ex")
	f.Register(fs, "skb", "batch")
	if fs.Lookup("skb") != nil || fs.Lookup("batch") != nil || fs.Lookup("nap") == nil {
		t.Fatal("Register did not leave out -skb and -batch alone")
	}
	if err := f.Parse(fs, []string{"-skb"}, nil); err == nil || !strings.Contains(err.Error(), "-skb") {
		t.Fatalf("-skb left out, yet: %v", err)
	}
	if f.Batch != DefaultBatch || f.Queues != "all" {
		t.Fatalf("defaults of the left-out flags: %+v", f)
	}
}

// Exit: status 0 for nil and -h, 2 with the usage for usage errors, 1 for
// the rest.
func TestExit(t *testing.T) {
	_, help := parse("-h")
	_, bad := parse("-batch", "0")
	var f Flags
	late := f.Usage(errors.New("-size 9000: too big")) // no flag set parsed: no usage text
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{help, 0, "usage: ex -i IFACE [flags]\n\nflags:\n"},
		{bad, 2, "ex: -batch 0: must be 1-4096"},
		{late, 2, "ex: -size 9000: too big\n"},
		{fmt.Errorf("open: %w", errors.New("no such device")), 1, "ex: open: no such device\n"},
	} {
		var b strings.Builder
		if code := Exit(&b, "ex", tc.err); code != tc.code || !strings.HasPrefix(b.String(), tc.out) {
			t.Errorf("Exit(%v) = %d, printing %q; want %d, %q", tc.err, code, b.String(), tc.code, tc.out)
		}
	}
	var b strings.Builder
	if Exit(&b, "ex", bad); !strings.Contains(b.String(), "-frames int") {
		t.Errorf("usage error printed without the flags: %q", b.String())
	}
}

// Report prints a line for every full second up to d, the last one too,
// then the totals; a context that ends first ends it as early, with the
// lines of the seconds that were full.
func TestReportEverySecond(t *testing.T) {
	pick := func(st xsk.Stats) uint64 { return st.RXFrames }
	for _, tc := range []struct {
		name   string
		d      time.Duration
		cancel time.Duration // the context's timeout, 0 for none
		lines  []string
	}{
		{"-t 2s", 2 * time.Second, 0, []string{"1.0s", "2.0s"}},
		{"-t 1.5s", 1500 * time.Millisecond, 0, []string{"1.0s"}},
		{"Ctrl-C after 1.2s", 0, 1200 * time.Millisecond, []string{"1.0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tc.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancel)
				defer cancel()
			}
			var b strings.Builder
			begin := time.Now()
			if n := Report(ctx, &b, nil, "received", pick, tc.d); n != 0 {
				t.Errorf("Report counted %d packets of no socket", n)
			}
			if el := time.Since(begin); el < max(tc.d, tc.cancel) || el > max(tc.d, tc.cancel)+500*time.Millisecond {
				t.Errorf("Report ran %v", el)
			}
			out := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(out) != len(tc.lines)+1 || !strings.HasPrefix(out[len(out)-1], "total: 0 packets received in ") {
				t.Fatalf("Report printed:\n%s\nwant the lines of %q and the total", b.String(), tc.lines)
			}
			for i, want := range tc.lines {
				if got := strings.TrimSpace(out[i]); !strings.HasPrefix(got, want+" ") {
					t.Errorf("line %d: %q, want the line of %s", i+1, got, want)
				}
			}
		})
	}
}

// stallWriter is a writer whose first Write blocks for stall: a terminal
// that stopped scrolling, a pipe nobody reads for a while.
type stallWriter struct {
	strings.Builder
	stall   time.Duration
	stalled bool
}

func (w *stallWriter) Write(p []byte) (int, error) {
	if !w.stalled {
		w.stalled = true
		time.Sleep(w.stall)
	}
	return w.Builder.Write(p)
}

// A Report held up for more than a second (its first line's write blocks
// from 1.0 s to 3.5 s) misses a tick. It used to print the seconds it
// then reached twice (rxdrop -t 14s printed two "14.0s" lines): each
// second has at most one line now, the late one says when it was read,
// and the last second still gets its line.
func TestReportHeldUp(t *testing.T) {
	t.Parallel()
	pick := func(st xsk.Stats) uint64 { return st.RXFrames }
	w := &stallWriter{stall: 2500 * time.Millisecond}
	Report(context.Background(), w, nil, "received", pick, 4*time.Second)
	out := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	var labels []float64
	for _, l := range out {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasSuffix(f[0], "s") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "s"), 64)
		if err != nil {
			continue
		}
		labels = append(labels, v)
	}
	t.Logf("Report printed:\n%s", w.String())
	if len(labels) < 2 || labels[0] != 1.0 || labels[len(labels)-1] != 4.0 {
		t.Fatalf("per-second lines at %v s, want the first at 1.0 and the last at 4.0", labels)
	}
	for i := 1; i < len(labels); i++ {
		if int(labels[i]) <= int(labels[i-1]) {
			t.Errorf("lines at %v s: second %d has two lines", labels, int(labels[i]))
		}
	}
	if len(labels) != 3 {
		t.Errorf("lines at %v s, want 3: 1.0, the late one of second 3 (the tick of second 3 was dropped), 4.0", labels)
	}
	if !strings.HasPrefix(out[len(out)-1], "total: 0 packets received in 4.0 s") {
		t.Errorf("last line %q, want the total after 4.0 s", out[len(out)-1])
	}
}

func TestReadyLine(t *testing.T) {
	for _, tc := range []struct {
		queues []int
		zc     []bool
		attach string
		what   string
		want   string
	}{
		{[]int{0, 1}, []bool{false, false}, "driver attach", "", "ready: vb, queues 0-1, copy mode, driver attach"},
		{[]int{3}, []bool{true}, "generic attach", "the runner", "ready: vb, queues 3, zero-copy mode, generic attach; the runner"},
		{[]int{0, 2, 5, 6, 7}, []bool{true, true, true, true, true}, "no XDP program", "", "ready: vb, queues 0,2,5-7, zero-copy mode, no XDP program"},
		{[]int{0, 1, 2, 3}, []bool{true, false, false}, "driver attach", "", "ready: vb, queues 0-3, zero-copy mode on queues 0, copy mode on queues 1-3, driver attach"},
		{nil, nil, "driver attach", "", "ready: vb, queues none, copy mode, driver attach"},
	} {
		if got := ReadyLine("vb", tc.queues, tc.zc, tc.attach, tc.what); got != tc.want {
			t.Errorf("ReadyLine(%v, %v, %q, %q) = %q, want %q", tc.queues, tc.zc, tc.attach, tc.what, got, tc.want)
		}
	}
}
