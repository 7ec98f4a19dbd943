package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
)

// rssHashJSON is the --json form of `xdpio rss hash`. The queue fields are
// present only with --queues.
type rssHashJSON struct {
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	SrcPort   *int   `json:"sport,omitempty"`
	DstPort   *int   `json:"dport,omitempty"`
	Symmetric string `json:"input_transformation"`
	Key       string `json:"hash_key"`
	Input     string `json:"hash_input"`
	Hash      string `json:"hash"`
	HashValue uint32 `json:"hash_value"`
	Device    string `json:"device,omitempty"`
	Queues    int    `json:"queues,omitempty"`
	TableSize int    `json:"table_size,omitempty"`
	IndexRule string `json:"index_rule,omitempty"`
	Index     *int   `json:"table_index,omitempty"`
	Queue     *int   `json:"queue,omitempty"`
}

// rssHashFlags are the flags of `xdpio rss hash`.
type rssHashFlags struct {
	key, src, dst  string
	sport, dport   uint16
	queues, size   int
	symmetric      string
	index          string
	sportSet, dSet bool
	queuesSet      bool
	dev            string
	context        uint32
	keySet, symSet bool
	sizeSet        bool
}

func newRSSHashCmd(g *globals) *cobra.Command {
	var f rssHashFlags
	c := &cobra.Command{
		Use:   "hash --src IP --dst IP [--sport N --dport N] [--key HEX] [--queues N] [--symmetric[=xor|or-xor]]",
		Short: "Compute the Toeplitz RSS hash of a flow and the RX queue it lands on",
		Long: `Compute the Toeplitz RSS hash a NIC gives a flow, and with --queues the RX
queue it lands on with the kernel's default table for that many queues
(entry i holds queue i % N, as ethtool -X DEV equal N writes it).

The table has --table-size entries (default 128, the common hardware size;
read a device's with 'xdpio rss show DEV'), and the hash picks an entry by
its low bits (hash & (size-1)), as RSS hardware does; --index modulo or
scale select hash % size or the kernel's reciprocal_scale instead.

With --dev DEV (and --context N) the key, the indirection table and the
input transformation are the device's, read like 'xdpio rss show DEV';
--key and --symmetric still override them.

Without --sport/--dport the hash covers the addresses only (what NICs do
for fragments and non-TCP/UDP traffic). --key defaults to Microsoft's
40-byte verification key; most Linux drivers pick a random key at boot,
so pass the device's (the hash key 'xdpio rss show DEV' prints, in
ethtool's colon form) to predict its queues.
--symmetric applies the kernel's symmetric-xor input transformation
(--symmetric=or-xor for symmetric-or-xor).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.sportSet = cmd.Flags().Changed("sport")
			f.dSet = cmd.Flags().Changed("dport")
			f.queuesSet = cmd.Flags().Changed("queues")
			f.keySet = cmd.Flags().Changed("key")
			f.symSet = cmd.Flags().Changed("symmetric")
			f.sizeSet = cmd.Flags().Changed("table-size")
			return runRSSHash(g, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.key, "key", rss.DefaultKeyHex, "Toeplitz key in hex (6d5a… or 6d:5a:…)")
	fl.StringVar(&f.src, "src", "", "source IPv4 or IPv6 address (required)")
	fl.StringVar(&f.dst, "dst", "", "destination address, same family as --src (required)")
	fl.Uint16Var(&f.sport, "sport", 0, "source port (with --dport: hash the 4-tuple)")
	fl.Uint16Var(&f.dport, "dport", 0, "destination port (with --sport)")
	fl.IntVar(&f.queues, "queues", 0, "number of RX queues of the default equal table: print the queue")
	fl.IntVar(&f.size, "table-size", rss.DefaultTableSize, "indirection table entries")
	fl.StringVar(&f.index, "index", "low-bits", "how the hash indexes the table: low-bits, modulo or scale")
	fl.StringVar(&f.symmetric, "symmetric", "none", "input transformation: none, xor (symmetric-xor) or or-xor")
	fl.Lookup("symmetric").NoOptDefVal = "symmetric-xor"
	fl.StringVar(&f.dev, "dev", "", "predict for this device: its key, indirection table and input transformation (RSS_GET)")
	fl.Uint32Var(&f.context, "context", 0, "RSS context of --dev")
	return c
}

func runRSSHash(g *globals, f rssHashFlags) error {
	k, err := f.flow()
	if err != nil {
		return err
	}
	if f.dev == "" && f.context != 0 {
		return usagef("rss hash: --context needs --dev")
	}
	if f.dev != "" && (f.queuesSet || f.sizeSet) {
		return usagef("rss hash: --dev uses the device's indirection table; --queues and --table-size describe a default one instead")
	}
	sym, err := rss.ParseSymmetric(f.symmetric)
	if err != nil {
		return usagef("rss hash: --symmetric: %w", err)
	}
	key, err := rss.ParseKey(f.key)
	if err != nil {
		return usagef("rss hash: --key: %w", err)
	}
	var st *nic.RSS
	if f.dev != "" {
		if st, key, sym, err = f.readDev(g, key, sym); err != nil {
			return err
		}
	}
	input := k.Input(nil, sym)
	if len(key) < len(input)+4 {
		return usagef("rss hash: --key of %d bytes covers inputs of up to %d bytes, the flow's hash input has %d (a key needs 4 bytes more than the input)", len(key), len(key)-4, len(input))
	}
	t, err := rss.NewToeplitz(key)
	if err != nil {
		return usagef("rss hash: --key: %w", err)
	}
	h := t.HashFlow(k, sym)
	out := rssHashJSON{
		Src: k.Src.String(), Dst: k.Dst.String(), Symmetric: sym.String(),
		Key: hex.EncodeToString(key), Input: hex.EncodeToString(input),
		Hash: fmt.Sprintf("0x%08x", h), HashValue: h,
	}
	if k.Ports {
		sp, dp := int(f.sport), int(f.dport)
		out.SrcPort, out.DstPort = &sp, &dp
	}
	if err := f.predict(&out, st, key, sym, h); err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.stdout, out)
	}
	printRSSHash(g.stdout, k, sym, out)
	return nil
}

// flow is the flow --src, --dst, --sport and --dport give.
func (f *rssHashFlags) flow() (rss.FlowKey, error) {
	if f.src == "" || f.dst == "" {
		return rss.FlowKey{}, usagef("rss hash: --src and --dst are required")
	}
	src, err := netip.ParseAddr(f.src)
	if err != nil {
		return rss.FlowKey{}, usagef("rss hash: --src: %w", err)
	}
	dst, err := netip.ParseAddr(f.dst)
	if err != nil {
		return rss.FlowKey{}, usagef("rss hash: --dst: %w", err)
	}
	src, dst = src.WithZone(""), dst.WithZone("")
	if src.Is4In6() && dst.Is4() {
		src = src.Unmap()
	} else if dst.Is4In6() && src.Is4() {
		dst = dst.Unmap()
	}
	if src.Is4() != dst.Is4() {
		return rss.FlowKey{}, usagef("rss hash: --src %v and --dst %v are of different address families", src, dst)
	}
	if f.sportSet != f.dSet {
		return rss.FlowKey{}, usagef("rss hash: --sport and --dport go together (a 4-tuple hash needs both ports)")
	}
	return rss.FlowKey{Src: src, Dst: dst, SrcPort: f.sport, DstPort: f.dport, Ports: f.sportSet}, nil
}

// readDev reads --dev's RSS configuration (context --context), and takes
// its key and input transformation where --key and --symmetric do not
// override them.
func (f *rssHashFlags) readDev(g *globals, key []byte, sym rss.Symmetric) (*nic.RSS, []byte, rss.Symmetric, error) {
	var t nic.RSS
	if err := withDevice(g, f.dev, func(d *nic.Device) (err error) {
		t, err = d.RSSContext(f.context)
		return err
	}); err != nil {
		return nil, nil, 0, fmt.Errorf("rss hash: read RSS configuration of %s: %w", f.dev, err)
	}
	if t.HFunc != "" && t.HFunc != "toeplitz" {
		return nil, nil, 0, fmt.Errorf("rss hash: %s hashes with %s, only toeplitz is modelled: %w", f.dev, t.HFunc, nic.ErrNotSupported)
	}
	if len(t.Indir) == 0 {
		return nil, nil, 0, fmt.Errorf("rss hash: %s did not report its indirection table", f.dev)
	}
	if !f.keySet {
		if len(t.Key) == 0 {
			return nil, nil, 0, fmt.Errorf("rss hash: %s did not report its hash key; pass --key", f.dev)
		}
		key = t.Key
	}
	if !f.symSet {
		sym = t.InputXfrm
	}
	return &t, key, sym, nil
}

// predict fills in out the queue of hash h: by the indirection table of
// --dev (st), or with --queues by an equal table of --table-size entries;
// neither leaves out without one.
func (f *rssHashFlags) predict(out *rssHashJSON, st *nic.RSS, key []byte, sym rss.Symmetric, h uint32) error {
	if st == nil && !f.queuesSet {
		return nil
	}
	if st == nil && f.queues < 1 {
		return usagef("rss hash: --queues %d: need at least 1", f.queues)
	}
	rule, err := rss.ParseIndexRule(f.index)
	if err != nil {
		return usagef("rss hash: --index: %w", err)
	}
	var p *rss.Predictor
	if st != nil {
		if n := len(st.Indir); rule == rss.IndexLowBits && n&(n-1) != 0 {
			return usagef("rss hash: %s's indirection table has %d entries, not a power of two, so its hash cannot index it by its low bits: give --index modulo (hash %% size) or --index scale, as the device does", f.dev, n)
		}
		p, err = rss.NewPredictor(rss.PredictorOptions{Key: key, Indirection: st.Indir, Rule: rule, Symmetric: sym})
		if err != nil {
			return fmt.Errorf("rss hash: %s: %w", f.dev, err)
		}
		out.Device, out.Queues, out.TableSize = f.dev, len(p.Queues()), len(st.Indir)
	} else {
		if p, err = f.equalTable(key, sym, rule); err != nil {
			return err
		}
		out.Queues, out.TableSize = f.queues, f.size
	}
	idx, q := p.Index(h), int(p.QueueOfHash(h))
	out.IndexRule, out.Index, out.Queue = rule.String(), &idx, &q
	return nil
}

// equalTable is the predictor of --queues: the kernel's default table of
// --table-size entries over that many queues, indexed by rule.
func (f *rssHashFlags) equalTable(key []byte, sym rss.Symmetric, rule rss.IndexRule) (*rss.Predictor, error) {
	if n := f.size; rule == rss.IndexLowBits && n > 0 && n&(n-1) != 0 {
		return nil, usagef("rss hash: --table-size %d is not a power of two: RSS hardware indexes its table by the hash's low bits; for a device that takes hash %% size, add --index modulo", n)
	}
	table, err := rss.Equal(f.queues, f.size)
	if err != nil {
		return nil, usagef("rss hash: --queues %d --table-size %d: %w", f.queues, f.size, err)
	}
	p, err := rss.NewPredictor(rss.PredictorOptions{Key: key, Indirection: table, Rule: rule, Symmetric: sym})
	if err != nil {
		return nil, usagef("rss hash: --table-size %d --index %s: %w", f.size, rule, err)
	}
	return p, nil
}

// printRSSHash prints rss hash's text: the flow, the hash input and the
// hash, and the queue when predict found one.
func printRSSHash(w io.Writer, k rss.FlowKey, sym rss.Symmetric, out rssHashJSON) {
	fmt.Fprintf(w, "flow:  %v", k)
	if sym != rss.SymmetricNone {
		fmt.Fprintf(w, " (%v)", sym)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "input: %s\n", out.Input)
	fmt.Fprintf(w, "hash:  %s\n", out.Hash)
	if out.Queue == nil {
		return
	}
	rule := fmt.Sprintf("hash & %d", out.TableSize-1)
	switch out.IndexRule {
	case "modulo":
		rule = fmt.Sprintf("hash %% %d", out.TableSize)
	case "scale":
		rule = fmt.Sprintf("(hash * %d) >> 32", out.TableSize)
	}
	if out.Device != "" {
		fmt.Fprintf(w, "queue: %d (entry %d = %s of the %d-entry table of %s)\n", *out.Queue, *out.Index, rule, out.TableSize, out.Device)
	} else {
		fmt.Fprintf(w, "queue: %d (entry %d = %s of an equal %d-entry table over %d queues)\n", *out.Queue, *out.Index, rule, out.TableSize, out.Queues)
	}
}
