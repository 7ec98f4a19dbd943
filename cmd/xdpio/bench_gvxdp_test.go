package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The gvisor-xdp backend's usage errors (exit 2), before anything is
// opened: it runs TCP tests only, has one queue, takes none of
// netstack's settings, and needs an interface; --qdisc is its own.
func TestBenchGvisorXDPUsage(t *testing.T) {
	gx := []string{"--backend", "gvisor-xdp", "-i", "eth9"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"bench", "client", "-c", "198.18.0.99", "-u"}, gx...), "--backend gvisor-xdp runs TCP tests only"},
		{append([]string{"bench", "client", "-c", "198.18.0.99", "--queues", "0-1"}, gx...), "--queues 0-1: gVisor's AF_XDP endpoint has one queue, queue 0"},
		{append([]string{"bench", "server", "--queues", "1"}, gx...), "--queues 1: gVisor's AF_XDP endpoint has one queue, queue 0"},
		{append([]string{"bench", "client", "-c", "198.18.0.99", "--tso", "on"}, gx...), "--tso: about xdpio's AF_XDP queues and netstack, not the gvisor-xdp backend"},
		{append([]string{"bench", "server", "--rx-usecs", "50", "--one-reader"}, gx...), "--rx-usecs, --one-reader: about xdpio's AF_XDP queues and netstack, not the gvisor-xdp backend"},
		{append([]string{"bench", "server", "--qdisc", "pfifo"}, gx...), `--qdisc "pfifo": want fifo or none`},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--backend", "gvisor-xdp"}, "--backend gvisor-xdp needs -i IFACE"},
		{[]string{"bench", "server", "--backend", "gvisor-xdp"}, "--backend gvisor-xdp needs -i IFACE"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-i", "eth9", "--qdisc", "none"}, "--qdisc: about the gvisor-xdp backend's stack"},
		{[]string{"bench", "server", "--backend", "socket", "--qdisc", "fifo"}, "--qdisc: about the gvisor-xdp backend's stack"},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		if exitStatus(err) != 2 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (status %d), want status 2 and %q", tc.args, err, exitStatus(err), tc.want)
		}
	}
}
