//go:build linux

package nic

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

func u32(v uint32) *uint32 { return &v }

func TestUnsupportedCoalesce(t *testing.T) {
	on := true
	supported := Coalesce{RXUsecs: u32(0), RXMaxFrames: u32(1), UseAdaptiveRX: &on}
	for _, tc := range []struct {
		p    Coalesce
		want string
	}{
		{Coalesce{RXUsecs: u32(50)}, ""},
		{Coalesce{RXUsecs: u32(50), UseAdaptiveRX: &on}, ""},
		{Coalesce{RXUsecsIRQ: u32(5)}, "ETHTOOL_A_COALESCE_RX_USECS_IRQ"},
		{Coalesce{RXUsecs: u32(5), UseAdaptiveTX: &on}, "ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX"},
		{Coalesce{TXAggrMaxBytes: u32(5)}, "ETHTOOL_A_COALESCE_TX_AGGR_MAX_BYTES"},
		{Coalesce{RXProfile: []IRQModeration{{Usec: u32(1)}}}, "ETHTOOL_A_COALESCE_RX_PROFILE"},
	} {
		if got := UnsupportedCoalesce(supported, tc.p); got != tc.want {
			t.Errorf("UnsupportedCoalesce(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	if s := SupportedCoalesce(supported); s != "ETHTOOL_A_COALESCE_RX_USECS, ETHTOOL_A_COALESCE_RX_MAX_FRAMES, ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX" {
		t.Errorf("SupportedCoalesce = %q", s)
	}
}

func TestCoalesceNotSupportedOnVeth(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openDev(t, pair.A, pair.A.Link)
	var errGet, errSet error
	if err := pair.A.Do(func() error {
		_, errGet = d.Coalesce()
		errSet = d.SetCoalesce(Coalesce{RXUsecs: u32(50)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Get": errGet, "Set": errSet} {
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "COALESCE_GET") {
			t.Errorf("%s on veth: %v, want ErrNotSupported", name, err)
		}
	}
}

// TestCoalesceEth0 reads eth0's coalescing (never sets it) and compares with
// ethtool -c.
func TestCoalesceEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	out, err := exec.Command("ethtool", "-c", "eth0").CombinedOutput()
	if err != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", fmt.Sprintf("has no coalescing for ethtool -c (%v: %s)", err, bytes.TrimSpace(out)))
	}
	h, err := openDev(t, nil, "eth0").Coalesce()
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*uint32{"rx-usecs": h.RXUsecs, "rx-frames": h.RXMaxFrames, "tx-usecs": h.TXUsecs,
		"tx-frames": h.TXMaxFrames, "rx-usecs-irq": h.RXUsecsIRQ, "sample-interval": h.RateSampleInterval} {
		m := regexp.MustCompile(`(?m)^` + name + `: (\S+)$`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no %s in ethtool -c:\n%s", name, out)
		}
		want := string(m[1])
		got := "n/a"
		if p != nil {
			got = strconv.FormatUint(uint64(*p), 10)
		}
		if got != want {
			t.Errorf("eth0 %s: ethtool %s, Get %s", name, want, got)
		}
	}
	// A parameter eth0 does not report is refused before anything is sent
	// (Set never reaches the kernel here: eth0 is not ours to change).
	if h.RXUsecsIRQ == nil {
		if name := UnsupportedCoalesce(h, Coalesce{RXUsecsIRQ: u32(1)}); name != "ETHTOOL_A_COALESCE_RX_USECS_IRQ" {
			t.Errorf("Unsupported on eth0's set: %q", name)
		}
	}
	t.Logf("eth0 supports: %s", SupportedCoalesce(h))
}
