package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		{[]string{"bench", "client", "-c", "198.18.0.2", "--rss-key", "6d5a"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--rss-queues", "2", "--rss-table", "0,1"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--rss-table", "0,x"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--rss-queues", "2", "--rss-key", "zz"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--rx-usecs", "50"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--adaptive"}, true},
		{[]string{"bench", "server", "--backend", "socket", "--queues", "0"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "-6"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "-4", "-6"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--mode", "sctp"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--mode", "tcp"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--tso", "off"}, true},
		{[]string{"bench", "client", "-c", "198.18.0.2", "--mode", "tcp", "--tso", "maybe"}, true},
		{[]string{"bench", "server", "--tcp-port", "5201"}, true},
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
		{[]string{"bench", "client", "-c", "198.18.0.99", "-l", "70000"}, 2, "-l 70000"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-l", "8"}, 2, "-l 8"},
		{[]string{"features", "set", "lo", "no-such-feature", "on"}, 2, `unknown feature "no-such-feature"`},
		{[]string{"channels", "show"}, 2, "channels show: accepts 1 arg(s), received 0\nUsage: xdpio channels show DEV"},
		{[]string{"channels"}, 0, "Available Commands"},
		{[]string{"--version"}, 0, "xdpio "},
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
		if jerr := json.Unmarshal(out.Bytes(), &v); jerr != nil || v.Error == nil || *v.Error != err.Error() || v.ExitStatus != exitStatus(err) {
			t.Errorf("%q: stdout %q (%v), want {\"error\": %q, \"exit_status\": %d}", args, out.String(), jerr, err, exitStatus(err))
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
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		if exitStatus(err) != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%q: %v (status %d), want status 2 and %q", tc.args, err, exitStatus(err), tc.want)
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
	for _, args := range [][]string{{"coalesce", "set", "--help"}, {"rings", "set", "--help"}, {"bench", "client", "--help"}, {"channels", "set", "--help"}} {
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
