package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/nic"
)

// optInt is null in JSON when negative.
func optInt(v int) any {
	if v < 0 {
		return nil
	}
	return v
}

func dash(v int) string {
	if v < 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

// orNone joins names with spaces, or says "none".
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newQueuesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "queues",
		Short: "Show a device's queues with their NAPI instance, IRQ and AF_XDP socket (netdev queue-get)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(&cobra.Command{
		Use:   "show DEV",
		Short: "List each RX and TX queue: NAPI id, IRQ, whether an AF_XDP socket is bound",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var qs []nic.Queue
			var xf nic.XDPFeatures
			err := withDevice(g, args[0], func(d *nic.Device) (err error) {
				if qs, err = d.Queues(); err != nil {
					return err
				}
				xf, err = d.XDPFeatures()
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				list := make([]map[string]any, len(qs))
				for i, q := range qs {
					var napi any
					if q.NAPIID != 0 {
						napi = q.NAPIID
					}
					list[i] = map[string]any{"type": string(q.Type), "id": q.ID, "napi_id": napi, "irq": optInt(q.IRQ), "af_xdp": q.XSK}
				}
				return writeJSON(g.stdout, map[string]any{"device": args[0], "queues": list,
					"xdp_features": xf.XDP, "zero_copy": xf.ZeroCopy, "zc_max_segs": xf.ZCMaxSegs,
					"rx_metadata": xf.RXMetadata, "xsk_features": xf.XSK})
			}
			zc := "no"
			if xf.ZeroCopy {
				zc = fmt.Sprintf("yes (up to %d segments a frame)", max(xf.ZCMaxSegs, 1))
			}
			fmt.Fprintf(g.stdout, "%s: XDP %s; AF_XDP zero-copy: %s; RX metadata: %s\n", args[0], orNone(xf.XDP), zc, orNone(xf.RXMetadata))
			fmt.Fprintf(g.stdout, "Queues of %s:\n", args[0])
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "queue\tnapi\tirq\taf_xdp")
			for _, q := range qs {
				napi := "-"
				if q.NAPIID != 0 {
					napi = strconv.FormatUint(uint64(q.NAPIID), 10)
				}
				fmt.Fprintf(tw, "%s %d\t%s\t%s\t%s\n", q.Type, q.ID, napi, dash(q.IRQ), yesNo(q.XSK))
			}
			return tw.Flush()
		},
	})
	return c
}

// napiSelect turns --queue/--napi into a selector.
func napiSelect(cmd *cobra.Command, queue int, napi uint32) (nic.Selector, error) {
	q, n := cmd.Flags().Changed("queue"), cmd.Flags().Changed("napi")
	switch {
	case q && n:
		return nic.Selector{}, usagef("%s: give --queue or --napi, not both", cmdName(cmd))
	case q:
		if queue < 0 {
			return nic.Selector{}, usagef("%s: --queue %d: must not be negative", cmdName(cmd), queue)
		}
		return nic.NAPIOfQueue(queue), nil
	case n:
		return nic.NAPIByID(napi), nil
	}
	return nic.AllNAPIs(), nil
}

func durNS(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return d.Nanoseconds()
}

func u32OrNil(v *uint32) any {
	if v == nil {
		return nil
	}
	return *v
}

