package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/nic"
)

// coalesceParams lists the hardware coalescing parameters in ethtool -c's
// order: the flag name (ethtool -C's), the --json key and the field.
var coalesceU32Params = []struct {
	flag, key string
	field     func(*nic.Coalesce) **uint32
}{
	{"rx-usecs", "rx_usecs", func(h *nic.Coalesce) **uint32 { return &h.RXUsecs }},
	{"rx-frames", "rx_frames", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFrames }},
	{"rx-usecs-irq", "rx_usecs_irq", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsIRQ }},
	{"rx-frames-irq", "rx_frames_irq", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesIRQ }},
	{"tx-usecs", "tx_usecs", func(h *nic.Coalesce) **uint32 { return &h.TXUsecs }},
	{"tx-frames", "tx_frames", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFrames }},
	{"tx-usecs-irq", "tx_usecs_irq", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsIRQ }},
	{"tx-frames-irq", "tx_frames_irq", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesIRQ }},
	{"stats-block-usecs", "stats_block_usecs", func(h *nic.Coalesce) **uint32 { return &h.StatsBlockUsecs }},
	{"sample-interval", "sample_interval", func(h *nic.Coalesce) **uint32 { return &h.RateSampleInterval }},
	{"pkt-rate-low", "pkt_rate_low", func(h *nic.Coalesce) **uint32 { return &h.PktRateLow }},
	{"pkt-rate-high", "pkt_rate_high", func(h *nic.Coalesce) **uint32 { return &h.PktRateHigh }},
	{"rx-usecs-low", "rx_usecs_low", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsLow }},
	{"rx-frames-low", "rx_frames_low", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesLow }},
	{"tx-usecs-low", "tx_usecs_low", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsLow }},
	{"tx-frames-low", "tx_frames_low", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesLow }},
	{"rx-usecs-high", "rx_usecs_high", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsHigh }},
	{"rx-frames-high", "rx_frames_high", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesHigh }},
	{"tx-usecs-high", "tx_usecs_high", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsHigh }},
	{"tx-frames-high", "tx_frames_high", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesHigh }},
	{"tx-aggr-max-bytes", "tx_aggr_max_bytes", func(h *nic.Coalesce) **uint32 { return &h.TXAggrMaxBytes }},
	{"tx-aggr-max-frames", "tx_aggr_max_frames", func(h *nic.Coalesce) **uint32 { return &h.TXAggrMaxFrames }},
	{"tx-aggr-time-usecs", "tx_aggr_time_usecs", func(h *nic.Coalesce) **uint32 { return &h.TXAggrTimeUsecs }},
}

// coalesceHelp says what each parameter means (the kernel's
// Documentation/networking/ethtool-netlink.rst, "COALESCE_GET").
var coalesceHelp = map[string]string{
	"rx-usecs":           "µs to wait after a packet arrives before raising an RX interrupt",
	"rx-frames":          "packets to receive before raising an RX interrupt",
	"rx-usecs-irq":       "as rx-usecs, while an interrupt is being serviced",
	"rx-frames-irq":      "as rx-frames, while an interrupt is being serviced",
	"tx-usecs":           "µs to wait after a packet is sent before raising a TX interrupt",
	"tx-frames":          "packets to send before raising a TX interrupt",
	"tx-usecs-irq":       "as tx-usecs, while an interrupt is being serviced",
	"tx-frames-irq":      "as tx-frames, while an interrupt is being serviced",
	"stats-block-usecs":  "µs between statistics block updates",
	"sample-interval":    "seconds between packet rate samples of adaptive coalescing",
	"pkt-rate-low":       "packet rate (packets/s) below which the -low values apply",
	"pkt-rate-high":      "packet rate (packets/s) above which the -high values apply",
	"rx-usecs-low":       "rx-usecs below pkt-rate-low",
	"rx-frames-low":      "rx-frames below pkt-rate-low",
	"tx-usecs-low":       "tx-usecs below pkt-rate-low",
	"tx-frames-low":      "tx-frames below pkt-rate-low",
	"rx-usecs-high":      "rx-usecs above pkt-rate-high",
	"rx-frames-high":     "rx-frames above pkt-rate-high",
	"tx-usecs-high":      "tx-usecs above pkt-rate-high",
	"tx-frames-high":     "tx-frames above pkt-rate-high",
	"tx-aggr-max-bytes":  "largest TX aggregate in bytes",
	"tx-aggr-max-frames": "most frames in a TX aggregate",
	"tx-aggr-time-usecs": "µs to wait for a TX aggregate to fill",
	"adaptive-rx":        "let the driver pick RX coalescing from the packet rate: on or off",
	"adaptive-tx":        "let the driver pick TX coalescing from the packet rate: on or off",
	"cqe-mode-rx":        "start the RX coalescing timer at completion queue entries, not packets: on or off",
	"cqe-mode-tx":        "start the TX coalescing timer at completion queue entries, not packets: on or off",
}

