//go:build linux

package main

import (
	"encoding/json"
	"regexp"
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
	// A fixed feature: the device refuses, exit 1 naming it.
	_, code, err = cli(t, "--netns", ns, "features", "set", dev, "ntuple", "on")
	if code != 1 || !strings.Contains(err.Error(), "refused rx-ntuple-filter") {
		t.Errorf("set ntuple on: exit %d, %v", code, err)
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
