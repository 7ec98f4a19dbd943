package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/nic"
)

// ringsJSON is the --json form of a device's ring parameters.
type ringsJSON struct {
	RX              uint32 `json:"rx"`
	RXMini          uint32 `json:"rx_mini"`
	RXJumbo         uint32 `json:"rx_jumbo"`
	TX              uint32 `json:"tx"`
	RXMax           uint32 `json:"rx_max"`
	RXMiniMax       uint32 `json:"rx_mini_max"`
	RXJumboMax      uint32 `json:"rx_jumbo_max"`
	TXMax           uint32 `json:"tx_max"`
	RXBufLen        uint32 `json:"rx_buf_len"`
	CQESize         uint32 `json:"cqe_size"`
	TXPush          bool   `json:"tx_push"`
	RXPush          bool   `json:"rx_push"`
	TXPushBufLen    uint32 `json:"tx_push_buf_len"`
	TXPushBufLenMax uint32 `json:"tx_push_buf_len_max"`
	TCPDataSplit    string `json:"tcp_data_split"`
	HDSThresh       uint32 `json:"hds_thresh"`
	HDSThreshMax    uint32 `json:"hds_thresh_max"`
}

func toRingsJSON(r nic.RingSizes) ringsJSON {
	return ringsJSON{r.RX, r.RXMini, r.RXJumbo, r.TX, r.RXMax, r.RXMiniMax, r.RXJumboMax, r.TXMax,
		r.RXBufLen, r.CQESize, r.TXPush, r.RXPush, r.TXPushBufLen, r.TXPushBufLenMax, r.TCPDataSplit.String(),
		r.HDSThresh, r.HDSThreshMax}
}

// ringsSetting is what rings show and set read and print.
var ringsSetting = &setting[nic.RingSizes]{
	name: "rings",
	read: (*nic.Device).Rings,
	showJSON: func(dev string, r nic.RingSizes) any {
		return struct {
			Device string `json:"device"`
			ringsJSON
		}{dev, toRingsJSON(r)}
	},
	text:    printRings,
	json:    func(r nic.RingSizes) any { return toRingsJSON(r) },
	changes: ringChanges,
}

func newRingsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "rings",
		Short: "Show or set a device's ring sizes and ring options, like ethtool -g/-G",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(ringsSetting.showCmd(g, "Show current and maximum ring sizes"), newRingsSetCmd(g))
	return c
}

// ringsSetOptions are the flags of rings set.
type ringsSetOptions struct {
	u32  map[string]*uint32 // by flag name
	push map[string]*bool   // tx-push, rx-push
	tds  string             // --tcp-data-split
	dry  bool
}

func (o *ringsSetOptions) addFlags(fs *pflag.FlagSet) {
	o.u32, o.push = map[string]*uint32{}, map[string]*bool{}
	for _, x := range []struct{ name, usage string }{
		{"rx", "RX ring size"}, {"rx-mini", "RX mini ring size"}, {"rx-jumbo", "RX jumbo ring size"}, {"tx", "TX ring size"},
		{"rx-buf-len", "RX buffer length in bytes"}, {"cqe-size", "completion queue entry size"},
		{"tx-push-buf-len", "TX push buffer length"}, {"hds-thresh", "header/data split threshold in bytes"},
	} {
		o.u32[x.name] = new(uint32)
		fs.Uint32Var(o.u32[x.name], x.name, 0, x.usage)
	}
	for _, name := range []string{"tx-push", "rx-push"} {
		o.push[name] = new(bool)
		fs.Var(onOffValue{o.push[name]}, name, map[string]string{"tx-push": "push TX descriptors to the device with the doorbell (on|off)", "rx-push": "push RX descriptors to the device with the doorbell (on|off)"}[name])
	}
	fs.StringVar(&o.tds, "tcp-data-split", "", "TCP header/data split: on, off or auto")
	fs.BoolVar(&o.dry, "dry-run", false, "show what would change without changing it")
}

// config is the request: the parameters given on the command line.
func (o *ringsSetOptions) config(fs *pflag.FlagSet) (nic.RingsConfig, error) {
	var cfg nic.RingsConfig
	dst := map[string]**uint32{"rx": &cfg.RX, "rx-mini": &cfg.RXMini, "rx-jumbo": &cfg.RXJumbo, "tx": &cfg.TX,
		"rx-buf-len": &cfg.RXBufLen, "cqe-size": &cfg.CQESize, "tx-push-buf-len": &cfg.TXPushBufLen, "hds-thresh": &cfg.HDSThresh}
	n := 0
	for name, p := range dst {
		if fs.Changed(name) {
			*p = o.u32[name]
			n++
		}
	}
	for name, p := range map[string]**bool{"tx-push": &cfg.TXPush, "rx-push": &cfg.RXPush} {
		if fs.Changed(name) {
			*p = o.push[name]
			n++
		}
	}
	if fs.Changed("tcp-data-split") {
		var v nic.TCPDataSplit
		switch o.tds {
		case "on":
			v = nic.TCPDataSplitEnabled
		case "off":
			v = nic.TCPDataSplitDisabled
		case "auto":
			v = nic.TCPDataSplitUnknown
		default:
			return cfg, usagef("rings set: --tcp-data-split: want on, off or auto, not %q", o.tds)
		}
		cfg.TCPDataSplit = &v
		n++
	}
	if n == 0 {
		return cfg, usagef("rings set: give at least one parameter")
	}
	return cfg, nil
}

