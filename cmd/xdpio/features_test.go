//go:build linux

package main

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
)

func TestCLIFeatures(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ns, dev := pair.A.NS, pair.A.Link
	kline := regexp.MustCompile(`(?m)^\t?([a-z0-9-]+): (on|off)`)
	ethtoolK := func() map[string]string {
		m := map[string]string{}
		for _, s := range kline.FindAllStringSubmatch(hostOut(t, pair.A, "ethtool", "-k", dev), -1) {
			m[s[1]] = s[2]
		}
		return m
	}
	for _, v := range []string{"off", "on"} {
		out, code, err := cli(t, "--netns", ns, "features", "set", dev, "tso", v, "gro", v, "rx-checksumming", v)
		if code != 0 {
			t.Fatalf("features set %s: %v", v, err)
		}
		if !strings.Contains(out, "tx-tcp-segmentation "+map[string]string{"on": "off", "off": "on"}[v]+" → "+v) {
			t.Errorf("set %s: output lacks before → after:\n%s", v, out)
		}
		k := ethtoolK()
		for _, n := range []string{"tcp-segmentation-offload", "generic-receive-offload", "rx-checksumming"} {
			if k[n] != v {
				t.Errorf("after set %s: ethtool -k %s: %s", v, n, k[n])
			}
		}
		// show and show --json agree with ethtool -k for every kernel name
		// ethtool prints.
		out, code, err = cli(t, "--netns", ns, "features", "show", dev)
		if code != 0 {
			t.Fatal(err)
		}
		matched := 0
		for _, s := range kline.FindAllStringSubmatch(out, -1) {
			if w, ok := k[s[1]]; ok {
				matched++
				if w != s[2] {
					t.Errorf("features show %s: %s, ethtool -k: %s", s[1], s[2], w)
				}
			}
		}
		if matched < 30 {
			t.Errorf("only %d features matched ethtool -k", matched)
		}
		out, code, err = cli(t, "--netns", ns, "--json", "features", "show", dev)
		var j struct {
			Features map[string]struct{ Active, Fixed bool }
			Offloads map[string]struct{ Active, Fixed bool }
		}
		if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
			t.Fatalf("--json features show: %v", err)
		}
		if got := j.Features["tx-tcp-segmentation"].Active; got != (v == "on") || j.Offloads["tcp-segmentation-offload"].Active != (v == "on") {
			t.Errorf("--json after set %s: %+v", v, j.Features["tx-tcp-segmentation"])
		}
	}
	// --dry-run: the report, no change.
	before := ethtoolK()
	out, code, err := cli(t, "--netns", ns, "features", "set", dev, "gso", "off", "--dry-run")
	if code != 0 || !strings.Contains(out, "tx-generic-segmentation on → off") || !strings.Contains(out, "dry run") {
		t.Errorf("--dry-run: exit %d, %v:\n%s", code, err, out)
	}
	if after := ethtoolK(); after["generic-segmentation-offload"] != before["generic-segmentation-offload"] {
		t.Errorf("--dry-run changed gso: %s → %s", before["generic-segmentation-offload"], after["generic-segmentation-offload"])
	}
	// A feature the driver fixes ("[fixed]" in ethtool -k, the oracle):
	// one error naming it, exit 1, nothing on stdout before it and
	// nothing changed, also when a feature that can change comes with it.
	fixedLine := regexp.MustCompile(`(?m)^\t?([a-z0-9-]+): off \[fixed\]$`)
	kOut := hostOut(t, pair.A, "ethtool", "-k", dev)
	var fixedOff, txFixed []string
	for _, m := range fixedLine.FindAllStringSubmatch(kOut, -1) {
		fixedOff = append(fixedOff, m[1])
		if strings.HasPrefix(m[1], "tx-checksum-") {
			txFixed = append(txFixed, m[1])
		}
	}
	if len(fixedOff) == 0 || len(txFixed) == 0 || !strings.Contains(kOut, "ntuple-filters: off [fixed]") {
		t.Fatalf("veth has no fixed-off feature, or ntuple or tx-checksum-* is not one of them:\n%s", kOut)
	}
	before = ethtoolK()
	for _, args := range [][]string{
		{"ntuple", "on"},
		{fixedOff[0], "on"},
		{"gso", "off", fixedOff[0], "on"},
		{fixedOff[0], "on", "--dry-run"},
	} {
		out, code, err := cli(t, append([]string{"--netns", ns, "features", "set", dev}, args...)...)
		name := args[0]
		if name == "gso" {
			name = args[2]
		}
		if code != 1 || out != "" || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), name) ||
			!strings.Contains(err.Error(), "fixed off by the driver, cannot be turned on") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("set %v: exit %d, %v, stdout %q; want one error naming %s as fixed, exit 1, nothing on stdout", args, code, err, out, name)
		}
		if after := ethtoolK(); !maps.Equal(after, before) {
			t.Errorf("set %v changed features: ethtool -k before %v, after %v", args, before, after)
		}
		if args[0] == "ntuple" {
			t.Logf("features set %s ntuple on: %v", dev, err)
		}
	}
	// A group whose fixed members are in the other state: the others
	// change, the fixed ones are named, exit 0, as ethtool -K does.
	if _, code, err := cli(t, "--netns", ns, "features", "set", dev, "tx", "off"); code != 0 {
		t.Fatalf("set tx off: %v", err)
	}
	out, code, err = cli(t, "--netns", ns, "features", "set", dev, "tx", "on")
	if code != 0 || !strings.Contains(out, "tx-checksum-ip-generic off → on") || !strings.HasSuffix(out, "fixed by the driver, left as they are: "+strings.Join(txFixed, ", ")+"\n") {
		t.Errorf("set tx on: exit %d, %v:\n%s", code, err, out)
	}
	if k := ethtoolK(); k["tx-checksumming"] != "on" || k["tx-checksum-ip-generic"] != "on" {
		t.Errorf("after set tx on: ethtool -k tx-checksumming %s, tx-checksum-ip-generic %s", k["tx-checksumming"], k["tx-checksum-ip-generic"])
	}
	out, code, err = cli(t, "--netns", ns, "--json", "features", "set", dev, "tx", "on", "--dry-run")
	var fj struct {
		Fixed []string `json:"fixed"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &fj) != nil || !slices.Equal(fj.Fixed, txFixed) {
		t.Errorf("--json set tx on: %v, fixed %v, want %v:\n%s", err, fj.Fixed, txFixed, out)
	}
	for _, args := range [][]string{
		{"features", "set", dev, "tso"},
		{"features", "set", dev, "tso", "maybe"},
		{"features", "set", dev, "tso", "on", "gro"},
		{"features", "set", dev, "tso", "on", "tso", "off"},
	} {
		if _, code, err := cli(t, append([]string{"--netns", ns}, args...)...); code != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, code, err)
		}
	}
}
