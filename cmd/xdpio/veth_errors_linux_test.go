//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
)

// veth has no interrupt coalescing and no ring parameters (ethtool -c
// and -g, the oracle, say "Operation not supported"): every coalesce and
// rings command says so in one line, what the driver lacks, not which
// request found out ("reading coalesce" for a set command).
func TestCLIVethNoCoalescingNoRings(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	ns, dev := p.A.NS, p.A.Link
	for _, flag := range []string{"-c", "-g"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := p.A.Command(ctx, "ethtool", flag, dev).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "not supported") {
			t.Fatalf("ethtool %s %s: %v: %s; this test is about a driver without it", flag, dev, err, out)
		}
	}
	coalesce := dev + ": interrupt coalescing (ethtool -c/-C) is not supported by the driver"
	rings := dev + ": ring parameters (ethtool -g/-G) are not supported by the driver"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coalesce", "set", dev, "rx-usecs", "10"}, coalesce},
		{[]string{"coalesce", "set", dev, "--rx-usecs", "10", "--dry-run"}, coalesce},
		{[]string{"coalesce", "set", dev, "--rx-usecs", "10", "--queues", "0"}, coalesce},
		{[]string{"coalesce", "show", dev}, coalesce},
		{[]string{"coalesce", "show", dev, "--queues", "0"}, coalesce},
		{[]string{"rings", "set", dev, "rx", "256"}, rings},
		{[]string{"rings", "set", dev, "--tx", "256", "--dry-run"}, rings},
		{[]string{"rings", "show", dev}, rings},
	} {
		out, code, err := cli(t, append([]string{"--netns", ns}, tc.args...)...)
		if code != 1 || out != "" || err.Error() != tc.want || !errors.Is(err, nic.ErrNotSupported) {
			t.Errorf("%v: exit %d, stdout %q, %v; want exit 1 and %q", tc.args, code, out, err, tc.want)
		}
	}
	_, _, err := cli(t, "--netns", ns, "coalesce", "set", dev, "rx-usecs", "10")
	t.Logf("xdpio --netns NS coalesce set %s rx-usecs 10: %v", dev, err)
	_, _, err = cli(t, "--netns", ns, "rings", "set", dev, "rx", "256")
	t.Logf("xdpio --netns NS rings set %s rx 256: %v", dev, err)
}

// --netns with a name no namespace has: one line naming it, saying it
// does not exist and where the names are; exit 1; under --json too.
func TestCLINetnsMissing(t *testing.T) {
	netnstest.RequirePriv(t)
	name := fmt.Sprintf("xdpio-nosuchns-%d", os.Getpid())
	if _, err := os.Stat(netnsDir + "/" + name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s/%s: %v; want it absent", netnsDir, name, err)
	}
	for _, args := range [][]string{
		{"stats", "lo"},
		{"channels", "show", "lo"},
		{"coalesce", "set", "lo", "rx-usecs", "10"},
		{"features", "set", "lo", "gro", "on"},
		{"napi", "show", "lo"},
	} {
		out, code, err := cli(t, append([]string{"--netns", name}, args...)...)
		want := `--netns "` + name + `": no such network namespace (`
		if code != 1 || out != "" || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: exit %d, stdout %q, %v; want exit 1 and %q…", args, code, out, err, want)
		}
		out, code, _ = cli(t, append([]string{"--json", "--netns", name}, args...)...)
		if code != 1 || !strings.Contains(out, `"error": "--netns \"`+name+`\": no such network namespace`) {
			t.Errorf("--json %v: exit %d:\n%s", args, code, out)
		}
	}
	_, _, err := cli(t, "--netns", name, "stats", "lo")
	t.Logf("xdpio --netns %s stats lo: %v", name, err)
}
