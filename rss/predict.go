package rss

import (
	"errors"
	"fmt"
	"slices"
)

// DefaultTableSize is the indirection table size this package assumes when
// the device's is not known: 128 entries, "the most common hardware
// implementation" (Documentation/networking/scaling.rst; ixgbe, virtio-net
// and others). Devices report their real size with RSS_GET (`ethtool -x`):
// i40e and ice use 512, mlx5 256, so read it when a device is at hand.
const DefaultTableSize = 128

// MaxTableSize bounds the indirection tables this package accepts. Real
// devices have at most a few thousand entries; the bound keeps a corrupt
// size from allocating without limit.
const MaxTableSize = 1 << 16

// ErrIndirection reports an unusable indirection table or table rule.
var ErrIndirection = errors.New("invalid RSS indirection table")

// IndexRule says how a device turns a 32-bit hash into an index into its
// indirection table. Devices differ, so the rule is an option.
type IndexRule uint8

const (
	// IndexLowBits takes the low bits of the hash: index = hash & (size-1),
	// for tables whose size is a power of two. This is what RSS hardware
	// does: "masking out the low order seven bits of the computed hash" for
	// the common 128-entry table (Documentation/networking/scaling.rst);
	// Intel's datasheets (the 82599's 7 LS bits into a 128-entry RETA, the
	// 512-entry tables of i40e and ice) and the virtio spec
	// (indirection_table[hash & indirection_table_mask]) say the same. It
	// is the default.
	IndexLowBits IndexRule = iota
	// IndexModulo takes hash % size, for devices with tables whose size is
	// not a power of two.
	IndexModulo
	// IndexScale takes (hash * size) >> 32, the kernel's reciprocal_scale,
	// which software steering (RPS's get_rps_cpu) uses to pick from a list.
	IndexScale
)

// String names the rule as `xdpio rss hash --index` accepts it.
func (r IndexRule) String() string {
	switch r {
	case IndexLowBits:
		return "low-bits"
	case IndexModulo:
		return "modulo"
	case IndexScale:
		return "scale"
	}
	return fmt.Sprintf("IndexRule(%d)", uint8(r))
}

// ParseIndexRule maps "low-bits" (or "mask"), "modulo" (or "mod") and
// "scale" to an IndexRule.
func ParseIndexRule(s string) (IndexRule, error) {
	switch s {
	case "low-bits", "lowbits", "mask", "":
		return IndexLowBits, nil
	case "modulo", "mod":
		return IndexModulo, nil
	case "scale":
		return IndexScale, nil
	}
	return 0, fmt.Errorf("parse index rule %q: want low-bits, modulo or scale: %w", s, ErrIndirection)
}

// PredictorOptions configures a Predictor. The zero value of every field
// but Indirection is a good default.
type PredictorOptions struct {
	// Key is the device's hash key; nil means DefaultKey.
	Key []byte
	// Indirection is the device's indirection table: entry i is the RX
	// queue of hashes whose index is i. Required. Equal builds the
	// kernel's default one (ethtool_rxfh_indir_default); a table read from
	// a device (TableState.Indir) can be passed as it is.
	Indirection []uint32
	// Rule says how the hash becomes a table index (default IndexLowBits).
	Rule IndexRule
	// Symmetric is the device's input transformation (default none).
	Symmetric Symmetric
}

// Predictor tells which RX queue a flow lands on for one device
// configuration (key, indirection table, index rule, input transformation),
// and finds ports that put a flow on a chosen queue (PlacePorts, Spread).
// It is immutable and safe for concurrent use.
type Predictor struct {
	t     *Toeplitz
	indir []uint32
	rule  IndexRule
	sym   Symmetric
	size  uint32
}

// NewPredictor checks the options and returns a Predictor. Errors name the
// field and value: an empty table, a low-bits rule over a table whose size
// is not a power of two, an unknown rule or transformation, a short key.
func NewPredictor(o PredictorOptions) (*Predictor, error) {
	n := len(o.Indirection)
	switch {
	case n == 0:
		return nil, fmt.Errorf("new predictor: Indirection is empty: %w", ErrIndirection)
	case n > MaxTableSize:
		return nil, fmt.Errorf("new predictor: Indirection of %d entries: at most %d: %w", n, MaxTableSize, ErrIndirection)
	case o.Rule > IndexScale:
		return nil, fmt.Errorf("new predictor: Rule %v: unknown: %w", o.Rule, ErrIndirection)
	case o.Rule == IndexLowBits && n&(n-1) != 0:
		return nil, fmt.Errorf("new predictor: Rule low-bits needs a power-of-two table, Indirection has %d entries (use IndexModulo if the device takes hash %% size): %w", n, ErrIndirection)
	case !o.Symmetric.valid():
		return nil, fmt.Errorf("new predictor: Symmetric %v: %w", o.Symmetric, ErrSymmetricInvalid)
	}
	t, err := NewToeplitz(o.Key)
	if err != nil {
		return nil, fmt.Errorf("new predictor: %w", err)
	}
	return &Predictor{t: t, indir: slices.Clone(o.Indirection), rule: o.Rule, sym: o.Symmetric, size: uint32(n)}, nil
}

// Hash returns the device's hash of k (input transformation applied).
func (p *Predictor) Hash(k FlowKey) uint32 { return p.t.HashFlow(k, p.sym) }

// Index returns the indirection table index of a hash.
func (p *Predictor) Index(hash uint32) int {
	switch p.rule {
	case IndexModulo:
		return int(hash % p.size)
	case IndexScale:
		return int(uint64(hash) * uint64(p.size) >> 32)
	}
	return int(hash & (p.size - 1))
}

// QueueOfHash returns the RX queue of a hash.
func (p *Predictor) QueueOfHash(hash uint32) uint32 { return p.indir[p.Index(hash)] }

// Queue returns the RX queue flow k lands on. It fails only for a key that
// fails FlowKey.Validate.
func (p *Predictor) Queue(k FlowKey) (uint32, error) {
	if err := k.Validate(); err != nil {
		return 0, fmt.Errorf("predict queue: %w", err)
	}
	return p.QueueOfHash(p.Hash(k)), nil
}

// Queues returns the distinct queues the indirection table points to, in
// ascending order.
func (p *Predictor) Queues() []uint32 {
	qs := slices.Clone(p.indir)
	slices.Sort(qs)
	return slices.Compact(qs)
}

// Indirection returns a copy of the indirection table.
func (p *Predictor) Indirection() []uint32 { return slices.Clone(p.indir) }
