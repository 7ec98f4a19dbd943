//go:build linux

package ethtool

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// DriverStats reads what `ethtool -S` prints (the oracle): the same
// names in the same order and, the veth being idle, the same values;
// a count of values other than the names' ends in errStatsChanged, not
// in the kernel writing past the buffer.
func TestIntegrationDriverStats(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: 3})
	var got []Stat
	var names []string
	inHost(t, p.B, func(c *Client) (err error) {
		if got, err = c.DriverStats(Device{Name: p.B.Link}); err != nil {
			return err
		}
		if names, err = c.StringSet(Device{Name: p.B.Link}, ssStats); err != nil {
			return err
		}
		// Other than the driver counts: this kernel answers n_stats 0.
		// n_stats 0 asks, as old kernels answer any count, for all the
		// driver has: the kernel's writes reach the guard page (EFAULT)
		// and nothing past the buffer.
		for _, n := range []int{0, 1, len(names) - 1, len(names) + 1, len(names) + 600} {
			want := errStatsChanged
			if n == 0 {
				want = errMoreStats
			}
			if _, err := gstats(Device{Name: p.B.Link}, "GSTATS", n); !errors.Is(err, want) {
				return fmt.Errorf("gstats with %d of %d values: %v, want %v", n, len(names), err, want)
			}
		}
		return nil
	})
	out := mustRun(t, p.B, "ethtool", "-S", p.B.Link)
	var want []Stat
	for _, line := range strings.Split(out, "\n") {
		var s Stat
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%s %d", &s.Name, &s.Value); err == nil {
			s.Name = strings.TrimSuffix(s.Name, ":")
			want = append(want, s)
		}
	}
	if len(want) < 3*7+3*2 {
		t.Fatalf("ethtool -S printed %d counters for a 3-queue veth:\n%s", len(want), out)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DriverStats:\n%v\nethtool -S:\n%v", got, want)
	}
}

// lo keeps no driver statistics: ethtool -S says so, DriverStats says
// ErrNotSupported. Read-only.
func TestIntegrationDriverStatsLo(t *testing.T) {
	ethtool := netnstest.RequireTool(t, "ethtool")
	out, err := exec.CommandContext(context.Background(), ethtool, "-S", "lo").CombinedOutput()
	if err == nil {
		t.Skipf("skipping: this kernel's lo has driver statistics:\n%s", out)
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.DriverStats(Device{Name: "lo"})
	if !errors.Is(err, ErrNotSupported) || st != nil {
		t.Errorf("DriverStats(lo): %v, %v; want ErrNotSupported, as ethtool -S says %q", st, err, strings.TrimSpace(string(out)))
	}
}
