// Package flagtest is the oracle of the examples' flag fuzz tests: it
// reads back what a command line said, for comparison with what
// exutil.Flags.Parse made of it. It serves the examples' tests only; the
// programs themselves need only package exutil.
package flagtest

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/xsk"
)

// Given parses args again against a copy of fs whose flags keep their text,
// and returns the text each flag given was last set to ("true" for a bare
// boolean flag) and the arguments left after the flags. It is the oracle of
// the examples' fuzz tests: what the command line said, for comparison with
// what Parse made of it.
func Given(fs *flag.FlagSet, args []string) (map[string]string, []string, error) {
	given := map[string]string{}
	shadow := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shadow.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		shadow.Var(textValue{given, f.Name, ok && b.IsBoolFlag()}, f.Name, f.Usage)
	})
	err := shadow.Parse(args)
	return given, shadow.Args(), err
}

// textValue is a flag.Value that records the text it is set to.
type textValue struct {
	given  map[string]string
	name   string
	isBool bool
}

func (v textValue) String() string     { return "" }
func (v textValue) IsBoolFlag() bool   { return v.isBool }
func (v textValue) Set(s string) error { v.given[v.name] = s; return nil }

// GivenInt returns what the flag package makes of flag name's text in
// given as an int (base prefixes and underscores allowed), or def if the
// flag was not given.
func GivenInt(given map[string]string, name string, def int) (int, error) {
	s, ok := given[name]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	return int(v), err
}

// CheckGiven reports where f differs from what the command line said
// (given, from Given) or holds a value outside its documented range, and
// whether Config accepts it: for the examples' fuzz tests, on command lines
// Parse accepted.
func CheckGiven(f *exutil.Flags, given map[string]string) error {
	batch, err := GivenInt(given, "batch", exutil.DefaultBatch)
	if err != nil || batch != f.Batch || f.Batch < 1 || f.Batch > exutil.MaxBatch {
		return fmt.Errorf("-batch %q gave %d (%v), want it as given and within 1-%d", given["batch"], f.Batch, err, exutil.MaxBatch)
	}
	frames, err := GivenInt(given, "frames", 0)
	if err != nil || frames != f.Frames || (f.Frames != 0 && (f.Frames < exutil.MinFrames || f.Frames > exutil.MaxFrames)) {
		return fmt.Errorf("-frames %q gave %d (%v), want it as given and 0 or %d-%d", given["frames"], f.Frames, err, exutil.MinFrames, exutil.MaxFrames)
	}
	for _, d := range []struct {
		name string
		got  time.Duration
	}{{"t", f.Duration}, {"nap", f.Nap}} {
		want := time.Duration(0)
		if s, ok := given[d.name]; ok {
			if want, err = time.ParseDuration(s); err != nil {
				return fmt.Errorf("-%s %q: accepted, but it is no duration: %w", d.name, s, err)
			}
		}
		if d.got != want || d.got < 0 {
			return fmt.Errorf("-%s %q gave %v, want it as given and not negative", d.name, given[d.name], d.got)
		}
	}
	if s, ok := given["q"]; ok && s != f.Queues {
		return fmt.Errorf("-q %q gave %q", s, f.Queues)
	}
	for _, b := range []struct {
		name string
		got  bool
	}{{"copy", f.Copy}, {"skb", f.Generic}} {
		want := false
		if s, ok := given[b.name]; ok {
			if want, err = strconv.ParseBool(s); err != nil {
				return fmt.Errorf("-%s=%q: accepted, but it is no boolean: %w", b.name, s, err)
			}
		}
		if b.got != want {
			return fmt.Errorf("-%s %q gave %v", b.name, given[b.name], b.got)
		}
	}
	if s := given["i"]; s != f.Iface {
		return fmt.Errorf("-i %q gave %q", s, f.Iface)
	}
	cfg, err := f.Config()
	if err != nil {
		return fmt.Errorf("accepted flags, but Config fails: %w", err)
	}
	qs, _ := exutil.ParseQueues(f.Queues)
	if len(cfg.Queues) != len(qs) || cfg.Socket.RXNap != f.Nap || cfg.UMEM.NumFrames != f.Frames ||
		(cfg.Socket.Bind == xsk.BindCopy) != f.Copy || (cfg.Program.Attach == xsk.AttachGeneric) != f.Generic {
		return fmt.Errorf("the xsk.Config %+v of Flags.Config does not say what the flags %+v do", cfg, f)
	}
	return nil
}

// CheckHelp checks that run, the run function of the example called name,
// ends the way every example's does through exutil.Exit: -h and -help
// print the usage (with the flags) and give exit status 0; an unknown flag
// or a stray argument prints the error and the usage and gives 2.
func CheckHelp(t *testing.T, name string, run func(args []string) error) {
	t.Helper()
	usage := "usage: " + name + " "
	for _, tc := range []struct {
		args   []string
		status int
		out    string // the output's start
	}{
		{[]string{"-h"}, 0, usage},
		{[]string{"-help"}, 0, usage},
		{[]string{"-bogus"}, 2, name + ": flag provided but not defined: -bogus\n" + usage},
		{[]string{"-i", "veth0", "stray"}, 2, name + `: unexpected argument "stray"`},
	} {
		var b strings.Builder
		status := exutil.Exit(&b, name, run(tc.args))
		if status != tc.status || !strings.HasPrefix(b.String(), tc.out) || !strings.Contains(b.String(), "\nflags:\n  -") {
			t.Errorf("%s %q: exit status %d, printing:\n%s\nwant status %d, the usage with the flags, starting %q", name, tc.args, status, b.String(), tc.status, tc.out)
		}
	}
}