func newRingsSetCmd(g *globals) *cobra.Command {
	var o ringsSetOptions
	set := &cobra.Command{
		Use:   "set DEV [--rx N] [--rx-mini N] [--rx-jumbo N] [--tx N] [--rx-buf-len N] [--cqe-size N] [--tx-push on|off] [--rx-push on|off] [--tx-push-buf-len N] [--tcp-data-split on|off|auto] [--hds-thresh N]",
		Short: "Set ring parameters; the others stay as they are",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return err
			}
			return ringsSetting.set(g, args[0], o.dry, setOp[nic.RingSizes]{
				apply:   func(d *nic.Device) error { return d.SetRings(cfg) },
				preview: func(before nic.RingSizes) nic.RingSizes { return previewRings(before, cfg) },
			})
		},
	}
	o.addFlags(set.Flags())
	ethtoolStyle(set, "dry-run")
	noDefaults(set)
	return set
}

// previewRings is what a set of cfg would leave: before with the
// parameters cfg gives.
func previewRings(before nic.RingSizes, cfg nic.RingsConfig) nic.RingSizes {
	after := before
	for _, x := range []struct{ dst, v *uint32 }{{&after.RX, cfg.RX}, {&after.RXMini, cfg.RXMini}, {&after.RXJumbo, cfg.RXJumbo},
		{&after.TX, cfg.TX}, {&after.RXBufLen, cfg.RXBufLen}, {&after.CQESize, cfg.CQESize}, {&after.TXPushBufLen, cfg.TXPushBufLen},
		{&after.HDSThresh, cfg.HDSThresh}} {
		if x.v != nil {
			*x.dst = *x.v
		}
	}
	if cfg.TXPush != nil {
		after.TXPush = *cfg.TXPush
	}
	if cfg.RXPush != nil {
		after.RXPush = *cfg.RXPush
	}
	if cfg.TCPDataSplit != nil {
		after.TCPDataSplit = *cfg.TCPDataSplit
	}
	return after
}

// ringChanges is rings set's before → after.
func ringChanges(before, after nic.RingSizes) []change {
	return []change{
		{"rx", before.RX, after.RX}, {"rx-mini", before.RXMini, after.RXMini},
		{"rx-jumbo", before.RXJumbo, after.RXJumbo}, {"tx", before.TX, after.TX},
		{"rx-buf-len", before.RXBufLen, after.RXBufLen}, {"cqe-size", before.CQESize, after.CQESize},
		{"tx-push", onOff(before.TXPush), onOff(after.TXPush)}, {"rx-push", onOff(before.RXPush), onOff(after.RXPush)},
		{"tx-push-buf-len", before.TXPushBufLen, after.TXPushBufLen},
		{"tcp-data-split", before.TCPDataSplit, after.TCPDataSplit},
		{"hds-thresh", before.HDSThresh, after.HDSThresh},
	}
}

func printRings(w io.Writer, dev string, r nic.RingSizes) {
	fmt.Fprintf(w, "Ring parameters for %s:\n", dev)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcurrent\tmaximum\t")
	for _, x := range []struct {
		name     string
		cur, max uint32
	}{{"RX:", r.RX, r.RXMax}, {"RX Mini:", r.RXMini, r.RXMiniMax}, {"RX Jumbo:", r.RXJumbo, r.RXJumboMax}, {"TX:", r.TX, r.TXMax},
		{"TX Push Buf Len:", r.TXPushBufLen, r.TXPushBufLenMax}, {"HDS Thresh:", r.HDSThresh, r.HDSThreshMax}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", x.name, naIf(x.cur, x.max == 0), naIf(x.max, x.max == 0))
	}
	tw.Flush()
	fmt.Fprintf(w, "RX Buf Len:      %s\n", naIf(r.RXBufLen, r.RXBufLen == 0))
	fmt.Fprintf(w, "CQE Size:        %s\n", naIf(r.CQESize, r.CQESize == 0))
	fmt.Fprintf(w, "TX Push:         %s\n", onOff(r.TXPush))
	fmt.Fprintf(w, "RX Push:         %s\n", onOff(r.RXPush))
	fmt.Fprintf(w, "TCP data split:  %s\n", r.TCPDataSplit)
}
