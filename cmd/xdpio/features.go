package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/nic"
)

// featureJSON is one feature in --json output.
type featureJSON struct {
	Active bool `json:"active"`
	Wanted bool `json:"wanted"`
	Fixed  bool `json:"fixed"`
}

func featuresJSON(fs []nic.Feature) map[string]featureJSON {
	m := make(map[string]featureJSON, len(fs))
	for _, f := range fs {
		m[f.Name] = featureJSON{f.Active, f.Wanted, f.Fixed()}
	}
	return m
}

func offloadsJSON(fs []nic.Feature) map[string]featureJSON {
	m := map[string]featureJSON{}
	for _, o := range nic.OffloadStates(fs) {
		m[o.Name] = featureJSON{Active: o.Active, Wanted: o.Active, Fixed: o.Fixed}
	}
	return m
}

// fixedMark returns ethtool's " [fixed]" suffix.
func fixedMark(fixed bool) string {
	if fixed {
		return " [fixed]"
	}
	return ""
}

func printFeatures(w io.Writer, dev string, fs []nic.Feature) {
	fmt.Fprintf(w, "Features for %s:\n", dev)
	for _, f := range fs {
		fmt.Fprintf(w, "%s: %s%s\n", f.Name, onOff(f.Active), fixedMark(f.Fixed()))
	}
	fmt.Fprintln(w, "Offload groups:")
	for _, o := range nic.OffloadStates(fs) {
		fmt.Fprintf(w, "%s (%s): %s%s\n", o.Name, o.Short, onOff(o.Active), fixedMark(o.Fixed))
	}
}

// featuresSetting is what features show and set read and print.
var featuresSetting = &setting[[]nic.Feature]{
	name: "features",
	read: (*nic.Device).Features,
	showJSON: func(dev string, fs []nic.Feature) any {
		return map[string]any{"device": dev, "features": featuresJSON(fs), "offloads": offloadsJSON(fs)}
	},
	text: printFeatures,
	// features set uses change only and prints its own report: the
	// fixed features it left and the changes the device refused too.
}

func newFeaturesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "features",
		Short: "Show or set a device's offload features, like ethtool -k/-K",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(featuresSetting.showCmd(g, "Show every feature (kernel names) and ethtool's offload groups"), newFeaturesSetCmd(g))
	return c
}

func newFeaturesSetCmd(g *globals) *cobra.Command {
	var dry bool
	set := &cobra.Command{
		Use:   "set DEV NAME on|off [NAME on|off …]",
		Short: "Turn features on or off: ethtool -K names (tso, gro, rx-checksumming, rx-hashing, ntuple, …) or kernel names",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setFeatures(g, args[0], args[1:], dry)
		},
	}
	set.Flags().BoolVar(&dry, "dry-run", false, "show what would change (fixed features stay) without changing it")
	return set
}

// parseFeaturePairs reads features set's NAME on|off pairs.
func parseFeaturePairs(pairs []string) (map[string]bool, error) {
	if len(pairs)%2 != 0 {
		return nil, usagef("features set: want NAME on|off pairs, got %q", strings.Join(pairs, " "))
	}
	want := map[string]bool{}
	for i := 0; i < len(pairs); i += 2 {
		on, err := parseOnOff(pairs[i+1])
		if err != nil {
			return nil, usagef("features set: %s: %v", pairs[i], err)
		}
		if prev, dup := want[pairs[i]]; dup && prev != on {
			return nil, usagef("features set: %s given both on and off", pairs[i])
		}
		want[pairs[i]] = on
	}
	return want, nil
}

// featuresRequest is one features set: what was asked (want, by the
// names in pairs), and what prepare made of it against the device's
// features: the kernel features to send (req) and those fixed in the
// other state, left as they are (fixed); apply records what the device
// refused (res).
type featuresRequest struct {
	dev   string
	pairs []string
	want  map[string]bool
	req   map[string]bool
	fixed []string
	res   nic.FeaturesResult
}

// prepare checks the request against the device's features before
// anything is sent.
func (r *featuresRequest) prepare(before []nic.Feature) (err error) {
	// A name that is neither an ethtool -k group nor one of the kernel's
	// feature names is a typing error: say so (exit 2) before changing
	// anything.
	isKnown := make(map[string]bool, len(before))
	for _, f := range before {
		isKnown[f.Name] = true
	}
	for i := 0; i < len(r.pairs); i += 2 {
		if _, ok := nic.LookupOffload(r.pairs[i]); !ok && !isKnown[r.pairs[i]] {
			return usagef("features set: unknown feature %q: use an ethtool -k name (`xdpio features show %s` lists them) or a kernel feature name", r.pairs[i], r.dev)
		}
	}
	// A feature the driver fixes cannot change: refuse the request before
	// sending anything when a name stands only for fixed features in the
	// other state; of a group, send the members that can change.
	if r.req, r.fixed, err = splitFixed(r.dev, r.want, before); err != nil {
		return fmt.Errorf("features set %s: %w", r.dev, err)
	}
	return nil
}

