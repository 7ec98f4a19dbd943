package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/examples/internal/flagtest"
	"github.com/xdpio/xdpio/xsk"
)

// splitArgs turns a test's or the fuzzer's string into a command line:
// arguments separated by single spaces (two make an empty argument).
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args  string
		check func(o options) bool
	}{
		{"-i veth0", func(o options) bool { return o.port == 0 && o.Batch == 64 && o.Duration == 0 && o.Frames == 0 }},
		{"-i veth0 -port 9000", func(o options) bool { return o.port == 9000 }},
		{"-i veth0 -port 65535", func(o options) bool { return o.port == 65535 }},
		{"-i veth0 -port 0x2328", func(o options) bool { return o.port == 9000 }},
		{"-i veth0 -port 70000 -port 1", func(o options) bool { return o.port == 1 }}, // the last one counts
		{"-i veth0 -batch 1", func(o options) bool { return o.Batch == 1 }},
		{"-i veth0 -batch 4096", func(o options) bool { return o.Batch == 4096 }},
		{"-i veth0 -t 0", func(o options) bool { return o.Duration == 0 }},
		{"-i veth0 -t 10s -nap 30us", func(o options) bool { return o.Duration == 10*time.Second && o.Nap == 30*time.Microsecond }},
		{"-i veth0 -frames 16", func(o options) bool { return o.Frames == 16 }},
		{"-i veth0 -frames 1048576", func(o options) bool { return o.Frames == 1<<20 }},
		{"-i veth0 -q 0-3 -one-thread -copy -skb", func(o options) bool { return o.Queues == "0-3" && o.oneThread && o.Copy && o.Generic }},
		{"-i veth0 --", func(o options) bool { return o.Iface == "veth0" }},
		{"-i veth0", func(o options) bool { l := o.loop(); return !l.raw && l.shape == xsk.ShapeAuto }},
		{"-i veth0 -shape per-queue -nap 50us", func(o options) bool {
			l := o.loop()
			return !l.raw && l.shape == xsk.ShapePerQueue && l.nap == 50*time.Microsecond
		}},
		{"-i veth0 -one-thread", func(o options) bool { return o.loop().shape == xsk.ShapeOne }},
		{"-i veth0 -raw -shape one", func(o options) bool { l := o.loop(); return l.raw && l.shape == xsk.ShapeOne }},
	} {
		t.Run(tc.args, func(t *testing.T) {
			o, err := parseFlags(splitArgs(tc.args))
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if !tc.check(o) {
				t.Fatalf("parseFlags gave %+v", o)
			}
		})
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-i veth0 -port 70000", "-port 70000: must be 1-65535, or 0"},
		{"-i veth0 -port -1", "-port -1: must be"},
		{"-i veth0 -port abc", "-port"},
		{"-i veth0 -batch 0", "-batch 0: must be 1-4096"},
		{"-i veth0 -shape two", `-shape "two": must be auto, per-queue or one`},
		{"-i veth0 -one-thread -shape per-queue", "contradict"},
		{"-i veth0 -batch -5", "-batch -5: must be 1-4096"},
		{"-i veth0 -batch 100000", "-batch 100000: must be 1-4096"},
		{"-i veth0 -t -1s", "-t -1s: must not be negative"},
		{"-i veth0 foo -t 1s", `unexpected argument "foo": every option is a -flag`},
		{"-i veth0 -t 1s foo", `unexpected argument "foo"`},
		{"-i veth0 -- -t 1s", `unexpected argument "-t"`},
		{"-i veth0 -nap -1us", "-nap -1µs: must not be negative"},
		{"-i veth0 -frames 15", "-frames 15: must be 0 (the library's default, 4096) or 16-1048576"},
		{"-i veth0 -frames 1048577", "-frames 1048577"},
		{"-i veth0 -frames -1", "-frames -1"},
		{"-i veth0 -q 4096", "-q: bad queue"},
		{"", "-i IFACE is required"},
		{"-port 9000", "-i IFACE is required"},
		{"-i veth0 -demo-queues 3", "-demo-queues"}, // the demo harness's flag, not rxdrop's
		{"-demo", "-demo"},
		{"-i veth0 -bogus", "-bogus"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err := parseFlags(splitArgs(tc.args))
			var ue *exutil.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseFlags: %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want it to say %q", err, tc.want)
			}
			if !strings.HasPrefix(ue.Usage, "usage: rxdrop -i IFACE") || !strings.Contains(ue.Usage, "-frames") {
				t.Errorf("usage text %q", ue.Usage)
			}
		})
	}
}

