package main

import (
	"bytes"
	"context"
	"errors"
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
