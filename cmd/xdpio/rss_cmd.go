package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
)

// rssSubcommands lists the constructors of the `xdpio rss` subcommands.
var rssSubcommands = []func(g *globals) *cobra.Command{newRSSShowCmd, newRSSSetCmd, newRSSHashCmd}

// newRSSCmd builds `xdpio rss`, the parent of the RSS subcommands
// (show, set, hash, …).
func newRSSCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "rss",
		Short: "Show and set the RSS indirection table, hash key and hash function; compute RSS hashes",
		Args:  cobra.NoArgs,
	}
	for _, mk := range rssSubcommands {
		c.AddCommand(mk(g))
	}
	return c
}

// rssJSON is the --json form of a device's RSS configuration.
type rssJSON struct {
	Context   uint32              `json:"context"`
	Indir     []uint32            `json:"indirection_table"`
	Key       string              `json:"hash_key"`
	HFunc     string              `json:"hash_function"`
	InputXfrm string              `json:"input_transformation"`
	FlowHash  map[string][]string `json:"flow_hash,omitempty"`
}

func toRSSJSON(t nic.RSS) rssJSON {
	indir := t.Indir
	if indir == nil {
		indir = []uint32{}
	}
	j := rssJSON{t.Context, indir, colonHex(t.Key), t.HFunc, t.InputXfrm.String(), nil}
	if t.FlowHash != nil {
		j.FlowHash = map[string][]string{}
		for f, h := range t.FlowHash {
			j.FlowHash[f.String()] = h.Names()
		}
	}
	return j
}

// colonHex prints a key the way ethtool -x does: "6d:5a:…".
func colonHex(b []byte) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = hex.EncodeToString([]byte{x})
	}
	return strings.Join(s, ":")
}

