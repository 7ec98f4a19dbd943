package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/nic"
)

// channelsJSON is the --json form of a device's channel counts. Keys are
// stable; a kind the device lacks (maximum 0) reads null, as the text
// says n/a.
type channelsJSON struct {
	RX          *uint32 `json:"rx"`
	TX          *uint32 `json:"tx"`
	Other       *uint32 `json:"other"`
	Combined    *uint32 `json:"combined"`
	RXMax       *uint32 `json:"rx_max"`
	TXMax       *uint32 `json:"tx_max"`
	OtherMax    *uint32 `json:"other_max"`
	CombinedMax *uint32 `json:"combined_max"`
}

func toChannelsJSON(c nic.ChannelCounts) channelsJSON {
	// naNull is v, or nil (null) where the text prints n/a.
	naNull := func(v, max uint32) *uint32 {
		if max == 0 {
			return nil
		}
		return &v
	}
	return channelsJSON{naNull(c.RX, c.RXMax), naNull(c.TX, c.TXMax), naNull(c.Other, c.OtherMax), naNull(c.Combined, c.CombinedMax),
		naNull(c.RXMax, c.RXMax), naNull(c.TXMax, c.TXMax), naNull(c.OtherMax, c.OtherMax), naNull(c.CombinedMax, c.CombinedMax)}
}

func newChannelsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "channels",
		Short: "Show or set a device's RX/TX/other/combined channel (queue) counts, like ethtool -l/-L",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(showCommand(g, "Show current and maximum channel counts", (*nic.Device).Channels,
		func(dev string, ch nic.ChannelCounts) any {
			return struct {
				Device string `json:"device"`
				channelsJSON
			}{dev, toChannelsJSON(ch)}
		}, printChannels))

	var (
		rx, tx, other, combined uint32
		dryRun                  bool
	)
	set := &cobra.Command{
		Use:   "set DEV [--rx N] [--tx N] [--other N] [--combined N]",
		Short: "Set channel counts; the others stay as they are",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg nic.ChannelsConfig
			f := cmd.Flags()
			for _, x := range []struct {
				name string
				v    *uint32
				dst  **uint32
			}{{"rx", &rx, &cfg.RX}, {"tx", &tx, &cfg.TX}, {"other", &other, &cfg.Other}, {"combined", &combined, &cfg.Combined}} {
				if f.Changed(x.name) {
					*x.dst = x.v
				}
			}
			if cfg == (nic.ChannelsConfig{}) {
				return usagef("channels set: give at least one of --rx, --tx, --other, --combined")
			}
			before, after, err := setAndReread(g, args[0], dryRun, (*nic.Device).Channels,
				func(d *nic.Device) error { return d.SetChannels(cfg) },
				func(after nic.ChannelCounts) nic.ChannelCounts {
					for _, x := range []struct{ dst, v *uint32 }{{&after.RX, cfg.RX}, {&after.TX, cfg.TX}, {&after.Other, cfg.Other}, {&after.Combined, cfg.Combined}} {
						if x.v != nil {
							*x.dst = *x.v
						}
					}
					return after
				})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, struct {
					Device string       `json:"device"`
					DryRun bool         `json:"dry_run"`
					Before channelsJSON `json:"before"`
					After  channelsJSON `json:"after"`
				}{args[0], dryRun, toChannelsJSON(before), toChannelsJSON(after)})
			}
			printChange(g.stdout, args[0]+" channels"+dryRunNote(dryRun), channelChanges(before, after))
			return nil
		},
	}
	set.Flags().Uint32Var(&rx, "rx", 0, "number of RX-only channels")
	set.Flags().Uint32Var(&tx, "tx", 0, "number of TX-only channels")
	set.Flags().Uint32Var(&other, "other", 0, "number of other channels (link interrupts, …)")
	set.Flags().Uint32Var(&combined, "combined", 0, "number of combined RX/TX channels")
	set.Flags().BoolVar(&dryRun, "dry-run", false, "show what would change without changing it")
	noDefaults(set)
	ethtoolStyle(set, "dry-run")
	c.AddCommand(set)
	return c
}

func printChannels(w io.Writer, dev string, ch nic.ChannelCounts) {
	fmt.Fprintf(w, "Channel parameters for %s:\n", dev)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcurrent\tmaximum\t")
	for _, r := range []struct {
		name     string
		cur, max uint32
	}{{"RX:", ch.RX, ch.RXMax}, {"TX:", ch.TX, ch.TXMax}, {"Other:", ch.Other, ch.OtherMax}, {"Combined:", ch.Combined, ch.CombinedMax}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.name, naIf(r.cur, r.max == 0), naIf(r.max, r.max == 0))
	}
	tw.Flush()
}