// FuzzParseFlags: any command line is options within their documented
// ranges, each the value the command line gave, or a usage error; never a
// panic, never a flag silently ignored after a stray argument.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{
		"-i veth0", "-i veth0 -port 9000", "-i veth0 -port 70000", "-i veth0 -port -1", "-i veth0 -port 65536",
		"-i veth0 -batch 0", "-i veth0 -batch -5", "-i veth0 -batch 100000", "-i veth0 -batch 4096",
		"-i veth0 -t -1s", "-i veth0 foo -t 1s", "-i veth0 -t 1s", "-i veth0 -frames 2048", "-i veth0 -frames 8",
		"-i veth0 -nap 30us -one-thread", "-demo -demo-queues 3 -q 0-2", "-demo -i veth0", "-i veth0 -q 0-3 -port=0x2328",
		"-h", "", "-i veth0 --", "-i  -port 1", "-i veth0 -copy=false -skb",
		"-i veth0 -shape one -raw", "-i veth0 -shape bogus", "-i veth0 -shape per-queue -one-thread",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := splitArgs(line)
		o, err := parseFlags(args)
		if err != nil {
			var ue *exutil.UsageError
			if !errors.As(err, &ue) || !strings.HasPrefix(ue.Usage, "usage: rxdrop") {
				t.Fatalf("parseFlags(%q): %v is not a usage error with the usage", args, err)
			}
			return
		}
		given, rest, err := flagtest.Given(flagSet(new(options)), args)
		if err != nil || len(rest) > 0 {
			t.Fatalf("parseFlags(%q) accepted what reads as %v, arguments %q left over", args, err, rest)
		}
		if err := flagtest.CheckGiven(&o.Flags, given); err != nil {
			t.Fatalf("parseFlags(%q): %v", args, err)
		}
		port, err := flagtest.GivenInt(given, "port", 0)
		if err != nil || o.port != port || port < 0 || port > 65535 {
			t.Fatalf("parseFlags(%q): -port %q gave %d", args, given["port"], o.port)
		}
		cfg, err := o.config()
		if err != nil {
			t.Fatalf("parseFlags(%q) accepted, config fails: %v", args, err)
		}
		if want := xsk.UDPPort(uint16(port)); port == 0 && len(cfg.Program.Filter) != 0 ||
			port != 0 && (len(cfg.Program.Filter) != 1 || cfg.Program.Filter[0] != want || int(cfg.Program.Filter[0].DstPortMin) != port) {
			t.Fatalf("parseFlags(%q): -port %d filters %+v", args, port, cfg.Program.Filter)
		}
		l := o.loop()
		if (l.shape == xsk.ShapeOne) != (o.oneThread || o.shape == "one") || (l.shape == xsk.ShapePerQueue) != (o.shape == "per-queue") ||
			l.raw != o.raw || (!o.raw && cfg.Socket.RXNap != 0) || (o.raw && cfg.Socket.RXNap != o.Nap) {
			t.Fatalf("parseFlags(%q): -shape %q -one-thread %v -raw %v gave loop %+v, RXNap %v", args, o.shape, o.oneThread, o.raw, l, cfg.Socket.RXNap)
		}
		if o.Iface == "" {
			t.Fatalf("parseFlags(%q): no -i", args)
		}
	})
}

// -h prints the usage and exits 0, a bad flag exits 2, as in every example.
func TestHelp(t *testing.T) { flagtest.CheckHelp(t, "rxdrop", run) }
