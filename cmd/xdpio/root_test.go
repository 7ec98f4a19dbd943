package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestUsageErrorsAreTold(t *testing.T) {
	// A command whose operation fails with a kernel-like text that reads
	// like a usage problem: it must still be an operation error (exit 1).
	subcommands = append(subcommands, func(g *globals) *cobra.Command {
		return &cobra.Command{
			Use:  "failing-op-for-test",
			Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error { return errors.New("set channels: invalid argument") },
		}
	})
	defer func() { subcommands = subcommands[:len(subcommands)-1] }()
	for _, tc := range []struct {
		args  []string
		usage bool
	}{
		{[]string{"no-such-command"}, true},
		{[]string{"failing-op-for-test", "extra"}, true},
		{[]string{"failing-op-for-test", "--no-such-flag"}, true},
		{[]string{"failing-op-for-test"}, false},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.2", "--rss-key", "6d5a"}, true},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.2", "--rss-queues", "2", "--rss-table", "0,1"}, true},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.2", "--rss-table", "0,x"}, true},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.2", "--rss-queues", "2", "--rss-key", "zz"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--rx-usecs", "50"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--adaptive"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--queues", "0"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "-6"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "-4", "-6"}, true},
		{[]string{"bench", "server", "--cookie-timeout", "0"}, true},
		{[]string{"bench", "server", "--cookie-timeout", "-1s"}, true},
		{[]string{"bench", "server", "--cookie-timeout", "2"}, true},
		{[]string{"bench", "server", "--backend", "xsk", "-i", "x", "--queues", "0-"}, true},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		var ue *usageError
		if err == nil || errors.As(err, &ue) != tc.usage {
			t.Errorf("%v: error %v, usage error %v, want usage %v", tc.args, err, errors.As(err, &ue), tc.usage)
		}
	}
}

// What a script sees: the exit status of a mistyped subcommand, a missing
// or bad flag, with cobra's suggestions where a command was mistyped, and
// nothing connected (the client's server address is one nobody answers
// for: a connect attempt would fail as an operation error, status 1).
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"channels", "shw", "eth0"}, 2, "Did you mean this?\n\tset\n\tshow"},
		{[]string{"pcap", "verfy", "x.pcap"}, 2, "Did you mean this?\n\tverify"},
		{[]string{"features", "sett", "lo", "gro", "on"}, 2, "Did you mean this?\n\tset"},
		{[]string{"bench", "srv"}, 2, "Did you mean this?\n\tserver"},
		{[]string{"rss", "hsh"}, 2, "Did you mean this?\n\thash"},
		{[]string{"bench", "client"}, 2, `required flag(s) "client" not set`},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.99", "-l", "70000"}, 2, "-l 70000"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-l", "2000000"}, 2, "-l 2000000"},
		{[]string{"bench", "client", "-u", "-c", "198.18.0.99", "-l", "8"}, 2, "-l 8"},
		{[]string{"features", "set", "lo", "no-such-feature", "on"}, 2, `unknown feature "no-such-feature"`},
		{[]string{"channels", "show"}, 2, "channels show: accepts 1 arg(s), received 0 (usage: xdpio channels show DEV [flags])\nRun 'xdpio channels show --help' for usage."},
		{[]string{"channels"}, 0, "Available Commands"},
		{[]string{"--version"}, 0, "xdpio "},
		{[]string{"version"}, 0, "xdpio "},
		{[]string{"versoin"}, 2, "Did you mean this?\n\tversion"},
		{[]string{"version", "x"}, 2, `unknown command "x"`},
	} {
		var out, errOut bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &errOut}, tc.args)
		got := out.String()
		if err != nil {
			got = err.Error()
		}
		if exitStatus(err) != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("%q: status %d, %q; want status %d and %q", tc.args, exitStatus(err), got, tc.status, tc.want)
		}
	}
}