func napiJSON(n nic.NAPI) map[string]any {
	var pid any
	if n.PID > 0 {
		pid = n.PID
	}
	qs := n.Queues
	if qs == nil {
		qs = []int{}
	}
	return map[string]any{
		"id": n.ID, "irq": optInt(n.IRQ), "pid": pid, "queues": qs,
		"defer_hard_irqs": u32OrNil(n.DeferHardIRQs), "gro_flush_timeout_ns": durNS(n.GROFlushTimeout),
		"irq_suspend_timeout_ns": durNS(n.IRQSuspendTimeout), "threaded": nilIfEmpty(n.Threaded),
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func napiSettingsText(s nic.NAPISettings) []change {
	v := func(p any) string {
		switch p := p.(type) {
		case *uint32:
			if p != nil {
				return strconv.FormatUint(uint64(*p), 10)
			}
		case *time.Duration:
			if p != nil {
				return p.String()
			}
		}
		return "n/a"
	}
	return []change{
		{"defer-hard-irqs", v(s.DeferHardIRQs), nil},
		{"gro-flush-timeout", v(s.GROFlushTimeout), nil},
		{"irq-suspend-timeout", v(s.IRQSuspendTimeout), nil},
	}
}

func printNAPI(w io.Writer, n nic.NAPI) {
	qs := "-"
	if len(n.Queues) > 0 {
		qs = strings.Trim(strings.ReplaceAll(fmt.Sprint(n.Queues), " ", ","), "[]")
	}
	thread := ""
	if n.Threaded != "" {
		thread = ", threaded " + n.Threaded
	}
	if n.PID > 0 {
		thread += fmt.Sprintf(" (pid %d)", n.PID)
	}
	var parts []string
	for _, c := range napiSettingsText(n.NAPISettings) {
		parts = append(parts, fmt.Sprintf("%s %s", c.name, c.before))
	}
	fmt.Fprintf(w, "napi %d: irq %s, rx queues %s%s: %s\n", n.ID, dash(n.IRQ), qs, thread, strings.Join(parts, ", "))
}

// durationValue is a pflag.Value for a non-negative duration: a Go
// duration ("200us", "1ms") or a bare number of nanoseconds (as sysfs).
type durationValue struct{ v *time.Duration }

func (d durationValue) String() string {
	if d.v == nil {
		return "0s"
	}
	return d.v.String()
}
func (d durationValue) Set(s string) error {
	v, err := parseNonNegDuration(s)
	if err != nil {
		return err
	}
	*d.v = v
	return nil
}
func (d durationValue) Type() string { return "duration" }

func parseNonNegDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 63); err == nil {
		return time.Duration(n), nil
	}
	v, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u"))
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 200us or a number of nanoseconds, not %q", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative: %q", s)
	}
	return v, nil
}

func newNAPICmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "napi",
		Short: "Show, set or reset NAPI deferral (defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout) per NAPI, per queue or device-wide",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newNAPIShowCmd(g), newNAPISetCmd(g), newNAPIResetCmd(g))
	return c
}

// napiSelection is the flags that pick NAPI instances: --queue or --napi,
// else all of the device's.
type napiSelection struct {
	queue int
	napi  uint32
}

func (s *napiSelection) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&s.queue, "queue", 0, "the NAPI instance of this RX queue")
	fs.Uint32Var(&s.napi, "napi", 0, "the NAPI instance with this id")
}

// napiSetting is what napi show reads and prints: the NAPI instances sel
// picks.
func napiSetting(sel nic.Selector) *setting[[]nic.NAPI] {
	return &setting[[]nic.NAPI]{
		read: func(d *nic.Device) ([]nic.NAPI, error) { return d.NAPIs(sel) },
		showJSON: func(dev string, ns []nic.NAPI) any {
			list := make([]map[string]any, len(ns))
			for i, n := range ns {
				list[i] = napiJSON(n)
			}
			return map[string]any{"device": dev, "napis": list}
		},
		text: func(w io.Writer, dev string, ns []nic.NAPI) {
			fmt.Fprintf(w, "NAPI instances of %s:\n", dev)
			for _, n := range ns {
				printNAPI(w, n)
			}
		},
		// napi set reports what nic.Device.SetNAPI read before and
		// after, instance by instance (printNAPIChange).
	}
}

func newNAPIShowCmd(g *globals) *cobra.Command {
	var s napiSelection
	show := &cobra.Command{
		Use:   "show DEV [--queue N | --napi ID]",
		Short: "Show the NAPI instances of a device (all, or one by queue or id)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := napiSelect(cmd, s.queue, s.napi)
			if err != nil {
				return err
			}
			return napiSetting(sel).show(g, args[0])
		},
	}
	s.addFlags(show.Flags())
	return show
}

// napiSetOptions are the flags of napi set.
type napiSetOptions struct {
	napiSelection
	deferIRQs      uint32
	groFlush, irqS time.Duration
}

func (o *napiSetOptions) addFlags(fs *pflag.FlagSet) {
	o.napiSelection.addFlags(fs)
	fs.Uint32Var(&o.deferIRQs, "defer-hard-irqs", 0, "consecutive empty polls that keep hardware IRQs masked")
	fs.Var(durationValue{&o.groFlush}, "gro-flush-timeout", "timer that polls while IRQs are deferred (e.g. 200us; a bare number is ns)")
	fs.Var(durationValue{&o.irqS}, "irq-suspend-timeout", "how long IRQs stay suspended while a busy-polling application keeps up")
}

