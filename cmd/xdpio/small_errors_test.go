package main

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/nic"
)

// A --netns that names no namespace says so, names it and the ones there
// are (few) or how to see them; a name with a slash is no name.
func TestNetnsExists(t *testing.T) {
	dir := t.TempDir()
	if err := netnsExists(dir, "nosuchns"); err == nil || !errors.Is(err, fs.ErrNotExist) ||
		err.Error() != `--netns "nosuchns": no such network namespace (there are none: ip netns add NAME creates one)` {
		t.Errorf("none: %v", err)
	}
	for _, n := range []string{"blue", "red"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := netnsExists(dir, "blue"); err != nil {
		t.Errorf("blue exists: %v", err)
	}
	if err := netnsExists(dir, "green"); err == nil || err.Error() != `--netns "green": no such network namespace (ip netns list: blue, red)` {
		t.Errorf("two: %v", err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := netnsExists(dir, "green"); err == nil || err.Error() != `--netns "green": no such network namespace (ip netns list shows the 6 there are)` {
		t.Errorf("six: %v", err)
	}
	for _, n := range []string{"../blue", "a/b", ".", "..", "/run/netns/blue"} {
		if err := netnsExists(dir, n); err == nil || !strings.Contains(err.Error(), "not a network namespace name") {
			t.Errorf("%q: %v", n, err)
		}
	}
}

// splitFixed: the request to send leaves out what the driver fixes; a
// name that stands only for fixed features in the other state is an
// error naming it, and nothing is to be sent.
func TestSplitFixed(t *testing.T) {
	fs := []nic.Feature{
		{Name: "tx-checksum-ipv4", Active: false},                        // fixed off
		{Name: "tx-checksum-ip-generic", Active: true, Changeable: true}, //
		{Name: "tx-checksum-sctp", Active: false, Changeable: true},
		{Name: "rx-gro", Active: false, Changeable: true},
		{Name: "rx-lro", Active: false},                                       // fixed off
		{Name: "rx-checksum", Active: true, Changeable: true, NoChange: true}, // fixed on
	}
	for _, tc := range []struct {
		want  map[string]bool
		req   map[string]bool
		fixed []string
		err   string
	}{
		{map[string]bool{"gro": true}, map[string]bool{"rx-gro": true}, nil, ""},
		{map[string]bool{"tx": true}, map[string]bool{"tx-checksum-ip-generic": true, "tx-checksum-sctp": true}, []string{"tx-checksum-ipv4"}, ""},
		{map[string]bool{"tx": false}, map[string]bool{"tx-checksum-ip-generic": false, "tx-checksum-sctp": false}, nil, ""},
		{map[string]bool{"lro": false, "rx-checksum": true}, map[string]bool{}, nil, ""},
		{map[string]bool{"lro": true, "gro": true}, nil, nil, "lro (rx-lro): fixed off by the driver, cannot be turned on ([fixed] in `xdpio features show dev0`); nothing was changed"},
		{map[string]bool{"tx-checksum-ipv4": true}, nil, nil, "tx-checksum-ipv4: fixed off by the driver, cannot be turned on ([fixed] in `xdpio features show dev0`); nothing was changed"},
		{map[string]bool{"rx": false, "rx-lro": true}, nil, nil, "rx (rx-checksum): fixed on by the driver, cannot be turned off; rx-lro: fixed off by the driver, cannot be turned on ([fixed] in `xdpio features show dev0`); nothing was changed"},
		{map[string]bool{"tx": true, "tx-checksum-sctp": false}, nil, nil, "conflicting requests for feature tx-checksum-sctp"},
		{map[string]bool{"ntuple": true}, nil, nil, "device has no feature of group"},
	} {
		req, fixed, err := splitFixed("dev0", tc.want, fs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || req != nil {
				t.Errorf("%v: %v, %v; want error %q", tc.want, req, err, tc.err)
			}
			continue
		}
		if err != nil || !maps.Equal(req, tc.req) || !slices.Equal(fixed, tc.fixed) {
			t.Errorf("%v: send %v, fixed %v, %v; want %v, %v", tc.want, req, fixed, err, tc.req, tc.fixed)
		}
	}
}
