package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// noDev names no interface: a case that got past its usage check would
// fail on the device (status 1, and the test fails), never change one.
const noDev = "xdpio-nodev0"

// Every way a command line can be wrong, one case each: cobra's own
// refusals (unknown command, flag, argument count, required flag), the
// checks the commands make, and a mistyped subcommand however flags
// surround it. Each is a usage error (status 2) whose text ends with the
// one line that points to the --help of the command that refused it, as
// the README promises; under --json, stdout holds one JSON object whose
// error is the text without that line.
func TestEveryUsageErrorPointsToHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string // the command whose --help the last line names
		want string
	}{
		// Unknown commands, with "Did you mean" also when flags follow
		// or precede the typo.
		{[]string{"chanels", "show", noDev}, "xdpio", "Did you mean this?\n\tchannels"},
		{[]string{"chanels", "--netns", "x", "show"}, "xdpio", "Did you mean this?\n\tchannels"},
		{[]string{"bench", "sevrer", "-1"}, "xdpio bench", `unknown command "sevrer" for "xdpio bench"` + "\n\nDid you mean this?\n\tserver"},
		{[]string{"bench", "clinet", "-c", "X"}, "xdpio bench", "Did you mean this?\n\tclient"},
		{[]string{"bench", "-c", "X", "clinet"}, "xdpio bench", "Did you mean this?\n\tclient"},
		{[]string{"bench", "clinet", "--port=5201", "-P", "4", "-R"}, "xdpio bench", "Did you mean this?\n\tclient"},
		{[]string{"--netns", "x", "bench", "sever", "-1"}, "xdpio bench", "Did you mean this?\n\tserver"},
		{[]string{"channels", "shw", noDev, "--dry-run"}, "xdpio channels", "Did you mean this?\n\tset\n\tshow"},
		{[]string{"napi", "st", noDev, "--queue", "0"}, "xdpio napi", "Did you mean this?\n\tset"},
		{[]string{"pcap", "verfy", "-x", "f.pcap"}, "xdpio pcap", "Did you mean this?\n\tverify"},
		{[]string{"rss", "hsh", "--src", "198.18.0.1"}, "xdpio rss", "Did you mean this?\n\thash"},
		{[]string{"help", "chanels"}, "xdpio", "Did you mean this?\n\tchannels"},
		{[]string{"help", "bench", "sevrer"}, "xdpio bench", "Did you mean this?\n\tserver"},
		{[]string{"completion", "bsh"}, "xdpio completion", "Did you mean this?\n\tbash"},
		{[]string{"versoin"}, "xdpio", "Did you mean this?\n\tversion"},
		{[]string{"no-such-command"}, "xdpio", `unknown command "no-such-command" for "xdpio"`},
		// Flags cobra cannot parse.
		{[]string{"--bogus"}, "xdpio", "unknown flag: --bogus"},
		{[]string{"bench", "-1"}, "xdpio bench", "unknown shorthand flag: '1' in -1"},
		{[]string{"channels", "show", noDev, "--bogus"}, "xdpio channels show", "unknown flag: --bogus"},
		{[]string{"stats", noDev, "--watch", "x"}, "xdpio stats", `--watch "x": want a duration`},
		{[]string{"channels", "set", noDev, "--rx", "x"}, "xdpio channels set", `--rx "x": want a whole number`},
		{[]string{"coalesce", "set", noDev, "rx-usecs", "-1"}, "xdpio coalesce set", `--rx-usecs "-1": want a whole number`},
		{[]string{"channels", "set", noDev, "-1"}, "xdpio channels set", "unknown shorthand flag: '1' in -1"},
		// Argument counts and required flags.
		{[]string{"channels", "show"}, "xdpio channels show", "channels show: accepts 1 arg(s), received 0 (usage: xdpio channels show DEV [flags])"},
		{[]string{"rss", "show", "a", "b"}, "xdpio rss show", "accepts 1 arg(s), received 2"},
		{[]string{"stats"}, "xdpio stats", "accepts 1 arg(s), received 0"},
		{[]string{"version", "x"}, "xdpio version", `unknown command "x" for "xdpio version"`},
		{[]string{"pcap", "segment", "--mss", "1448", "in.pcap"}, "xdpio pcap segment", "accepts 2 arg(s), received 1"},
		{[]string{"bench", "client"}, "xdpio bench client", `required flag(s) "client" not set`},
		// The commands' own checks.
		{[]string{"channels", "set", noDev}, "xdpio channels set", "give at least one of --rx"},
		{[]string{"channels", "set", noDev, "rx"}, "xdpio channels set", "NAME VALUE pairs"},
		{[]string{"coalesce", "set", noDev}, "xdpio coalesce set", "give at least one parameter"},
		{[]string{"rings", "set", noDev}, "xdpio rings set", "give at least one parameter"},
		{[]string{"rings", "set", noDev, "tcp-data-split", "-1"}, "xdpio rings set", "give a value starting with - as --tcp-data-split=-1"},
		{[]string{"rss", "set", noDev}, "xdpio rss set", "nothing to set"},
		{[]string{"rss", "hash", "--src", "198.18.0.1"}, "xdpio rss hash", "--src and --dst are required"},
		{[]string{"napi", "set", noDev}, "xdpio napi set", "give at least one of --defer-hard-irqs"},
		{[]string{"napi", "show", noDev, "--queue", "1", "--napi", "2"}, "xdpio napi show", "give --queue or --napi, not both"},
		{[]string{"features", "set", noDev, "gro", "on", "tso"}, "xdpio features set", "want NAME on|off pairs"},
		{[]string{"features", "set", noDev, "gro"}, "xdpio features set", "requires at least 3 arg(s)"},
		{[]string{"stats", noDev, "--watch", "-1s"}, "xdpio stats", "--watch -1s: must be positive"},
		{[]string{"stats", noDev, "--count", "2"}, "xdpio stats", "--count needs --watch"},
		{[]string{"filter", "check", "udp", "tcp"}, "xdpio filter check", "want one expression"},
		{[]string{"pcap", "segment", "--mss", "0", "in.pcap", "out.pcap"}, "xdpio pcap segment", "invalid --mss 0"},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.99", "-l", "70000"}, "xdpio bench client", "-l 70000"},
		{[]string{"bench", "server", "--cookie-timeout", "0"}, "xdpio bench server", "--cookie-timeout"},
		{[]string{"bench", "demo", "--duration", "0"}, "xdpio bench demo", "--duration 1-60"},
		{[]string{"exporter", noDev, "--listen", "9435"}, "xdpio exporter", "want HOST:PORT"},
		{[]string{"exporter"}, "xdpio exporter", "requires at least 1 arg(s), only received 0"},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		hint := "Run '" + tc.cmd + " --help' for usage."
		if exitStatus(err) != 2 {
			t.Errorf("%q: %v (status %d), want a usage error (status 2)", tc.args, err, exitStatus(err))
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || !strings.HasSuffix(msg, "\n"+hint) || strings.Count(msg, "Run '") != 1 || strings.Contains(msg, "Flags:") {
			t.Errorf("%q:\n%s\nwant %q and, last, the one line %q", tc.args, msg, tc.want, hint)
		}
		// --json given anywhere, also after what cobra refused.
		for _, jargs := range [][]string{append([]string{"--json"}, tc.args...), append(slices.Clone(tc.args), "-J")} {
			var jout bytes.Buffer
			jerr := runWith(context.Background(), &globals{stdout: &jout, stderr: &jout}, jargs)
			var v struct {
				Error      string `json:"error"`
				ExitStatus int    `json:"exit_status"`
			}
			dec := json.NewDecoder(&jout)
			dec.DisallowUnknownFields()
			if e := dec.Decode(&v); e != nil || dec.More() {
				t.Errorf("%q: stdout is not one JSON error object (%v): %q", jargs, e, jout.String())
				continue
			}
			if jerr == nil || v.ExitStatus != 2 || v.Error != strings.TrimRight(strings.TrimSuffix(jerr.Error(), hint), "\n") ||
				strings.Contains(v.Error, "--help") || strings.HasSuffix(v.Error, "\n") || !strings.Contains(v.Error, tc.want) {
				t.Errorf("%q: JSON %+v, error %v: want the error without the --help line, status 2", jargs, v, jerr)
			}
		}
	}
}

