package nic

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// Feature is one netdev feature of a device as `ethtool -k` lists it:
// Name (the kernel's name), Active, Wanted, Changeable, NoChange, and
// Fixed() for ethtool's "[fixed]".
type Feature = ethtool.Feature

// FeatureChange is one entry of a FeaturesResult: the feature, what was
// wanted and what is now active.
type FeatureChange = ethtool.FeatureChange

// FeaturesResult is the kernel's answer to SetFeatures: Refused lists the
// requested features whose state differs from the request; Changed lists
// every feature whose state changed (dependencies included).
type FeaturesResult = ethtool.FeaturesResult

// Offload is one of ethtool's offload groups ("tso", "rx-checksumming",
// …): a long name, a short name and the kernel features it stands for,
// as glob patterns over the kernel's feature names.
type Offload struct {
	Name     string // ethtool -k's name, e.g. "tcp-segmentation-offload"
	Short    string // ethtool -K's short name, e.g. "tso"
	Patterns []string
}

// Offloads are ethtool's offload groups, with the kernel features each
// maps to (the same patterns ethtool uses for -K).
var Offloads = []Offload{
	{"rx-checksumming", "rx", []string{"rx-checksum"}},
	{"tx-checksumming", "tx", []string{"tx-checksum-*"}},
	{"scatter-gather", "sg", []string{"tx-scatter-gather*"}},
	{"tcp-segmentation-offload", "tso", []string{"tx-tcp*-segmentation"}},
	{"udp-fragmentation-offload", "ufo", []string{"tx-udp-fragmentation"}},
	{"generic-segmentation-offload", "gso", []string{"tx-generic-segmentation"}},
	{"generic-receive-offload", "gro", []string{"rx-gro"}},
	{"large-receive-offload", "lro", []string{"rx-lro"}},
	{"rx-vlan-offload", "rxvlan", []string{"rx-vlan-hw-parse"}},
	{"tx-vlan-offload", "txvlan", []string{"tx-vlan-hw-insert"}},
	{"ntuple-filters", "ntuple", []string{"rx-ntuple-filter"}},
	{"receive-hashing", "rxhash", []string{"rx-hashing"}},
}

// aliases adds the spellings the issue uses.
var aliases = map[string]string{
	"rx-hashing":  "receive-hashing",
	"tso":         "tcp-segmentation-offload",
	"gso":         "generic-segmentation-offload",
	"gro":         "generic-receive-offload",
	"lro":         "large-receive-offload",
	"ntuple":      "ntuple-filters",
	"rxhash":      "receive-hashing",
	"rx":          "rx-checksumming",
	"tx":          "tx-checksumming",
	"sg":          "scatter-gather",
	"ufo":         "udp-fragmentation-offload",
	"rxvlan":      "rx-vlan-offload",
	"txvlan":      "tx-vlan-offload",
	"tx-checksum": "tx-checksumming",
}

// LookupOffload returns the offload group with the given long or short
// name ("tso", "tcp-segmentation-offload", "rx-hashing", …).
func LookupOffload(name string) (Offload, bool) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, o := range Offloads {
		if o.Name == name || o.Short == name {
			return o, true
		}
	}
	return Offload{}, false
}

// Members returns the kernel feature names among known that o stands
// for, in known's order.
func (o Offload) Members(known []string) []string {
	var out []string
	for _, n := range known {
		if n == "" {
			continue
		}
		for _, p := range o.Patterns {
			if ok, _ := path.Match(p, n); ok {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// Features returns all netdev features of the device (`ethtool -k
// DEV`), in the kernel's order, unused bits left out.
func (d *Device) Features() ([]Feature, error) {
	c, dev, err := d.ethtool("FEATURES_GET")
	if err != nil {
		return nil, err
	}
	all, err := c.Features(dev)
	if err != nil {
		return nil, err
	}
	var fs []Feature
	for _, f := range all {
		if f.Name != "" {
			fs = append(fs, f)
		}
	}
	return fs, nil
}

// OffloadState is the state of an offload group on a device.
type OffloadState struct {
	Offload
	// Active is true when any member is on (ethtool -k shows the group
	// "on" then); Fixed when no member can be changed.
	Active, Fixed bool
	// Members are the group's features on this device.
	Members []Feature
}

// OffloadStates returns the state of each offload group that has members
// among fs (a device's features, from Features).
func OffloadStates(fs []Feature) []OffloadState {
	names := make([]string, len(fs))
	byName := make(map[string]Feature, len(fs))
	for i, f := range fs {
		names[i] = f.Name
		byName[f.Name] = f
	}
	var out []OffloadState
	for _, o := range Offloads {
		m := o.Members(names)
		if len(m) == 0 {
			continue
		}
		st := OffloadState{Offload: o, Fixed: true}
		for _, n := range m {
			f := byName[n]
			st.Members = append(st.Members, f)
			st.Active = st.Active || f.Active
			st.Fixed = st.Fixed && f.Fixed()
		}
		out = append(out, st)
	}
	return out
}

// ExpandFeatures turns a request by offload group or kernel name into
// kernel feature names, as ethtool -K does: a group name stands for its
// members among known (the device's feature names); any other name must
// be a kernel feature name. Conflicting requests for the same kernel
// feature are an error.
func ExpandFeatures(want map[string]bool, known []string) (map[string]bool, error) {
	isKnown := make(map[string]bool, len(known))
	for _, n := range known {
		if n != "" {
			isKnown[n] = true
		}
	}
	out := make(map[string]bool)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		on := want[k]
		var names []string
		switch {
		case isKnown[k]:
			names = []string{k}
		default:
			o, ok := LookupOffload(k)
			if !ok {
				return nil, fmt.Errorf("unknown feature %q: use an ethtool -k name (%s) or a kernel feature name", k, offloadNames())
			}
			names = o.Members(known)
			if len(names) == 0 {
				return nil, fmt.Errorf("%w: device has no feature of group %q (%s)", ErrNotSupported, k, strings.Join(o.Patterns, ", "))
			}
		}
		for _, n := range names {
			if prev, dup := out[n]; dup && prev != on {
				return nil, fmt.Errorf("conflicting requests for feature %s", n)
			}
			out[n] = on
		}
	}
	return out, nil
}

func offloadNames() string {
	var s []string
	for _, o := range Offloads {
		s = append(s, o.Short)
	}
	return strings.Join(s, ", ")
}

// SetFeatures turns features of the device on or off (`ethtool -K DEV
// NAME on|off …`). Names are ethtool offload groups ("tso",
// "rx-checksumming", "rx-hashing", …, see Offloads) or kernel feature
// names ("tx-tcp-segmentation"). The result reports what the device
// refused (Refused: requested but not active as requested) and what
// changed.
func (d *Device) SetFeatures(want map[string]bool) (FeaturesResult, error) {
	c, dev, err := d.ethtool("FEATURES_SET")
	if err != nil {
		return FeaturesResult{}, err
	}
	all, err := c.Features(dev)
	if err != nil {
		return FeaturesResult{}, err
	}
	known := make([]string, len(all))
	for i, f := range all {
		known[i] = f.Name
	}
	req, err := ExpandFeatures(want, known)
	if err != nil {
		return FeaturesResult{}, &RequestError{Family: "ethtool", Op: "FEATURES_SET", Target: dev.String(), Err: err}
	}
	return c.SetFeatures(dev, req)
}