var coalesceBoolParams = []struct {
	flag, key string
	field     func(*nic.Coalesce) **bool
}{
	{"adaptive-rx", "adaptive_rx", func(h *nic.Coalesce) **bool { return &h.UseAdaptiveRX }},
	{"adaptive-tx", "adaptive_tx", func(h *nic.Coalesce) **bool { return &h.UseAdaptiveTX }},
	{"cqe-mode-rx", "cqe_mode_rx", func(h *nic.Coalesce) **bool { return &h.UseCQEModeRX }},
	{"cqe-mode-tx", "cqe_mode_tx", func(h *nic.Coalesce) **bool { return &h.UseCQEModeTX }},
}

// coalesceJSON maps json keys to values; a parameter the device does not
// support is null.
func coalesceJSON(h nic.Coalesce) map[string]any {
	m := map[string]any{}
	for _, p := range coalesceBoolParams {
		if v := *p.field(&h); v != nil {
			m[p.key] = *v
		} else {
			m[p.key] = nil
		}
	}
	for _, p := range coalesceU32Params {
		if v := *p.field(&h); v != nil {
			m[p.key] = *v
		} else {
			m[p.key] = nil
		}
	}
	return m
}

func coalesceText(h nic.Coalesce) []change {
	var out []change
	for _, p := range coalesceBoolParams {
		v := "n/a"
		if b := *p.field(&h); b != nil {
			v = onOff(*b)
		}
		out = append(out, change{p.flag, v, nil})
	}
	for _, p := range coalesceU32Params {
		v := "n/a"
		if u := *p.field(&h); u != nil {
			v = fmt.Sprint(*u)
		}
		out = append(out, change{p.flag, v, nil})
	}
	return out
}

func printCoalesce(w io.Writer, dev string, h nic.Coalesce) {
	fmt.Fprintf(w, "Coalesce parameters for %s:\n", dev)
	for _, c := range coalesceText(h) {
		fmt.Fprintf(w, "%s: %s\n", c.name, c.before)
	}
}

// coalesceChanges is coalesce set's before → after: the parameters the
// device has before or after.
func coalesceChanges(before, after nic.Coalesce) []change {
	b, a := coalesceText(before), coalesceText(after)
	var cs []change
	for i := range b {
		if b[i].before != "n/a" || a[i].before != "n/a" {
			cs = append(cs, change{b[i].name, b[i].before, a[i].before})
		}
	}
	return cs
}

// coalesceSetting is what coalesce show and set read and print, for the
// device as a whole.
var coalesceSetting = &setting[nic.Coalesce]{
	name: "coalesce",
	read: (*nic.Device).Coalesce,
	showJSON: func(dev string, h nic.Coalesce) any {
		m := coalesceJSON(h)
		m["device"] = dev
		return m
	},
	text:       printCoalesce,
	json:       func(h nic.Coalesce) any { return coalesceJSON(h) },
	changes:    coalesceChanges,
	sortedJSON: true,
}

func newCoalesceCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "coalesce",
		Short: "Show or set a device's hardware interrupt coalescing, like ethtool -c/-C",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newCoalesceShowCmd(g), newCoalesceSetCmd(g))
	return c
}

func newCoalesceShowCmd(g *globals) *cobra.Command {
	var queues string
	show := &cobra.Command{
		Use:   "show DEV [--queues LIST]",
		Short: "Show hardware coalescing parameters (n/a: not supported by the driver), per queue with --queues",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			qs, err := parseQueueList(queues)
			if err != nil {
				return usagef("coalesce show: --queues: %v", err)
			}
			if qs == nil {
				return coalesceSetting.show(g, args[0])
			}
			return showQueueCoalesce(g, args[0], qs)
		},
	}
	show.Flags().StringVar(&queues, "queues", "", "per-queue parameters of these queues (e.g. 0,2-3), via the ETHTOOL_PERQUEUE ioctl")
	return show
}

// showQueueCoalesce is `coalesce show --queues`.
func showQueueCoalesce(g *globals, dev string, qs []int) error {
	var per []nic.Coalesce
	err := withDevice(g, dev, func(d *nic.Device) (err error) {
		per, err = d.QueueCoalesce(qs)
		return err
	})
	if err != nil {
		return err
	}
	if g.json {
		list := make([]map[string]any, len(per))
		for i := range per {
			list[i] = coalesceJSON(per[i])
			list[i]["queue"] = qs[i]
		}
		return writeJSON(g.stdout, map[string]any{"device": dev, "queues": list})
	}
	for i := range per {
		printCoalesce(g.stdout, fmt.Sprintf("%s queue %d", dev, qs[i]), per[i])
	}
	return nil
}

