//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
)

// cli runs xdpio in-process with args and returns stdout and the exit
// status main would use.
func cli(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runWith(ctx, g, args)
	code := 0
	if err != nil {
		code = 1
		var ue *usageError
		if errors.As(err, &ue) {
			code = 2
		}
	}
	return out.String(), code, err
}

func hostOut(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// ethtoolL returns "Kind:cur/max" for each kind `ethtool -l` prints.
func ethtoolL(out string) map[string]string {
	pre, cur, _ := strings.Cut(out, "Current hardware settings:")
	m := map[string]string{}
	re := regexp.MustCompile(`(?m)^(RX|TX|Other|Combined):\s+(\S+)`)
	for _, s := range re.FindAllStringSubmatch(pre, -1) {
		m[s[1]] = "/" + s[2]
	}
	for _, s := range re.FindAllStringSubmatch(cur, -1) {
		m[s[1]] = s[2] + m[s[1]]
	}
	return m
}

// cliChannels parses `xdpio channels show`'s table the same way.
func cliChannels(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, s := range regexp.MustCompile(`(?m)^\s*(RX|TX|Other|Combined):\s+(\S+)\s+(\S+)$`).FindAllStringSubmatch(out, -1) {
		m[s[1]] = s[2] + "/" + s[3]
	}
	if len(m) != 4 {
		t.Fatalf("channels show output not understood:\n%s", out)
	}
	return m
}

func TestCLIChannels(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	ns, dev := pair.A.NS, pair.A.Link

	out, code, err := cli(t, "--netns", ns, "channels", "show", dev)
	if code != 0 {
		t.Fatalf("channels show: %v", err)
	}
	want := ethtoolL(hostOut(t, pair.A, "ethtool", "-l", dev))
	if got := cliChannels(t, out); !equalMaps(got, want) {
		t.Errorf("channels show %v, ethtool -l %v\n%s", got, want, out)
	}

	out, code, err = cli(t, "--netns", ns, "--json", "channels", "show", dev)
	var j struct {
		Device                    string
		RX, TX, RXMax, TXMax      uint32
		Other, OtherMax, Combined uint32
	}
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("--json channels show: %v\n%s", err, out)
	}
	for _, k := range []string{`"rx"`, `"tx"`, `"rx_max"`, `"tx_max"`, `"other"`, `"other_max"`, `"combined"`, `"combined_max"`, `"device"`} {
		if !strings.Contains(out, k+":") {
			t.Errorf("--json lacks key %s:\n%s", k, out)
		}
	}
	// What the text shows as n/a (a veth has no other or combined
	// channels) is null, not 0.
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil || raw["other"] != nil || raw["combined_max"] != nil || raw["rx"] == nil {
		t.Errorf("--json: other %v, combined_max %v, rx %v: want null, null and a number (%v)", raw["other"], raw["combined_max"], raw["rx"], err)
	}

	// --dry-run reports the change and sends nothing.
	out, code, err = cli(t, "--netns", ns, "channels", "set", dev, "--rx", "1", "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run") || !strings.Contains(out, "rx 4 → 1") || !strings.Contains(out, "other n/a, combined n/a") {
		t.Errorf("set --dry-run: exit %d, %v:\n%s", code, err, out)
	}
	if got := ethtoolL(hostOut(t, pair.A, "ethtool", "-l", dev)); got["RX"] != "4/4" {
		t.Errorf("--dry-run changed the device: ethtool -l %v", got)
	}

	out, code, err = cli(t, "--netns", ns, "channels", "set", dev, "--rx", "2", "--tx", "2")
	if code != 0 {
		t.Fatalf("channels set: %v", err)
	}
	if !strings.Contains(out, "rx 4 → 2") || !strings.Contains(out, "tx 4 → 2") {
		t.Errorf("set output lacks before → after:\n%s", out)
	}
	if got := ethtoolL(hostOut(t, pair.A, "ethtool", "-l", dev)); got["RX"] != "2/4" || got["TX"] != "2/4" {
		t.Errorf("ethtool -l after set: %v", got)
	}

	// Refused by the kernel: exit 1 with the kernel's text, the same
	// ethtool prints.
	_, code, err = cli(t, "--netns", ns, "channels", "set", dev, "--rx", "9")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eout, _ := pair.A.Command(ctx, "ethtool", "-L", dev, "rx", "9").CombinedOutput()
	var de *nic.RequestError
	if code != 1 || !errors.As(err, &de) || de.Message == "" || !strings.Contains(err.Error(), de.Message) || !strings.Contains(string(eout), de.Message) {
		t.Errorf("set --rx 9: exit %d, %v; ethtool said %q", code, err, eout)
	}

	for _, args := range [][]string{
		{"channels", "set", dev},
		{"channels", "set", dev, "--rx", "x"},
		{"channels", "set", dev, "--rx", "-1"},
		{"channels", "set", dev, "--bogus", "1"},
		{"channels", "show"},
		{"channels", "show", dev, "extra"},
	} {
		if _, code, err := cli(t, append([]string{"--netns", ns}, args...)...); code != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, code, err)
		}
	}
	if _, code, _ := cli(t, "--netns", ns, "channels", "show", "nosuchdev0"); code != 1 {
		t.Errorf("show of a missing device: exit %d, want 1", code)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCLIDeviceSideNotSupportedOnVeth(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ns, dev := pair.A.NS, pair.A.Link
	for _, args := range [][]string{
		{"rings", "show", dev}, {"rings", "set", dev, "--rx", "512"},
		{"coalesce", "show", dev}, {"coalesce", "set", dev, "--rx-usecs", "50", "--adaptive-rx", "on"},
		{"rss", "show", dev}, {"rss", "set", dev, "--equal", "2"}, {"rss", "set", dev, "--key", strings.Repeat("6d", 40)},
	} {
		_, code, err := cli(t, append([]string{"--netns", ns}, args...)...)
		if code != 1 || !errors.Is(err, nic.ErrNotSupported) || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("%v on veth: exit %d, %v", args, code, err)
		}
	}
	for _, args := range [][]string{
		{"rss", "set", dev, "--equal", "2", "--weights", "1,2"},
		{"rss", "set", dev, "--weights", "1,x"},
		{"rss", "set", dev, "--key", "zz"},
		{"rss", "set", dev, "--xfrm", "nonsense"},
		{"rss", "set", dev},
		{"coalesce", "set", dev, "--adaptive-rx", "maybe"},
		{"coalesce", "set", dev},
		{"rings", "set", dev, "--tcp-data-split", "sideways"},
	} {
		if _, code, err := cli(t, append([]string{"--netns", ns}, args...)...); code != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, code, err)
		}
	}
}

