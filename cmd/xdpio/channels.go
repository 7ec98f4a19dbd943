package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// channelsSetting is what channels show and set read and print.
var channelsSetting = &setting[nic.ChannelCounts]{
	name: "channels",
	read: (*nic.Device).Channels,
	showJSON: func(dev string, ch nic.ChannelCounts) any {
		return struct {
			Device string `json:"device"`
			channelsJSON
		}{dev, toChannelsJSON(ch)}
	},
	text:    printChannels,
	json:    func(ch nic.ChannelCounts) any { return toChannelsJSON(ch) },
	changes: channelChanges,
}

func newChannelsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "channels",
		Short: "Show or set a device's RX/TX/other/combined channel (queue) counts, like ethtool -l/-L",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(channelsSetting.showCmd(g, "Show current and maximum channel counts"), newChannelsSetCmd(g))
	return c
}

// channelsSetOptions are the flags of channels set.
type channelsSetOptions struct {
	rx, tx, other, combined uint32
	dry                     bool
}

func (o *channelsSetOptions) addFlags(fs *pflag.FlagSet) {
	fs.Uint32Var(&o.rx, "rx", 0, "number of RX-only channels")
	fs.Uint32Var(&o.tx, "tx", 0, "number of TX-only channels")
	fs.Uint32Var(&o.other, "other", 0, "number of other channels (link interrupts, …)")
	fs.Uint32Var(&o.combined, "combined", 0, "number of combined RX/TX channels")
	fs.BoolVar(&o.dry, "dry-run", false, "show what would change without changing it")
}

// config is the request: the counts given on the command line.
func (o *channelsSetOptions) config(fs *pflag.FlagSet) (nic.ChannelsConfig, error) {
	var cfg nic.ChannelsConfig
	for _, x := range []struct {
		name string
		v    *uint32
		dst  **uint32
	}{{"rx", &o.rx, &cfg.RX}, {"tx", &o.tx, &cfg.TX}, {"other", &o.other, &cfg.Other}, {"combined", &o.combined, &cfg.Combined}} {
		if fs.Changed(x.name) {
			*x.dst = x.v
		}
	}
	if cfg == (nic.ChannelsConfig{}) {
		return cfg, usagef("channels set: give at least one of --rx, --tx, --other, --combined")
	}
	return cfg, nil
}

func newChannelsSetCmd(g *globals) *cobra.Command {
	var o channelsSetOptions
	set := &cobra.Command{
		Use:   "set DEV [--rx N] [--tx N] [--other N] [--combined N]",
		Short: "Set channel counts; the others stay as they are",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return err
			}
			return channelsSetting.set(g, args[0], o.dry, setOp[nic.ChannelCounts]{
				apply:   func(d *nic.Device) error { return d.SetChannels(cfg) },
				preview: func(before nic.ChannelCounts) nic.ChannelCounts { return previewChannels(before, cfg) },
			})
		},
	}
	o.addFlags(set.Flags())
	noDefaults(set)
	ethtoolStyle(set, "dry-run")
	return set
}

// previewChannels is what a set of cfg would leave: before with the
// counts cfg gives.
func previewChannels(before nic.ChannelCounts, cfg nic.ChannelsConfig) nic.ChannelCounts {
	after := before
	for _, x := range []struct{ dst, v *uint32 }{{&after.RX, cfg.RX}, {&after.TX, cfg.TX}, {&after.Other, cfg.Other}, {&after.Combined, cfg.Combined}} {
		if x.v != nil {
			*x.dst = *x.v
		}
	}
	return after
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