// coalesceSetOptions are the flags of coalesce set.
type coalesceSetOptions struct {
	queues string
	dry    bool
	u32    []uint32 // as coalesceU32Params
	bools  []bool   // as coalesceBoolParams
}

func (o *coalesceSetOptions) addFlags(fs *pflag.FlagSet) {
	o.u32 = make([]uint32, len(coalesceU32Params))
	o.bools = make([]bool, len(coalesceBoolParams))
	fs.BoolVar(&o.dry, "dry-run", false, "show what would change without changing it (not with --queues)")
	fs.StringVar(&o.queues, "queues", "", "set these queues only (e.g. 0,2-3), via the ETHTOOL_PERQUEUE ioctl")
	for i, x := range coalesceBoolParams {
		fs.Var(onOffValue{&o.bools[i]}, x.flag, coalesceHelp[x.flag])
	}
	for i, x := range coalesceU32Params {
		fs.Uint32Var(&o.u32[i], x.flag, 0, coalesceHelp[x.flag])
	}
}

// params is the request: the parameters given on the command line.
func (o *coalesceSetOptions) params(fs *pflag.FlagSet) (nic.Coalesce, error) {
	var p nic.Coalesce
	n := 0
	for i, x := range coalesceU32Params {
		if fs.Changed(x.flag) {
			*x.field(&p) = &o.u32[i]
			n++
		}
	}
	for i, x := range coalesceBoolParams {
		if fs.Changed(x.flag) {
			*x.field(&p) = &o.bools[i]
			n++
		}
	}
	if n == 0 {
		return p, usagef("coalesce set: give at least one parameter")
	}
	return p, nil
}

func newCoalesceSetCmd(g *globals) *cobra.Command {
	var o coalesceSetOptions
	set := &cobra.Command{
		Use:   "set DEV [--rx-usecs N] [--rx-frames N] [--tx-usecs N] [--tx-frames N] [--adaptive-rx on|off] [--adaptive-tx on|off] …",
		Short: "Set hardware coalescing parameters; the others stay as they are",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := o.params(cmd.Flags())
			if err != nil {
				return err
			}
			qs, err := parseQueueList(o.queues)
			if err != nil {
				return usagef("coalesce set: --queues: %v", err)
			}
			if qs != nil {
				if o.dry {
					return usagef("coalesce set: --dry-run does not combine with --queues")
				}
				return setQueueCoalesce(g, args[0], qs, p)
			}
			return coalesceSetting.set(g, args[0], o.dry, setOp[nic.Coalesce]{
				apply:   func(d *nic.Device) error { return d.SetCoalesce(p) },
				preview: func(before nic.Coalesce) nic.Coalesce { return overlayHW(before, p) },
			})
		},
	}
	o.addFlags(set.Flags())
	noDefaults(set)
	ethtoolStyle(set, "dry-run", "queues")
	return set
}

// setQueueCoalesce is `coalesce set --queues`: per-queue before → after.
func setQueueCoalesce(g *globals, name string, qs []int, p nic.Coalesce) error {
	var before, after []nic.Coalesce
	err := withDevice(g, name, func(dev *nic.Device) (err error) {
		if before, err = dev.QueueCoalesce(qs); err != nil {
			return err
		}
		if err = dev.SetQueueCoalesce(qs, p); err != nil {
			return err
		}
		after, err = dev.QueueCoalesce(qs)
		return err
	})
	if err != nil {
		return err
	}
	if g.json {
		list := make([]map[string]any, len(qs))
		for i := range qs {
			list[i] = map[string]any{"queue": qs[i], "before": coalesceJSON(before[i]), "after": coalesceJSON(after[i])}
		}
		return writeJSON(g.stdout, map[string]any{"device": name, "queues": list})
	}
	for i := range qs {
		printChange(g.stdout, fmt.Sprintf("%s queue %d coalesce", name, qs[i]), coalesceChanges(before[i], after[i]))
	}
	return nil
}

// parseQueueList parses "0,2-3" into ascending, distinct queue numbers; ""
// gives nil (no per-queue request).
func parseQueueList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("%q: %v", part, err)
			}
		}
		if a < 0 || b < a || b >= nic.MaxCoalesceQueues {
			return nil, fmt.Errorf("%q: want queues 0..%d, ranges low-high", part, nic.MaxCoalesceQueues-1)
		}
		for q := a; q <= b; q++ {
			seen[q] = true
		}
	}
	out := make([]int, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Ints(out)
	return out, nil
}

// overlayHW returns base with the non-nil parameters of p applied: what a
// Set of p would leave.
func overlayHW(base, p nic.Coalesce) nic.Coalesce {
	out := base
	for _, x := range coalesceU32Params {
		if v := *x.field(&p); v != nil {
			*x.field(&out) = v
		}
	}
	for _, x := range coalesceBoolParams {
		if v := *x.field(&p); v != nil {
			*x.field(&out) = v
		}
	}
	return out
}