// Under --json (or iperf3's -J) a failure prints a JSON object with the
// error on stdout, so that a script parsing stdout gets an answer.
func TestJSONError(t *testing.T) {
	for _, args := range [][]string{
		{"--json", "features", "set", "lo", "no-such-feature", "on"},
		{"-J", "channels", "show", "no-such-dev0"},
		{"-J", "pcap", "verify", "/nonexistent/x.pcap"},
	} {
		var out, errOut bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &errOut}, args)
		var v struct {
			Error      *string `json:"error"`
			ExitStatus int     `json:"exit_status"`
		}
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		// The error's text, less the line that points a person to --help.
		want := strings.TrimSuffix(err.Error(), "\nRun 'xdpio "+strings.Join(args[1:3], " ")+" --help' for usage.")
		if jerr := json.Unmarshal(out.Bytes(), &v); jerr != nil || v.Error == nil || *v.Error != want || v.ExitStatus != exitStatus(err) {
			t.Errorf("%q: stdout %q (%v), want {\"error\": %q, \"exit_status\": %d}", args, out.String(), jerr, want, exitStatus(err))
		}
	}
}

// ethtool's positional settings work where ethtool users type them, and
// say what is wrong in words.
func TestEthtoolStyleAndFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"channels", "set", "lo", "rx"}, "NAME VALUE pairs"},
		{[]string{"channels", "set", "lo", "rx-usecs", "1"}, `unknown setting "rx-usecs"`},
		{[]string{"channels", "set", "lo", "rx", "2", "--rx", "3"}, "rx given twice"},
		{[]string{"channels", "set", "lo", "rx", "x"}, `--rx "x": want a whole number, 0 or more`},
		{[]string{"channels", "set", "--rx=-1", "lo"}, `--rx "-1": want a whole number, 0 or more`},
		{[]string{"coalesce", "set", "lo", "adaptive-rx", "maybe"}, "adaptive-rx"},
		{[]string{"coalesce", "set", "lo", "queues", "0"}, `unknown setting "queues"`},
		{[]string{"rings", "set", "lo", "dry-run", "true"}, `unknown setting "dry-run"`},
		{[]string{"bench", "server", "--cookie-timeout", "2"}, "want a duration such as 500ms or 2s"},
		// A negative value after a setting's name is that setting's value,
		// not a cluster of shorthand flags, and gets the flag form's words.
		{[]string{"coalesce", "set", "lo", "rx-usecs", "-1"}, `--rx-usecs "-1": want a whole number, 0 or more`},
		{[]string{"coalesce", "set", "lo", "--rx-usecs", "-1"}, `--rx-usecs "-1": want a whole number, 0 or more`},
		{[]string{"channels", "set", "lo", "rx", "-1"}, `--rx "-1": want a whole number, 0 or more`},
		{[]string{"channels", "set", "lo", "rx", "1", "tx", "-2", "--dry-run"}, `--tx "-2": want a whole number, 0 or more`},
		{[]string{"channels", "set", "lo", "rx", "-1", "rx", "2"}, `--rx "-1": want a whole number, 0 or more`},
		{[]string{"rings", "set", "lo", "tcp-data-split", "-1"}, "rings set: tcp-data-split -1: give a value starting with - as --tcp-data-split=-1"},
		{[]string{"channels", "set", "lo", "-1"}, "unknown shorthand flag: '1' in -1"},
		{[]string{"channels", "set", "lo", "rx-usecs", "-1"}, `unknown setting "rx-usecs"`},
		{[]string{"channels", "set", "lo"}, "give at least one of --rx"},
		{[]string{"napi", "set", "lo", "--gro-flush-timeout", "x"}, "--gro-flush-timeout"},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		if exitStatus(err) != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%q: %v (status %d), want status 2 and %q", tc.args, err, exitStatus(err), tc.want)
			continue
		}
		// The message and where the usage is; not the usage of thirty
		// flags.
		cmd := "xdpio " + strings.Join(tc.args[:2], " ")
		if msg := err.Error(); strings.Contains(msg, "Flags:") || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\nRun '"+cmd+" --help' for usage.") || strings.Contains(msg, "xdpio: xdpio") {
			t.Errorf("%q: %q, want the message and a line pointing to --help", tc.args, msg)
		}
	}
	// Accepted: it reaches the device (lo has no channels to set, an
	// operation error, status 1, not a usage error).
	var out bytes.Buffer
	err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"channels", "set", "lo", "combined", "1", "--dry-run"})
	if exitStatus(err) != 1 {
		t.Errorf("channels set lo combined 1: %v (status %d), want the device's refusal (status 1)", err, exitStatus(err))
	}
}

