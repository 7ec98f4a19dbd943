package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/nic"
)

func init() {
	subcommands = append(subcommands, newFeaturesCmd)
}

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

func newFeaturesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "features",
		Short: "Show or set a device's offload features, like ethtool -k/-K",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(showCommand(g, "Show every feature (kernel names) and ethtool's offload groups", (*nic.Device).Features,
		func(dev string, fs []nic.Feature) any {
			return map[string]any{"device": dev, "features": featuresJSON(fs), "offloads": offloadsJSON(fs)}
		}, printFeatures))
	var dry bool
	set := &cobra.Command{
		Use:   "set DEV NAME on|off [NAME on|off …]",
		Short: "Turn features on or off: ethtool -K names (tso, gro, rx-checksumming, rx-hashing, ntuple, …) or kernel names",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			pairs := args[1:]
			if len(pairs)%2 != 0 {
				return usagef("features set: want NAME on|off pairs, got %q", strings.Join(pairs, " "))
			}
			want := map[string]bool{}
			for i := 0; i < len(pairs); i += 2 {
				on, err := parseOnOff(pairs[i+1])
				if err != nil {
					return usagef("features set: %s: %v", pairs[i], err)
				}
				if prev, dup := want[pairs[i]]; dup && prev != on {
					return usagef("features set: %s given both on and off", pairs[i])
				}
				want[pairs[i]] = on
			}
			var (
				before, after []nic.Feature
				res           nic.FeaturesResult
			)
			err := withDevice(g, args[0], func(dev *nic.Device) (err error) {
				if before, err = dev.Features(); err != nil {
					return err
				}
				// A name that is neither an ethtool -k group nor one of
				// the kernel's feature names is a typing error: say so
				// (exit 2) before changing anything.
				isKnown := make(map[string]bool, len(before))
				for _, f := range before {
					isKnown[f.Name] = true
				}
				for i := 0; i < len(pairs); i += 2 {
					if _, ok := nic.LookupOffload(pairs[i]); !ok && !isKnown[pairs[i]] {
						return usagef("features set: unknown feature %q: use an ethtool -k name (`xdpio features show %s` lists them) or a kernel feature name", pairs[i], args[0])
					}
				}
				if dry {
					known := make([]string, len(before))
					for i, f := range before {
						known[i] = f.Name
					}
					req, err := nic.ExpandFeatures(want, known)
					if err != nil {
						return err
					}
					after = append([]nic.Feature(nil), before...)
					for i := range after {
						if v, ok := req[after[i].Name]; ok && !after[i].Fixed() {
							after[i].Active = v
						}
					}
					return nil
				}
				if res, err = dev.SetFeatures(want); err != nil {
					return err
				}
				after, err = dev.Features()
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				if err := writeJSON(g.stdout, map[string]any{"device": args[0], "dry_run": dry, "before": featuresJSON(before),
					"after": featuresJSON(after), "refused": refusedJSON(res)}); err != nil {
					return err
				}
			} else {
				var cs []change
				b := featuresJSON(before)
				for _, f := range after {
					if b[f.Name].Active != f.Active {
						cs = append(cs, change{f.Name, onOff(b[f.Name].Active), onOff(f.Active)})
					}
				}
				if len(cs) == 0 {
					fmt.Fprintf(g.stdout, "%s features%s: nothing changed\n", args[0], dryRunNote(dry))
				} else {
					printChange(g.stdout, args[0]+" features"+dryRunNote(dry), cs)
				}
			}
			if len(res.Refused) > 0 {
				var s []string
				for _, r := range res.Refused {
					s = append(s, fmt.Sprintf("%s (wanted %s, is %s)", r.Name, onOff(r.Wanted), onOff(r.Active)))
				}
				return errors.New("features set " + args[0] + ": the device refused " + strings.Join(s, ", "))
			}
			return nil
		},
	}
	set.Flags().BoolVar(&dry, "dry-run", false, "show what would change (fixed features stay) without changing it")
	c.AddCommand(set)
	return c
}

func refusedJSON(res nic.FeaturesResult) map[string]featureJSON {
	m := map[string]featureJSON{}
	for _, r := range res.Refused {
		m[r.Name] = featureJSON{Active: r.Active, Wanted: r.Wanted}
	}
	return m
}