func printRSS(w io.Writer, dev string, t nic.RSS) {
	queues := map[uint32]bool{}
	for _, q := range t.Indir {
		queues[q] = true
	}
	if len(t.Indir) == 0 {
		fmt.Fprintf(w, "RX flow hash indirection table for %s: not reported\n", dev)
	} else {
		fmt.Fprintf(w, "RX flow hash indirection table for %s (%d entries, %d queues):\n", dev, len(t.Indir), len(queues))
		for i, q := range t.Indir {
			if i%8 == 0 {
				fmt.Fprintf(w, "%5d: ", i)
			}
			fmt.Fprintf(w, "%5d", q)
			if i%8 == 7 || i == len(t.Indir)-1 {
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintln(w, "RSS hash key:")
	if len(t.Key) == 0 {
		fmt.Fprintln(w, "not reported")
	} else {
		fmt.Fprintln(w, colonHex(t.Key))
	}
	fmt.Fprintln(w, "RSS hash function:")
	for _, n := range t.HFuncs {
		if n != "" {
			fmt.Fprintf(w, "    %s: %s\n", n, onOff(n == t.HFunc))
		}
	}
	fmt.Fprintln(w, "RSS input transformation:")
	fmt.Fprintf(w, "    symmetric-xor: %s\n", onOff(t.InputXfrm&rss.SymmetricXOR != 0))
	fmt.Fprintf(w, "    symmetric-or-xor: %s\n", onOff(t.InputXfrm&rss.SymmetricOrXOR != 0))
	if t.FlowHash != nil {
		fmt.Fprintln(w, "RSS hash fields by flow type:")
		flows := make([]int, 0, len(t.FlowHash))
		for f := range t.FlowHash {
			flows = append(flows, int(f))
		}
		sort.Ints(flows)
		none := 0
		for _, f := range flows {
			if h := t.FlowHash[nic.FlowType(f)]; h != 0 {
				fmt.Fprintf(w, "    %s: %s\n", nic.FlowType(f), h)
			} else {
				none++
			}
		}
		switch {
		case none == len(flows):
			fmt.Fprintf(w, "    none (all %d flow types)\n", none)
		case none > 0:
			fmt.Fprintf(w, "    (%d other flow types: none)\n", none)
		}
	}
}

// rssSetting is what rss show and set read and print of RSS context ctx
// (0: the default one).
func rssSetting(ctx uint32) *setting[nic.RSS] {
	return &setting[nic.RSS]{
		name: "rss",
		read: func(d *nic.Device) (nic.RSS, error) { return d.RSSContext(ctx) },
		showJSON: func(dev string, t nic.RSS) any {
			return struct {
				Device string `json:"device"`
				rssJSON
			}{dev, toRSSJSON(t)}
		},
		text:       printRSS,
		json:       func(t nic.RSS) any { return toRSSJSON(t) },
		changes:    rssChanges,
		sortedJSON: true,
	}
}

// rssChanges is rss set's before → after.
func rssChanges(before, after nic.RSS) []change {
	return []change{
		{"indirection-table", fmt.Sprint(before.Indir), fmt.Sprint(after.Indir)},
		{"hkey", colonHex(before.Key), colonHex(after.Key)},
		{"hfunc", before.HFunc, after.HFunc},
		{"xfrm", before.InputXfrm, after.InputXfrm},
		{"flow-hash", flowHashText(before.FlowHash), flowHashText(after.FlowHash)},
	}
}

func newRSSShowCmd(g *globals) *cobra.Command {
	var (
		ctx uint32
		all bool
	)
	c := &cobra.Command{
		Use:   "show DEV [--context N | --all]",
		Short: "Show the RSS indirection table, hash key, hash function and input transformation, like ethtool -x",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && cmd.Flags().Changed("context") {
				return usagef("rss show: --context and --all exclude each other")
			}
			var err error
			if all {
				err = showRSSContexts(g, args[0])
			} else {
				err = rssSetting(ctx).show(g, args[0])
			}
			if errors.Is(err, nic.ErrNotSupported) {
				return fmt.Errorf("%w; `xdpio rss hash` computes the Toeplitz hash and queue of a flow in software", err)
			}
			return err
		},
	}
	c.Flags().Uint32Var(&ctx, "context", 0, "RSS context (0: the default one)")
	c.Flags().BoolVar(&all, "all", false, "show every RSS context of the device")
	return c
}

// showRSSContexts is `rss show --all`.
func showRSSContexts(g *globals, dev string) error {
	var ts []nic.RSS
	err := withDevice(g, dev, func(d *nic.Device) (err error) {
		ts, err = d.RSSContexts()
		return err
	})
	if err != nil {
		return err
	}
	if g.json {
		list := make([]rssJSON, len(ts))
		for i, t := range ts {
			list[i] = toRSSJSON(t)
		}
		return writeJSON(g.stdout, map[string]any{"device": dev, "contexts": list})
	}
	for i, t := range ts {
		if i > 0 {
			fmt.Fprintln(g.stdout)
		}
		fmt.Fprintf(g.stdout, "RSS context %d:\n", t.Context)
		printRSS(g.stdout, dev, t)
	}
	return nil
}

// rssSetOptions are the flags of rss set.
type rssSetOptions struct {
	equal      int
	weights    string
	key, hfunc string
	xfrm       string
	ctx        uint32
	reset      bool
	dry        bool
	flowHash   []string
}

func (o *rssSetOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.equal, "equal", 0, "spread the table equally over queues 0..N-1")
	fs.StringVar(&o.weights, "weights", "", "spread the table by weights W0,W1,… over queues 0,1,…")
	fs.BoolVar(&o.reset, "default", false, "reset the table to the driver's default")
	fs.StringVar(&o.key, "key", "", "hash key in hex (6d:5a:… or 6d5a…)")
	fs.StringVar(&o.hfunc, "hfunc", "", "hash function: toeplitz, xor, crc32")
	fs.StringVar(&o.xfrm, "xfrm", "", "input transformation: none, symmetric-xor, symmetric-or-xor")
	fs.Uint32Var(&o.ctx, "context", 0, "RSS context (0: the default one)")
	fs.BoolVar(&o.dry, "dry-run", false, "show what would change without changing it")
	fs.StringArrayVar(&o.flowHash, "flow-hash", nil, "hashed fields of a flow type, TYPE=FIELD,… (ip-src, ip-dst, l4-src, l4-dst, l3-proto, vlan, l2-da; none); repeatable")
}

// rssRequest is one rss set: the configuration to send, and a table to
// spread over the queues (--equal or --weights), which prepare sizes as
// the device's.
type rssRequest struct {
	dev     string
	cfg     nic.RSSConfig
	spread  string   // "equal", "weights" or ""
	equal   int      // --equal's queues
	weights []uint32 // --weights
}

// request reads the flags into a request, in the words of a usage error
// when they make none.
func (o *rssSetOptions) request(fs *pflag.FlagSet, dev string) (*rssRequest, error) {
	r := &rssRequest{dev: dev, equal: o.equal}
	n := 0
	for _, name := range []string{"equal", "weights", "default"} {
		if fs.Changed(name) {
			n++
			if name != "default" {
				r.spread = name
			}
		}
	}
	if n > 1 {
		return nil, usagef("rss set: --equal, --weights and --default exclude each other")
	}
	r.cfg = nic.RSSConfig{Context: o.ctx, HFunc: o.hfunc}
	if fs.Changed("equal") && o.equal <= 0 {
		return nil, usagef("rss set: --equal %d: need at least 1 queue", o.equal)
	}
	if fs.Changed("weights") {
		for _, s := range strings.Split(o.weights, ",") {
			v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return nil, usagef("rss set: --weights %q: %v", o.weights, err)
			}
			r.weights = append(r.weights, uint32(v))
		}
	}
	if err := o.hashRequest(fs, &r.cfg); err != nil {
		return nil, err
	}
	if o.reset {
		r.cfg.Indir = []uint32{}
	}
	if n == 0 && r.cfg.Key == nil && r.cfg.HFunc == "" && r.cfg.InputXfrm == nil && r.cfg.FlowHash == nil {
		return nil, usagef("rss set: nothing to set")
	}
	return r, nil
}