// Help text: set-only flags claim no default, flag descriptions say what
// the setting does, and no backticked text turns into a value name.
func TestHelpText(t *testing.T) {
	for _, args := range [][]string{{"coalesce", "set", "--help"}, {"rings", "set", "--help"}, {"bench", "client", "--help"}, {"channels", "set", "--help"}, {"napi", "set", "--help"}} {
		var out bytes.Buffer
		if err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		h := out.String()
		if strings.Contains(h, "(default off)") || strings.Contains(h, "(default )") || strings.Contains(h, "--rx-usecs uint32             rx-usecs\n") ||
			strings.Contains(h, "--rss-key xdpio") || strings.Contains(h, "--rss-table xdpio") {
			t.Errorf("%q:\n%s", args, h)
		}
	}
}

// Every command's help: a set command's flags, applied only when given,
// claim no default ("(default 0s)" on napi set's durations), and no help
// names the Go API (offload.VerifyRX, xsk.ProgramConfig.Expr) instead of
// saying what the command does.
func TestHelpTextAllCommands(t *testing.T) {
	goName := regexp.MustCompile(`\b(offload|xsk|nic|rss|filter|bench|xdpnet|coalesce)\.[A-Z]\w*`)
	var walk func(path []string, c *cobra.Command)
	n := 0
	walk = func(path []string, c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(append(slices.Clone(path), sub.Name()), sub)
		}
		var out bytes.Buffer
		if err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, append(slices.Clone(path), "--help")); err != nil {
			t.Fatalf("%q --help: %v", path, err)
		}
		n++
		h := out.String()
		if c.Name() == "set" && strings.Contains(h, "(default") {
			t.Errorf("xdpio %s --help claims a default:\n%s", strings.Join(path, " "), h)
		}
		if m := goName.FindString(h); m != "" {
			t.Errorf("xdpio %s --help names the Go API %q", strings.Join(path, " "), m)
		}
	}
	walk(nil, newRoot(&globals{stdout: io.Discard, stderr: io.Discard}))
	if n < 20 {
		t.Errorf("walked %d commands", n)
	}
}

// --version and the version command show the VCS revision the build
// recorded, "+dirty" for a modified tree, and the commit time.
func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "515883abe60803c2dddab11d19df8177001f009e"}, {Key: "vcs.time", Value: "2026-12-03T15:04:05Z"}}
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0 go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Settings: rev}, "(devel) 515883abe608 (2026-12-03T15:04:05Z) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Settings: append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "(devel) 515883abe608+dirty (2026-12-03T15:04:05Z) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Settings: append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "false"})}, "(devel) 515883abe608 (2026-12-03T15:04:05Z) go1.26.8"},
		// A pseudo-version already names the revision.
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261203150405-515883abe608"}, Settings: rev}, "v0.0.0-20261203150405-515883abe608 go1.26.8"},
	} {
		if got := versionOf(&tc.bi); got != tc.want {
			t.Errorf("versionOf(%v) = %q, want %q", tc.bi.Settings, got, tc.want)
		}
	}
	var a, b bytes.Buffer
	if err := runWith(context.Background(), &globals{stdout: &a, stderr: io.Discard}, []string{"version"}); err != nil {
		t.Fatal(err)
	}
	if err := runWith(context.Background(), &globals{stdout: &b, stderr: io.Discard}, []string{"--version"}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || a.String() != "xdpio "+version()+"\n" {
		t.Errorf("version %q, --version %q, want both %q", a.String(), b.String(), "xdpio "+version()+"\n")
	}
}

// --cpuprofile writes a Go CPU profile (gzipped protobuf, its sample
// type cpu/nanoseconds) when the command ends; a file that cannot be
// created fails the command before it runs.
func TestCPUProfile(t *testing.T) {
	p := t.TempDir() + "/cpu.prof"
	if _, _, err := runCLI(t, "--cpuprofile", p, "version"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	b, err := io.ReadAll(z)
	if err != nil || !bytes.Contains(b, []byte("nanoseconds")) || !bytes.Contains(b, []byte("cpu")) {
		t.Fatalf("the profile (%d bytes, %v) has no cpu/nanoseconds sample type", len(b), err)
	}
	out, _, err := runCLI(t, "--cpuprofile", t.TempDir()+"/no/such/dir/cpu.prof", "version")
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") || out != "" {
		t.Errorf("--cpuprofile into a missing directory: %v, printed %q; want an error naming the flag, before the command ran", err, out)
	}
}
