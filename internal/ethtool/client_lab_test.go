//go:build lab && linux

package ethtool_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/ethtool"
	"github.com/xdpio/xdpio/test/lab/labctl"
)

// labSections parses ethtool -l/-g output into its two sections ("max",
// "cur"), each mapping a field name ("RX", "TX", "Combined", …) to its
// value ("n/a" for an unsupported one).
func labSections(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	m := map[string]map[string]string{"max": {}, "cur": {}}
	sec := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Pre-set maximums"):
			sec = "max"
		case strings.HasPrefix(l, "Current hardware settings"):
			sec = "cur"
		case sec != "":
			if k, v, ok := strings.Cut(l, ":"); ok {
				m[sec][strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	return m
}

func labNum(t *testing.T, s string) uint32 {
	if s == "n/a" || s == "" {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		t.Fatalf("ethtool value %q: %v", s, err)
	}
	return uint32(v)
}

// TestLabClientVsEthtool reads channels and rings of the lab's netdevsim
// and virtio-net devices with the client and with the real ethtool (its
// netlink or ioctl path), and requires the same numbers.
func TestLabClientVsEthtool(t *testing.T) {
	c, err := ethtool.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{labctl.Netdevsim(t), labctl.Virtio(t)} {
		dev := ethtool.Device{Name: name}
		ch, err := c.Channels(dev)
		if err != nil {
			t.Fatalf("Channels(%s): %v", name, err)
		}
		out, err := labctl.Ethtool("-l", name)
		if err != nil {
			t.Fatal(err)
		}
		s := labSections(t, out)
		for _, f := range []struct {
			name     string
			cur, max uint32
			key      string
		}{
			{"RX", ch.RX, ch.RXMax, "RX"}, {"TX", ch.TX, ch.TXMax, "TX"},
			{"Other", ch.Other, ch.OtherMax, "Other"}, {"Combined", ch.Combined, ch.CombinedMax, "Combined"},
		} {
			if labNum(t, s["cur"][f.key]) != f.cur || labNum(t, s["max"][f.key]) != f.max {
				t.Errorf("%s channels %s: client %d/%d, ethtool -l %s/%s", name, f.name, f.cur, f.max, s["cur"][f.key], s["max"][f.key])
			}
		}
		r, err := c.Rings(dev)
		if err != nil {
			t.Fatalf("Rings(%s): %v", name, err)
		}
		out, err = labctl.Ethtool("-g", name)
		if err != nil {
			t.Fatal(err)
		}
		s = labSections(t, out)
		if labNum(t, s["cur"]["RX"]) != r.RX || labNum(t, s["max"]["RX"]) != r.RXMax ||
			labNum(t, s["cur"]["TX"]) != r.TX || labNum(t, s["max"]["TX"]) != r.TXMax {
			t.Errorf("%s rings: client rx %d/%d tx %d/%d; ethtool -g:\n%s", name, r.RX, r.RXMax, r.TX, r.TXMax, out)
		}
		t.Logf("%s: channels %+v; rings rx %d/%d tx %d/%d", name, ch, r.RX, r.RXMax, r.TX, r.TXMax)
	}
}