// hashRequest puts --key, --xfrm and --flow-hash in cfg.
func (o *rssSetOptions) hashRequest(fs *pflag.FlagSet, cfg *nic.RSSConfig) error {
	if fs.Changed("key") {
		k, err := rss.ParseKey(o.key)
		if err != nil {
			return usagef("rss set: --key: %v", err)
		}
		cfg.Key = k
	}
	if fs.Changed("xfrm") {
		x, err := rss.ParseSymmetric(o.xfrm)
		if err != nil {
			return usagef("rss set: --xfrm: %v", err)
		}
		cfg.InputXfrm = &x
	}
	for _, fh := range o.flowHash {
		name, fields, ok := strings.Cut(fh, "=")
		ft, okT := nic.ParseFlowType(name)
		h, okF := nic.ParseHashFields(fields)
		if !ok || !okT || !okF {
			return usagef("rss set: --flow-hash %q: want TYPE=FIELD,… (e.g. udp4=ip-src,ip-dst,l4-src,l4-dst)", fh)
		}
		if cfg.FlowHash == nil {
			cfg.FlowHash = map[nic.FlowType]nic.HashFields{}
		}
		cfg.FlowHash[ft] = h
	}
	return nil
}

// prepare sizes a table spread over the queues as the device's.
func (r *rssRequest) prepare(before nic.RSS) (err error) {
	if r.spread == "" {
		return nil
	}
	size := len(before.Indir)
	if size == 0 {
		return fmt.Errorf("rss set %s: the device reports no indirection table to size a new one", r.dev)
	}
	if r.spread == "equal" {
		r.cfg.Indir, err = rss.Equal(r.equal, size)
	} else {
		r.cfg.Indir, err = rss.Weights(size, r.weights...)
	}
	return err
}

// preview is what the request would leave: before with what cfg sets.
func (r *rssRequest) preview(before nic.RSS) nic.RSS {
	after, cfg := before, r.cfg
	if cfg.Indir != nil {
		after.Indir = cfg.Indir
	}
	if cfg.Key != nil {
		after.Key = cfg.Key
	}
	if cfg.HFunc != "" {
		after.HFunc = cfg.HFunc
	}
	if cfg.InputXfrm != nil {
		after.InputXfrm = *cfg.InputXfrm
	}
	if cfg.FlowHash != nil {
		after.FlowHash = map[nic.FlowType]nic.HashFields{}
		for f, h := range before.FlowHash {
			after.FlowHash[f] = h
		}
		for f, h := range cfg.FlowHash {
			after.FlowHash[f] = h
		}
	}
	return after
}

func newRSSSetCmd(g *globals) *cobra.Command {
	var o rssSetOptions
	c := &cobra.Command{
		Use:   "set DEV [--equal N | --weights W0,W1,… | --default] [--key HEX] [--hfunc NAME] [--xfrm none|symmetric-xor|symmetric-or-xor]",
		Short: "Set the RSS indirection table, hash key, hash function or input transformation, like ethtool -X",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := o.request(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			return rssSetting(o.ctx).set(g, args[0], o.dry, setOp[nic.RSS]{
				prepare: r.prepare,
				apply:   func(d *nic.Device) error { return d.SetRSS(r.cfg) },
				preview: r.preview,
			})
		},
	}
	o.addFlags(c.Flags())
	noDefaults(c)
	return c
}

// flowHashText prints the non-empty flow-hash settings compactly.
func flowHashText(m map[nic.FlowType]nic.HashFields) string {
	var flows []int
	for f, h := range m {
		if h != 0 {
			flows = append(flows, int(f))
		}
	}
	sort.Ints(flows)
	parts := make([]string, len(flows))
	for i, f := range flows {
		parts[i] = nic.FlowType(f).String() + "=" + m[nic.FlowType(f)].String()
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
