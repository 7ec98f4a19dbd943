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
		{"-i veth0", func(o options) bool { return o.Iface == "veth0" && o.port == 0 && o.Batch == 64 }},
		{"-i veth0 -port 9000", func(o options) bool { return o.port == 9000 }},
		{"-i veth0 -port 65535 -batch 4096", func(o options) bool { return o.port == 65535 && o.Batch == 4096 }},
		{"-i veth0 -t 2s -frames 512 -q 1", func(o options) bool { return o.Duration == 2*time.Second && o.Frames == 512 && o.Queues == "1" }},
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
		{"-i veth0 -batch 0", "-batch 0: must be 1-4096"},
		{"-i veth0 -batch -5", "-batch -5"},
		{"-i veth0 -batch 100000", "-batch 100000"},
		{"-i veth0 -t -1s", "-t -1s: must not be negative"},
		{"-i veth0 foo -t 1s", `unexpected argument "foo": every option is a -flag`},
		{"-i veth0 -nap -1ms", "-nap -1ms"},
		{"-i veth0 -frames 1", "-frames 1: must be 0"},
		{"-i veth0 -q 1-0", "-q: bad queue range"},
		{"-port 9000", "-i IFACE is required"},
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
			if !strings.HasPrefix(ue.Usage, "usage: l2fwd -i IFACE") {
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
		"-i veth0 -batch 0", "-i veth0 -batch -5", "-i veth0 -batch 100000", "-i veth0 -t -1s", "-i veth0 foo -t 1s",
		"-i veth0 -frames 16 -q 0,2", "-i veth0 -nap 30us -copy", "-h", "", "-i veth0 -port=0b1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := splitArgs(line)
		o, err := parseFlags(args)
		if err != nil {
			var ue *exutil.UsageError
			if !errors.As(err, &ue) || !strings.HasPrefix(ue.Usage, "usage: l2fwd") {
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
		if o.Iface == "" {
			t.Fatalf("parseFlags(%q): no -i", args)
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
	})
}

// -h prints the usage and exits 0, a bad flag exits 2, as in every example.
func TestHelp(t *testing.T) { flagtest.CheckHelp(t, "l2fwd", run) }