// channelChanges is channels set's before → after; a kind the device
// lacks (maximum 0) reads n/a, as channels show prints it, unless a dry
// run's preview asks for some (n/a → 1: the device would refuse it).
func channelChanges(before, after nic.ChannelCounts) []change {
	var cs []change
	for _, k := range []struct {
		name string
		v    func(nic.ChannelCounts) (cur, max uint32)
	}{
		{"rx", func(c nic.ChannelCounts) (uint32, uint32) { return c.RX, c.RXMax }},
		{"tx", func(c nic.ChannelCounts) (uint32, uint32) { return c.TX, c.TXMax }},
		{"other", func(c nic.ChannelCounts) (uint32, uint32) { return c.Other, c.OtherMax }},
		{"combined", func(c nic.ChannelCounts) (uint32, uint32) { return c.Combined, c.CombinedMax }},
	} {
		b, bmax := k.v(before)
		a, amax := k.v(after)
		cs = append(cs, change{k.name, naIf(b, bmax == 0), naIf(a, amax == 0 && a == 0)})
	}
	return cs
}

// change is one parameter of a set command's before → after report.
type change struct {
	name          string
	before, after any
}

// printChange prints "what: a b → c, d e → f" with changed values first
// marked; unchanged parameters are listed as "(unchanged)".
func printChange(w io.Writer, what string, cs []change) {
	var changed, same []string
	for _, c := range cs {
		b, a := fmt.Sprint(c.before), fmt.Sprint(c.after)
		if b != a {
			changed = append(changed, fmt.Sprintf("%s %s → %s", c.name, b, a))
		} else {
			same = append(same, fmt.Sprintf("%s %s", c.name, a))
		}
	}
	if len(changed) == 0 {
		fmt.Fprintf(w, "%s: nothing changed (%s)\n", what, strings.Join(same, ", "))
		return
	}
	fmt.Fprintf(w, "%s: %s", what, strings.Join(changed, ", "))
	if len(same) > 0 {
		fmt.Fprintf(w, " (unchanged: %s)", strings.Join(same, ", "))
	}
	fmt.Fprintln(w)
}

// dryRunNote marks a set command's report when nothing was sent.
func dryRunNote(dry bool) string {
	if dry {
		return " (dry run, nothing sent)"
	}
	return ""
}

// setAndReread opens device dev inside --netns, reads a setting, then
// either previews a change (dry: preview of the state read) or applies it
// with set and reads the setting back, all on one client. Set commands
// print before → after.
func setAndReread[T any](g *globals, dev string, dry bool, get func(*nic.Device) (T, error), set func(*nic.Device) error, preview func(T) T) (before, after T, err error) {
	err = withDevice(g, dev, func(dev *nic.Device) (err error) {
		if before, err = get(dev); err != nil {
			return err
		}
		if dry {
			after = preview(before)
			return nil
		}
		if err = set(dev); err != nil {
			return err
		}
		after, err = get(dev)
		return err
	})
	return before, after, err
}

// showCommand builds a `show DEV` subcommand: get reads the device (opened
// inside --netns), then the result is printed as JSON (toJSON's value) or
// as text.
func showCommand[T any](g *globals, short string, get func(*nic.Device) (T, error), toJSON func(dev string, v T) any, print func(w io.Writer, dev string, v T)) *cobra.Command {
	return &cobra.Command{
		Use:   "show DEV",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v T
			err := withDevice(g, args[0], func(d *nic.Device) (err error) {
				v, err = get(d)
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, toJSON(args[0], v))
			}
			print(g.stdout, args[0], v)
			return nil
		},
	}
}

// naIf returns "n/a" when na is true, else v in decimal.
func naIf(v uint32, na bool) string {
	if na {
		return "n/a"
	}
	return strconv.FormatUint(uint64(v), 10)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// onOff spells a boolean like ethtool.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// parseOnOff parses ethtool's on/off.
func parseOnOff(s string) (bool, error) {
	switch s {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, not %q", s)
}

// onOffValue is a pflag.Value for on|off flags.
type onOffValue struct{ v *bool }

func (o onOffValue) String() string {
	if o.v == nil {
		return "off"
	}
	return onOff(*o.v)
}
func (o onOffValue) Set(s string) error {
	b, err := parseOnOff(s)
	if err != nil {
		return err
	}
	*o.v = b
	return nil
}
func (o onOffValue) Type() string { return "on|off" }
