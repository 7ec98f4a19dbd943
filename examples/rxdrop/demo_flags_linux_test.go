//go:build linux

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/xsk"
)

func TestParseDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		args  string
		check func(d demoOptions) bool
	}{
		{"", func(d demoOptions) bool { return d.queues == 2 && d.Iface == "" && d.port == 0 }},
		{"-demo-queues 4 -q 3 -t 1s", func(d demoOptions) bool { return d.queues == 4 && d.Queues == "3" }},
		{"-shape one -raw", func(d demoOptions) bool { l := d.loop(); return l.raw && l.shape == xsk.ShapeOne }},
	} {
		t.Run(tc.args, func(t *testing.T) {
			d, err := parseDemoFlags(splitArgs(tc.args))
			if err != nil {
				t.Fatalf("parseDemoFlags: %v", err)
			}
			if !tc.check(d) {
				t.Fatalf("parseDemoFlags gave %+v", d)
			}
		})
	}
}

func TestParseDemoFlagsRejects(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-i veth0", "-demo makes its own veth pair"},
		{"-port 9", "-demo makes its own veth pair"},
		{"-demo-queues 0", "-demo-queues 0: must be 1-4096"},
		{"-demo-queues 4097", "-demo-queues 4097: must be 1-4096"},
		{"-q 2", "-q 2: the demo veth pair has queues 0-1"},
		{"-shape two", `-shape "two": must be auto, per-queue or one`},
		{"-t 1s foo", `unexpected argument "foo"`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err := parseDemoFlags(splitArgs(tc.args))
			var ue *exutil.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseDemoFlags: %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want it to say %q", err, tc.want)
			}
		})
	}
}

// FuzzParseDemoFlags: the demo's command line is rxdrop's options for a
// veth pair of -demo-queues queues it makes itself, or a usage error.
func FuzzParseDemoFlags(f *testing.F) {
	for _, s := range []string{"", "-demo-queues 3 -q 0-2", "-i veth0", "-port 9", "-demo-queues 0", "-q 2", "-t 1s -shape one"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := splitArgs(line)
		d, err := parseDemoFlags(args)
		if err != nil {
			var ue *exutil.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseDemoFlags(%q): %v is not a usage error", args, err)
			}
			return
		}
		if d.queues < 1 || d.queues > exutil.MaxQueue+1 {
			t.Fatalf("parseDemoFlags(%q): -demo-queues %d", args, d.queues)
		}
		cfg, err := d.config()
		if err != nil {
			t.Fatalf("parseDemoFlags(%q) accepted, config fails: %v", args, err)
		}
		for _, q := range cfg.Queues {
			if q >= d.queues {
				t.Fatalf("parseDemoFlags(%q): queue %d on a demo pair of %d", args, q, d.queues)
			}
		}
		if d.Iface != "" || d.port != 0 {
			t.Fatalf("parseDemoFlags(%q): -i %q -port %d", args, d.Iface, d.port)
		}
	})
}
