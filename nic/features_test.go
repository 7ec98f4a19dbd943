package nic

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// veth's feature names (Linux 6.18), as ETH_SS_FEATURES lists them.
var testFeatureNames = []string{"tx-scatter-gather", "tx-checksum-ipv4", "", "tx-checksum-ip-generic", "tx-checksum-ipv6",
	"highdma", "tx-scatter-gather-fraglist", "tx-vlan-hw-insert", "rx-vlan-hw-parse", "rx-vlan-filter", "vlan-challenged",
	"tx-generic-segmentation", "", "rx-gro", "rx-lro", "tx-tcp-segmentation", "tx-gso-robust", "tx-tcp-ecn-segmentation",
	"tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "tx-fcoe-segmentation", "tx-checksum-fcoe-crc", "tx-checksum-sctp",
	"rx-ntuple-filter", "rx-hashing", "rx-checksum", "tx-tcp-accecn-segmentation"}

func TestExpandFeatures(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]bool
		want map[string]bool
	}{
		{map[string]bool{"tso": false}, map[string]bool{"tx-tcp-segmentation": false, "tx-tcp-ecn-segmentation": false,
			"tx-tcp-mangleid-segmentation": false, "tx-tcp6-segmentation": false, "tx-tcp-accecn-segmentation": false}},
		{map[string]bool{"rx-checksumming": true, "gro": false, "rx-hashing": true, "ntuple": false},
			map[string]bool{"rx-checksum": true, "rx-gro": false, "rx-hashing": true, "rx-ntuple-filter": false}},
		{map[string]bool{"tx-checksumming": true}, map[string]bool{"tx-checksum-ipv4": true, "tx-checksum-ip-generic": true,
			"tx-checksum-ipv6": true, "tx-checksum-fcoe-crc": true, "tx-checksum-sctp": true}},
		{map[string]bool{"gso": true, "tx-tcp6-segmentation": true}, map[string]bool{"tx-generic-segmentation": true, "tx-tcp6-segmentation": true}},
		// A kernel name that is also reachable through a group agrees.
		{map[string]bool{"tso": true, "tx-tcp6-segmentation": true}, map[string]bool{"tx-tcp-segmentation": true, "tx-tcp-ecn-segmentation": true,
			"tx-tcp-mangleid-segmentation": true, "tx-tcp6-segmentation": true, "tx-tcp-accecn-segmentation": true}},
	} {
		got, err := ExpandFeatures(tc.in, testFeatureNames)
		if err != nil {
			t.Fatalf("ExpandFeatures(%v): %v", tc.in, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ExpandFeatures(%v) (-want +got):\n%s", tc.in, d)
		}
	}
	if _, err := ExpandFeatures(map[string]bool{"bogus": true}, testFeatureNames); err == nil {
		t.Error("unknown name accepted")
	}
	if _, err := ExpandFeatures(map[string]bool{"tso": true, "tx-tcp6-segmentation": false}, testFeatureNames); err == nil {
		t.Error("conflicting requests accepted")
	}
	if _, err := ExpandFeatures(map[string]bool{"ufo": true}, testFeatureNames); !errors.Is(err, ErrNotSupported) {
		t.Errorf("group without members on this device: %v, want ErrNotSupported", err)
	}
}

func TestOffloadStates(t *testing.T) {
	fs := []Feature{
		{Name: "tx-tcp-segmentation", Active: false, Changeable: true},
		{Name: "tx-tcp6-segmentation", Active: true, Changeable: true},
		{Name: "rx-hashing"},
	}
	got := OffloadStates(fs)
	if len(got) != 2 || got[0].Short != "tso" || !got[0].Active || got[0].Fixed || got[1].Short != "rxhash" || got[1].Active || !got[1].Fixed {
		t.Errorf("OffloadStates: %+v", got)
	}
	for _, n := range []string{"tso", "tcp-segmentation-offload", "rx-hashing", "rxhash", "rx-checksumming", "rx", "ntuple"} {
		if _, ok := LookupOffload(n); !ok {
			t.Errorf("LookupOffload(%q) failed", n)
		}
	}
}
