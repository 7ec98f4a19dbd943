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
			var ts []nic.RSS
			err := withDevice(g, args[0], func(d *nic.Device) error {
				if all {
					var err error
					ts, err = d.RSSContexts()
					return err
				}
				t, err := d.RSSContext(ctx)
				ts = []nic.RSS{t}
				return err
			})
			if errors.Is(err, nic.ErrNotSupported) {
				return fmt.Errorf("%w; `xdpio rss hash` computes the Toeplitz hash and queue of a flow in software", err)
			}
			if err != nil {
				return err
			}
			if g.json {
				if all {
					list := make([]rssJSON, len(ts))
					for i, t := range ts {
						list[i] = toRSSJSON(t)
					}
					return writeJSON(g.stdout, map[string]any{"device": args[0], "contexts": list})
				}
				return writeJSON(g.stdout, struct {
					Device string `json:"device"`
					rssJSON
				}{args[0], toRSSJSON(ts[0])})
			}
			for i, t := range ts {
				if all {
					if i > 0 {
						fmt.Fprintln(g.stdout)
					}
					fmt.Fprintf(g.stdout, "RSS context %d:\n", t.Context)
				}
				printRSS(g.stdout, args[0], t)
			}
			return nil
		},
	}
	c.Flags().Uint32Var(&ctx, "context", 0, "RSS context (0: the default one)")
	c.Flags().BoolVar(&all, "all", false, "show every RSS context of the device")
	return c
}

func newRSSSetCmd(g *globals) *cobra.Command {
	var (
		equal      int
		weights    string
		key, hfunc string
		xfrm       string
		ctx        uint32
		reset      bool
		dry        bool
		flowHash   []string
	)
	c := &cobra.Command{
		Use:   "set DEV [--equal N | --weights W0,W1,… | --default] [--key HEX] [--hfunc NAME] [--xfrm none|symmetric-xor|symmetric-or-xor]",
		Short: "Set the RSS indirection table, hash key, hash function or input transformation, like ethtool -X",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			n := 0
			for _, name := range []string{"equal", "weights", "default"} {
				if f.Changed(name) {
					n++
				}
			}
			if n > 1 {
				return usagef("rss set: --equal, --weights and --default exclude each other")
			}
			cfg := nic.RSSConfig{Context: ctx, HFunc: hfunc}
			var w []uint32
			if f.Changed("equal") && equal <= 0 {
				return usagef("rss set: --equal %d: need at least 1 queue", equal)
			}
			if f.Changed("weights") {
				for _, s := range strings.Split(weights, ",") {
					v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
					if err != nil {
						return usagef("rss set: --weights %q: %v", weights, err)
					}
					w = append(w, uint32(v))
				}
			}
			if f.Changed("key") {
				k, err := rss.ParseKey(key)
				if err != nil {
					return usagef("rss set: --key: %v", err)
				}
				cfg.Key = k
			}
			if f.Changed("xfrm") {
				x, err := rss.ParseSymmetric(xfrm)
				if err != nil {
					return usagef("rss set: --xfrm: %v", err)
				}
				cfg.InputXfrm = &x
			}
			for _, fh := range flowHash {
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
			if reset {
				cfg.Indir = []uint32{}
			}
			if n == 0 && cfg.Key == nil && cfg.HFunc == "" && cfg.InputXfrm == nil && cfg.FlowHash == nil {
				return usagef("rss set: nothing to set")
			}
			var before, after nic.RSS
			err := withDevice(g, args[0], func(dev *nic.Device) (err error) {
				if before, err = dev.RSSContext(ctx); err != nil {
					return err
				}
				if f.Changed("equal") || f.Changed("weights") {
					size := len(before.Indir)
					if size == 0 {
						return fmt.Errorf("rss set %s: the device reports no indirection table to size a new one", args[0])
					}
					if f.Changed("equal") {
						cfg.Indir, err = rss.Equal(equal, size)
					} else {
						cfg.Indir, err = rss.Weights(size, w...)
					}
					if err != nil {
						return err
					}
				}
				if dry {
					after = before
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
					return nil
				}
				if err = dev.SetRSS(cfg); err != nil {
					return err
				}
				after, err = dev.RSSContext(ctx)
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"device": args[0], "dry_run": dry, "before": toRSSJSON(before), "after": toRSSJSON(after)})
			}
			printChange(g.stdout, args[0]+" rss"+dryRunNote(dry), []change{
				{"indirection-table", fmt.Sprint(before.Indir), fmt.Sprint(after.Indir)},
				{"hkey", colonHex(before.Key), colonHex(after.Key)},
				{"hfunc", before.HFunc, after.HFunc},
				{"xfrm", before.InputXfrm, after.InputXfrm},
				{"flow-hash", flowHashText(before.FlowHash), flowHashText(after.FlowHash)},
			})
			return nil
		},
	}
	c.Flags().IntVar(&equal, "equal", 0, "spread the table equally over queues 0..N-1")
	c.Flags().StringVar(&weights, "weights", "", "spread the table by weights W0,W1,… over queues 0,1,…")
	c.Flags().BoolVar(&reset, "default", false, "reset the table to the driver's default")
	c.Flags().StringVar(&key, "key", "", "hash key in hex (6d:5a:… or 6d5a…)")
	c.Flags().StringVar(&hfunc, "hfunc", "", "hash function: toeplitz, xor, crc32")
	c.Flags().StringVar(&xfrm, "xfrm", "", "input transformation: none, symmetric-xor, symmetric-or-xor")
	c.Flags().Uint32Var(&ctx, "context", 0, "RSS context (0: the default one)")
	c.Flags().BoolVar(&dry, "dry-run", false, "show what would change without changing it")
	c.Flags().StringArrayVar(&flowHash, "flow-hash", nil, "hashed fields of a flow type, TYPE=FIELD,… (ip-src, ip-dst, l4-src, l4-dst, l3-proto, vlan, l2-da; none); repeatable")
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