// apply sends the features that can change, if any.
func (r *featuresRequest) apply(d *nic.Device) (err error) {
	if len(r.req) > 0 {
		r.res, err = d.SetFeatures(r.req)
	}
	return err
}

// preview is what apply would leave: before with the features sent.
func (r *featuresRequest) preview(before []nic.Feature) []nic.Feature {
	after := append([]nic.Feature(nil), before...)
	for i := range after {
		if v, ok := r.req[after[i].Name]; ok {
			after[i].Active = v
		}
	}
	return after
}

// setFeatures is features set's run: the change, its report, and an
// error for what the device refused.
func setFeatures(g *globals, dev string, pairs []string, dry bool) error {
	want, err := parseFeaturePairs(pairs)
	if err != nil {
		return err
	}
	r := &featuresRequest{dev: dev, pairs: pairs, want: want}
	before, after, err := featuresSetting.change(g, dev, dry, setOp[[]nic.Feature]{prepare: r.prepare, apply: r.apply, preview: r.preview})
	if err != nil {
		return err
	}
	if err := r.report(g, dry, before, after); err != nil {
		return err
	}
	if len(r.res.Refused) > 0 {
		var s []string
		for _, x := range r.res.Refused {
			s = append(s, fmt.Sprintf("%s (wanted %s, is %s)", x.Name, onOff(x.Wanted), onOff(x.Active)))
		}
		return errors.New("features set " + dev + ": the device refused " + strings.Join(s, ", "))
	}
	return nil
}

// report prints features set's before → after: the features that
// changed, and the fixed ones it left.
func (r *featuresRequest) report(g *globals, dry bool, before, after []nic.Feature) error {
	if g.json {
		fixed := r.fixed
		if fixed == nil {
			fixed = []string{}
		}
		m := beforeAfter{r.dev, dry, featuresJSON(before), featuresJSON(after)}.keyed()
		m["refused"], m["fixed"] = refusedJSON(r.res), fixed
		return writeJSON(g.stdout, m)
	}
	var cs []change
	b := featuresJSON(before)
	for _, f := range after {
		if b[f.Name].Active != f.Active {
			cs = append(cs, change{f.Name, onOff(b[f.Name].Active), onOff(f.Active)})
		}
	}
	switch {
	case len(cs) == 0 && len(r.res.Refused) > 0:
		// The error says it all.
	case len(cs) == 0:
		fmt.Fprintf(g.stdout, "%s features%s: nothing changed\n", r.dev, dryRunNote(dry))
	default:
		printChange(g.stdout, r.dev+" features"+dryRunNote(dry), cs)
	}
	if len(r.fixed) > 0 {
		fmt.Fprintf(g.stdout, "%s features: fixed by the driver, left as they are: %s\n", r.dev, strings.Join(r.fixed, ", "))
	}
	return nil
}

// splitFixed turns a request by ethtool -K or kernel name into the kernel
// features to send: those it names that the driver lets change. A name
// that stands only for features the driver fixes ([fixed] in `ethtool
// -k`), one of them in the other state, is an error: the device cannot do
// it, and sending the rest would change half of the request. Fixed
// features of a group that are in the other state are left out and
// listed (fixed), as ethtool -K leaves them.
func splitFixed(dev string, want map[string]bool, fs []nic.Feature) (req map[string]bool, fixed []string, err error) {
	known := make([]string, len(fs))
	byName := make(map[string]nic.Feature, len(fs))
	for i, f := range fs {
		known[i] = f.Name
		byName[f.Name] = f
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	req = map[string]bool{}
	var cannot []string
	for _, n := range names {
		on := want[n]
		members, err := nic.ExpandFeatures(map[string]bool{n: on}, known)
		if err != nil {
			return nil, nil, err
		}
		var stuck []string
		canChange := false
		for _, m := range known {
			if _, ok := members[m]; !ok {
				continue
			}
			f := byName[m]
			if !f.Fixed() {
				canChange = true
				if prev, dup := req[m]; dup && prev != on {
					return nil, nil, fmt.Errorf("conflicting requests for feature %s", m)
				}
				req[m] = on
			} else if f.Active != on {
				stuck = append(stuck, m)
			}
		}
		what := n
		if len(stuck) > 1 || stuck != nil && stuck[0] != n {
			what = fmt.Sprintf("%s (%s)", n, strings.Join(stuck, ", "))
		}
		switch {
		case len(stuck) == 0:
		case canChange:
			fixed = append(fixed, stuck...)
		default:
			cannot = append(cannot, fmt.Sprintf("%s: fixed %s by the driver, cannot be turned %s", what, onOff(!on), onOff(on)))
		}
	}
	if len(cannot) > 0 {
		return nil, nil, fmt.Errorf("%s ([fixed] in `xdpio features show %s`); nothing was changed", strings.Join(cannot, "; "), dev)
	}
	return req, fixed, nil
}

func refusedJSON(res nic.FeaturesResult) map[string]featureJSON {
	m := map[string]featureJSON{}
	for _, r := range res.Refused {
		m[r.Name] = featureJSON{Active: r.Active, Wanted: r.Wanted}
	}
	return m
}