// commandWords finds a subcommand's name among flags as cobra does: a
// flag it knows takes its value along only if it has one, one it does
// not know is taken to have one.
func TestCommandWords(t *testing.T) {
	root := newRoot(&globals{})
	bench, _, _ := root.Find([]string{"bench"})
	bench.InitDefaultHelpFlag()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"sevrer", "-1"}, []string{"sevrer"}},
		{[]string{"-c", "X", "clinet"}, []string{"clinet"}},
		{[]string{"--json", "sevrer"}, []string{"sevrer"}},         // a bool flag has no value
		{[]string{"--netns", "ns1", "sevrer"}, []string{"sevrer"}}, // --netns takes one
		{[]string{"--netns=ns1", "-h", "sevrer"}, []string{"sevrer"}},
		{[]string{"-1"}, nil},
		{[]string{"--", "sevrer"}, nil},
		{[]string{"-", "x"}, []string{"x"}},
	} {
		if got := commandWords(tc.args, bench.Flags()); !slices.Equal(got, tc.want) {
			t.Errorf("commandWords(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// Plain `xdpio` shows the help on stdout and exits 0, as cobra tools do
// (the README says so); a group without its subcommand does the same.
func TestNoCommandShowsHelp(t *testing.T) {
	for _, args := range [][]string{nil, {"bench"}, {"--json"}} {
		var out, errOut bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &errOut}, args)
		if err != nil || !strings.Contains(out.String(), "Available Commands:") || errOut.Len() != 0 {
			t.Errorf("%q: %v, stdout %q, stderr %q: want the help on stdout, status 0", args, err, out.String(), errOut.String())
		}
	}
}