// settings is the request: the settings given on the command line.
func (o *napiSetOptions) settings(fs *pflag.FlagSet) (nic.NAPISettings, error) {
	var s nic.NAPISettings
	if fs.Changed("defer-hard-irqs") {
		s.DeferHardIRQs = &o.deferIRQs
	}
	if fs.Changed("gro-flush-timeout") {
		s.GROFlushTimeout = &o.groFlush
	}
	if fs.Changed("irq-suspend-timeout") {
		s.IRQSuspendTimeout = &o.irqS
	}
	if s.IsZero() {
		return s, usagef("napi set: give at least one of --defer-hard-irqs, --gro-flush-timeout, --irq-suspend-timeout")
	}
	return s, nil
}

func newNAPISetCmd(g *globals) *cobra.Command {
	var o napiSetOptions
	set := &cobra.Command{
		Use:   "set DEV [--queue N | --napi ID] [--defer-hard-irqs N] [--gro-flush-timeout D] [--irq-suspend-timeout D]",
		Short: "Set NAPI deferral (all NAPIs of DEV unless --queue or --napi); prints before → after",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := napiSelect(cmd, o.queue, o.napi)
			if err != nil {
				return err
			}
			s, err := o.settings(cmd.Flags())
			if err != nil {
				return err
			}
			var ch nic.NAPIChange
			if err := withDevice(g, args[0], func(d *nic.Device) (err error) {
				ch, err = d.SetNAPI(sel, s)
				return err
			}); err != nil {
				return err
			}
			return printNAPIChange(g, args[0], ch)
		},
	}
	o.addFlags(set.Flags())
	noDefaults(set)
	return set
}

// printNAPIChange prints napi set's before → after of each instance.
func printNAPIChange(g *globals, dev string, ch nic.NAPIChange) error {
	if g.json {
		list := make([]map[string]any, len(ch.After))
		for i := range ch.After {
			list[i] = map[string]any{"id": ch.After[i].ID, "before": napiJSON(ch.Before[i]), "after": napiJSON(ch.After[i])}
		}
		var fb any
		if ch.Fallback != "" {
			fb = ch.Fallback
		}
		return writeJSON(g.stdout, map[string]any{"device": dev, "napis": list, "fallback": fb})
	}
	if ch.Fallback != "" {
		fmt.Fprintf(g.stdout, "fallback: %s\n", ch.Fallback)
	}
	for i := range ch.After {
		b, a := napiSettingsText(ch.Before[i].NAPISettings), napiSettingsText(ch.After[i].NAPISettings)
		for j := range b {
			b[j].after = a[j].before
		}
		printChange(g.stdout, fmt.Sprintf("%s napi %d", dev, ch.After[i].ID), b)
	}
	return nil
}

func newNAPIResetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reset DEV",
		Short: "Put back the NAPI settings a crashed AF_XDP program left deferred (recorded in " + nic.DeferralDir + ")",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep nic.DeferralReport
			err := withDevice(g, args[0], func(d *nic.Device) (err error) {
				rep, err = d.RestoreDeferral()
				return err
			})
			if err != nil {
				return err
			}
			return printDeferralReport(g, args[0], rep)
		},
	}
}

// printDeferralReport prints what napi reset restored and what it left to
// the programs still running.
func printDeferralReport(g *globals, dev string, rep nic.DeferralReport) error {
	if g.json {
		entry := func(e nic.DeferralEntry) map[string]any {
			return map[string]any{"napi": e.NAPI, "pid": e.PID, "defer_hard_irqs": e.DeferHardIRQs, "gro_flush_timeout_ns": e.GROFlushTimeoutNS}
		}
		r, h := []map[string]any{}, []map[string]any{}
		for _, e := range rep.Restored {
			r = append(r, entry(e))
		}
		for _, e := range rep.Held {
			h = append(h, entry(e))
		}
		return writeJSON(g.stdout, map[string]any{"device": dev, "restored": r, "held": h})
	}
	if len(rep.Restored) == 0 && len(rep.Held) == 0 {
		fmt.Fprintf(g.stdout, "%s: nothing to restore\n", dev)
	}
	for _, e := range rep.Restored {
		fmt.Fprintf(g.stdout, "%s napi %d: restored defer-hard-irqs %d → %d, gro-flush-timeout %v → %v (holder pid %d is gone)\n",
			dev, e.NAPI, e.AppliedDeferHardIRQs, e.DeferHardIRQs, time.Duration(e.AppliedGROFlushTimeoutNS), time.Duration(e.GROFlushTimeoutNS), e.PID)
	}
	for _, e := range rep.Held {
		fmt.Fprintf(g.stdout, "%s napi %d: held by running pid %d, left alone\n", dev, e.NAPI, e.PID)
	}
	return nil
}