// TestCLIShowEth0 reads eth0 (never sets it) and compares with ethtool.
func TestCLIShowEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	if exec.Command("ip", "link", "show", "eth0").Run() != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", "does not exist")
	}
	ethtool := func(args ...string) string {
		out, err := exec.Command("ethtool", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ethtool %v: %v", args, err)
		}
		return string(out)
	}
	out, code, err := cli(t, "channels", "show", "eth0")
	if code != 0 {
		t.Fatal(err)
	}
	if got, want := cliChannels(t, out), ethtoolL(ethtool("-l", "eth0")); !equalMaps(got, want) {
		t.Errorf("eth0: channels show %v, ethtool -l %v", got, want)
	}
	out, code, err = cli(t, "coalesce", "show", "eth0")
	if code != 0 {
		t.Fatal(err)
	}
	c := ethtool("-c", "eth0")
	for _, name := range []string{"rx-usecs", "rx-frames", "tx-usecs", "tx-frames", "rx-usecs-irq", "stats-block-usecs"} {
		re := regexp.MustCompile(`(?m)^` + name + `: (\S+)$`)
		w, g := re.FindStringSubmatch(c), re.FindStringSubmatch(out)
		if w == nil || g == nil || w[1] != g[1] {
			t.Errorf("eth0 %s: ethtool %v, xdpio %v", name, w, g)
		}
	}
	out, code, err = cli(t, "--json", "rings", "show", "eth0")
	if code != 0 {
		t.Fatal(err)
	}
	var r struct {
		RX    uint32 `json:"rx"`
		RXMax uint32 `json:"rx_max"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	g := ethtool("-g", "eth0")
	if !strings.Contains(g, "RX:\t\t"+itoa(r.RX)) || !strings.Contains(g, "RX:\t\t"+itoa(r.RXMax)) {
		t.Errorf("rings --json %s vs ethtool -g:\n%s", out, g)
	}
	out, code, err = cli(t, "rss", "show", "eth0")
	if code == 0 {
		x := ethtool("-x", "eth0")
		for _, l := range regexp.MustCompile(`(?m)^    \S+: (on|off)$`).FindAllString(out, -1) {
			if strings.Contains(l, "symmetric") {
				continue
			}
			if !strings.Contains(x, l) {
				t.Errorf("rss show line %q not in ethtool -x:\n%s", l, x)
			}
		}
		out, code, err = cli(t, "--json", "rss", "show", "eth0", "--all")
		var j struct {
			Contexts []struct {
				Context uint32 `json:"context"`
				HFunc   string `json:"hash_function"`
			} `json:"contexts"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &j) != nil || len(j.Contexts) == 0 || j.Contexts[0].Context != 0 {
			t.Fatalf("rss show --all --json: %v\n%s", err, out)
		}
		if h := j.Contexts[0].HFunc; h != "" && !strings.Contains(x, "    "+h+": on") {
			t.Errorf("context 0 hash function %q is not on in ethtool -x", h)
		}
	} else if !errors.Is(err, nic.ErrNotSupported) {
		t.Errorf("rss show eth0: %v", err)
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// channels set says n/a where channels show does: for the kinds the
// device lacks (maximum 0), unless a dry run asks for some.
func TestChannelChangesNA(t *testing.T) {
	veth := nic.ChannelCounts{RX: 1, TX: 1, RXMax: 2, TXMax: 2}
	after := veth
	after.TX, after.Other = 2, 1
	var out bytes.Buffer
	printChange(&out, "veth0 channels", channelChanges(veth, after))
	if want := "veth0 channels: tx 1 → 2, other n/a → 1 (unchanged: rx 1, combined n/a)\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	printChange(&out, "veth0 channels", channelChanges(veth, veth))
	if want := "veth0 channels: nothing changed (rx 1, tx 1, other n/a, combined n/a)\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
