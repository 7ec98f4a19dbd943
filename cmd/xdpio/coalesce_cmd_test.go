//go:build linux

package main

import (
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
)

func TestParseQueueList(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": {0}, "3,1": {1, 3}, "0-3": {0, 1, 2, 3}, "2-3,0,3": {0, 2, 3}} {
		got, err := parseQueueList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseQueueList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "-1", "3-1", "0-4096", "1,", "a-b"} {
		if _, err := parseQueueList(bad); err == nil {
			t.Errorf("parseQueueList(%q) accepted", bad)
		}
	}
}

// TestCLICoalesceQueuesEth0 compares `coalesce show eth0 --queues 0` with
// ethtool -Q (read-only).
func TestCLICoalesceQueuesEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	want, err := exec.Command("ethtool", "-Q", "eth0", "queue_mask", "0x1", "--show-coalesce").CombinedOutput()
	if err != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", "has no per-queue coalescing: "+strings.TrimSpace(string(want)))
	}
	out, code, err := cli(t, "coalesce", "show", "eth0", "--queues", "0")
	if code != 0 {
		t.Fatal(err)
	}
	matched := 0
	for _, name := range []string{"rx-usecs", "rx-frames", "tx-usecs", "tx-frames"} {
		re := regexp.MustCompile(`(?m)^` + name + `: (\S+)$`)
		g, w := re.FindStringSubmatch(out), re.FindStringSubmatch(string(want))
		if g == nil || w == nil {
			continue
		}
		matched++
		if g[1] != w[1] {
			t.Errorf("queue 0 %s: xdpio %s, ethtool -Q %s", name, g[1], w[1])
		}
	}
	if matched == 0 {
		t.Errorf("no parameter in common:\n%s\n---\n%s", out, want)
	}
	if _, code, _ := cli(t, "coalesce", "show", "eth0", "--queues", "1-0"); code != 2 {
		t.Errorf("bad --queues: exit %d, want 2", code)
	}
}