func newStatsCmd(g *globals) *cobra.Command {
	var (
		queue int
		watch time.Duration
		count int
	)
	c := &cobra.Command{
		Use:   "stats DEV [--queue N] [--watch 1s] [--count N]",
		Short: "Per-queue counters (netdev qstats, else the driver's ethtool -S, else device totals); with --watch, per-second rates every interval and a final total",
		Long: `Per-queue counters of DEV, from the first source the device has, named on the first line
(and as "source" under --json):

  netdev qstats                   the kernel's per-queue statistics (rx-packets, tx-bytes, …)
  ethtool -S (driver strings)     the driver's own per-queue counters, for drivers without qstats
                                  (veth): rx_queue_3_xdp_packets shows as rx_xdp_packets of rx 3
  device totals (/proc/net/dev)   the whole device, for drivers without per-queue counters (lo)

With --watch, per-second rates every interval and a final total.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("queue") && queue < 0 {
				return usagef("stats: --queue %d: must not be negative", queue)
			}
			if watch < 0 || cmd.Flags().Changed("watch") && watch == 0 {
				return usagef("stats: --watch %v: must be positive", watch)
			}
			if count < 0 {
				return usagef("stats: --count %d: must not be negative", count)
			}
			if count > 0 && watch == 0 {
				return usagef("stats: --count needs --watch")
			}
			filter := func(s nic.Snapshot) (nic.Snapshot, error) {
				if !cmd.Flags().Changed("queue") {
					return s, nil
				}
				if s.Source == nic.StatsDevice {
					return s, fmt.Errorf("stats %s: --queue %d: %s keeps no per-queue counters (no netdev qstats, none in ethtool -S), only the device's totals", args[0], queue, args[0])
				}
				var out []nic.QueueStats
				for _, q := range s.Queues {
					if q.Queue == queue {
						out = append(out, q)
					}
				}
				if len(out) == 0 {
					return s, fmt.Errorf("stats %s: no queue %d", args[0], queue)
				}
				s.Queues = out
				return s, nil
			}
			return withDevice(g, args[0], func(d *nic.Device) error {
				snap := func() (nic.Snapshot, error) {
					s, err := d.Stats()
					if err != nil {
						return s, err
					}
					return filter(s)
				}
				first, err := snap()
				if err != nil {
					return err
				}
				if watch == 0 {
					return printSnapshot(g, args[0], first)
				}
				return watchStats(cmd.Context(), g, args[0], first, snap, watch, count)
			})
		},
	}
	c.Flags().IntVar(&queue, "queue", 0, "only queue N (its RX and TX rows)")
	c.Flags().DurationVar(&watch, "watch", 0, "print per-second rates every interval until --count intervals or Ctrl-C")
	c.Flags().IntVar(&count, "count", 0, "with --watch, stop after N intervals (0: until interrupted)")
	return c
}

func queueJSON(q nic.QueueStats) map[string]any {
	var queue any = q.Queue
	if q.Type == nic.WholeDevice {
		queue = nil
	}
	return map[string]any{"type": string(q.Type), "queue": queue, "counters": q.Counters}
}

// queueLabel names a row: "rx 3", or "device" for a device's totals.
func queueLabel(q nic.QueueStats) string {
	if q.Type == nic.WholeDevice {
		return "device"
	}
	return fmt.Sprintf("%s %d", q.Type, q.Queue)
}

// sourceWhy says why a fallback source is shown.
var sourceWhy = map[nic.StatsSource]string{
	nic.StatsDriver: "the driver keeps no netdev qstats",
	nic.StatsDevice: "the driver keeps no per-queue counters (no netdev qstats, none in ethtool -S)",
}

// sourceLine is the line above the counters that says where they come
// from.
func sourceLine(dev string, s nic.StatsSource) string {
	if why, ok := sourceWhy[s]; ok {
		return fmt.Sprintf("%s: source: %s; %s", dev, s, why)
	}
	return fmt.Sprintf("%s: source: %s", dev, s)
}

func printSnapshot(g *globals, dev string, s nic.Snapshot) error {
	total := nic.Total(s.Queues)
	if g.json {
		list := make([]map[string]any, len(s.Queues))
		for i, q := range s.Queues {
			list[i] = queueJSON(q)
		}
		return writeJSON(g.stdout, map[string]any{"device": dev, "source": string(s.Source), "queues": list, "total": total})
	}
	fmt.Fprintln(g.stdout, sourceLine(dev, s.Source))
	cols := nic.CounterNames(total)
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "queue\t%s\t\n", strings.Join(cols, "\t"))
	row := func(name string, m map[string]uint64) {
		fmt.Fprintf(tw, "%s", name)
		for _, c := range cols {
			if v, ok := m[c]; ok {
				fmt.Fprintf(tw, "\t%d", v)
			} else {
				fmt.Fprintf(tw, "\t-")
			}
		}
		fmt.Fprintln(tw, "\t")
	}
	for _, q := range s.Queues {
		row(queueLabel(q), q.Counters)
	}
	if len(s.Queues) > 1 {
		row("total", total)
	}
	return tw.Flush()
}

// watchStats prints each interval's per-second rates, one row per queue
// like mpstat, and the totals over the run at the end (also after
// Ctrl-C).
func watchStats(ctx context.Context, g *globals, dev string, first nic.Snapshot, snap func() (nic.Snapshot, error), every time.Duration, count int) error {
	tk := time.NewTicker(every)
	defer tk.Stop()
	prev := first
	enc := json.NewEncoder(g.stdout)
	cols := nic.CounterNames(nic.Total(first.Queues))
	if !g.json {
		fmt.Fprintln(g.stdout, sourceLine(dev, first.Source))
		printRow(g.stdout, "time", "queue", cols, func(c string) string { return c + "/s" })
	}
loop:
	for n := 0; count == 0 || n < count; n++ {
		select {
		case <-ctx.Done():
			break loop
		case <-tk.C:
		}
		cur, err := snap()
		if err != nil {
			return err
		}
		if cur.Source != first.Source {
			return fmt.Errorf("stats %s: the counters' source changed from %s to %s", dev, first.Source, cur.Source)
		}
		d := cur.Delta(prev)
		prev = cur
		if g.json {
			list := make([]map[string]any, len(d.Queues))
			for i, q := range d.Queues {
				m := queueJSON(q)
				m["rates"] = rates(d, q)
				list[i] = m
			}
			if err := enc.Encode(map[string]any{"device": dev, "source": string(cur.Source), "time": cur.Time.Format(time.RFC3339Nano), "interval_s": d.Interval.Seconds(), "queues": list}); err != nil {
				return err
			}
			continue
		}
		for _, q := range d.Queues {
			printRow(g.stdout, cur.Time.Format("15:04:05"), queueLabel(q), cols, func(c string) string {
				if _, ok := q.Counters[c]; !ok {
					return "-"
				}
				return strconv.FormatFloat(d.Rate(q, c), 'f', 0, 64)
			})
		}
	}
	total := prev.Delta(first)
	sum := nic.Total(total.Queues)
	secs := total.Interval.Seconds()
	avg := func(v uint64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(v) / secs
	}
	if g.json {
		r := map[string]float64{}
		for k, v := range sum {
			r[k] = avg(v)
		}
		return enc.Encode(map[string]any{"device": dev, "source": string(first.Source), "total": sum, "rates": r, "interval_s": secs})
	}
	fmt.Fprintf(g.stdout, "total over %v:\n", total.Interval.Round(time.Millisecond))
	printRow(g.stdout, "", "", cols, func(c string) string { return c })
	printRow(g.stdout, "total", "all", cols, func(c string) string { return strconv.FormatUint(sum[c], 10) })
	printRow(g.stdout, "average", "/s", cols, func(c string) string { return strconv.FormatFloat(avg(sum[c]), 'f', 0, 64) })
	return nil
}

func rates(d nic.Delta, q nic.QueueStats) map[string]float64 {
	r := map[string]float64{}
	for k := range q.Counters {
		r[k] = d.Rate(q, k)
	}
	return r
}

// printRow prints one fixed-width row, so that rows printed interval
// after interval line up.
func printRow(w io.Writer, first, second string, cols []string, cell func(string) string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-6s", first, second)
	for _, c := range cols {
		fmt.Fprintf(&b, " %*s", max(len(c)+2, 14), cell(c))
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}
