package rss

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// FlowType is a traffic class of TableState.FlowHash ("tcp4", "udp6", …;
// the kernel's ETHTOOL_A_FLOW_* numbers).
type FlowType = ethtool.FlowType

// HashFields is the set of header fields a flow type's hash covers (the
// kernel's RXH_* bits); String lists them ("ip-src,ip-dst,l4-src,l4-dst").
type HashFields = ethtool.HashFields

// The flow types and hash fields most users need; ParseFlowType and
// ParseHashFields reach all of them by name.
const (
	FlowIP4  = ethtool.FlowIP4
	FlowIP6  = ethtool.FlowIP6
	FlowTCP4 = ethtool.FlowTCP4
	FlowTCP6 = ethtool.FlowTCP6
	FlowUDP4 = ethtool.FlowUDP4
	FlowUDP6 = ethtool.FlowUDP6

	HashIPSrc = ethtool.HashIPSrc // source address
	HashIPDst = ethtool.HashIPDst // destination address
	HashL4Src = ethtool.HashL4Src // source port
	HashL4Dst = ethtool.HashL4Dst // destination port
)

// ParseFlowType maps a kernel flow type name ("tcp4", "udp6", "ah-esp4",
// …) to its FlowType.
func ParseFlowType(s string) (FlowType, bool) { return ethtool.ParseFlowType(s) }

// ParseHashFields parses a comma-separated list of field names as
// HashFields.String prints them ("ip-src,ip-dst,l4-src,l4-dst"; "none").
func ParseHashFields(s string) (HashFields, bool) { return ethtool.ParseHashFields(s) }

// TableState is a device's RSS configuration for one context, as
// `ethtool -x` shows it.
type TableState struct {
	// Context is the RSS context (0: the default one).
	Context uint32
	// Indir is the indirection table: entry i is the RX queue for hashes
	// whose index is i. Empty when the driver does not report it.
	Indir []uint32
	// Key is the hash key; empty when the driver does not report it.
	Key []byte
	// HFunc is the active hash function's name ("toeplitz", "xor",
	// "crc32"), "" when the driver does not report one.
	HFunc string
	// HFuncs lists the hash function names the kernel knows, by bit.
	HFuncs []string
	// InputXfrm is the input transformation (symmetric hashing).
	InputXfrm Symmetric
	// FlowHash says which header fields the hash covers for each flow
	// type (Linux 6.17 and later; nil when not reported). A flow type
	// without HashL4Src|HashL4Dst hashes addresses only: every flow
	// between two hosts lands on one queue.
	FlowHash map[FlowType]HashFields
}

// TableConfig selects what SetTable changes. Zero-valued fields keep
// their current value.
type TableConfig struct {
	// Context is the RSS context to change (0: the default one).
	Context uint32
	// Indir is the new indirection table (see Equal and Weights); nil
	// keeps it, an empty non-nil slice resets it to the driver's default.
	Indir []uint32
	// Key is the new hash key; nil keeps it. Its length must be the
	// device's key length.
	Key []byte
	// HFunc names the hash function ("toeplitz", "xor", "crc32"); ""
	// keeps it.
	HFunc string
	// InputXfrm sets the input transformation; nil keeps it.
	InputXfrm *Symmetric
	// FlowHash sets the hashed header fields of the flow types it names
	// (like `ethtool -N DEV rx-flow-hash tcp4 sdfn`); others keep theirs.
	FlowHash map[FlowType]HashFields
}

// Table returns dev's RSS configuration for the default context
// (`ethtool -x DEV`). Drivers without RSS give an error matching
// ErrNotSupported.
func Table(dev Device) (TableState, error) { return ContextTable(dev, 0) }

// ContextTable returns dev's RSS configuration for RSS context ctx
// (`ethtool -x DEV context N`).
func ContextTable(dev Device, ctx uint32) (TableState, error) {
	var st TableState
	err := withClient(func(c *ethtool.Client) error {
		r, err := c.RSS(dev, ctx)
		if err != nil {
			return err
		}
		names, _ := c.RSSHashFuncs()
		st = tableState(r, names)
		return nil
	})
	return st, err
}

func tableState(r ethtool.RSS, names []string) TableState {
	st := TableState{
		Context:   r.Context,
		Indir:     r.Indir,
		Key:       r.Key,
		HFuncs:    names,
		InputXfrm: Symmetric(r.InputXfrm),
		FlowHash:  r.FlowHash,
	}
	if r.HFunc != 0 {
		i := bits.TrailingZeros32(r.HFunc)
		if i < len(names) && r.HFunc&(r.HFunc-1) == 0 {
			st.HFunc = names[i]
		} else {
			st.HFunc = fmt.Sprintf("hfunc-%#x", r.HFunc)
		}
	}
	return st
}

// Contexts returns the RSS configuration of every RSS context of dev,
// the default one (0) first.
func Contexts(dev Device) ([]TableState, error) {
	var out []TableState
	err := withClient(func(c *ethtool.Client) error {
		rs, err := c.RSSContexts(dev)
		if err != nil {
			return err
		}
		names, _ := c.RSSHashFuncs()
		for _, r := range rs {
			out = append(out, tableState(r, names))
		}
		return nil
	})
	return out, err
}

// SetTable changes what cfg sets in dev's RSS configuration (RSS_SET,
// like `ethtool -X`; before Linux 6.17, which added RSS_SET, the
// ETHTOOL_SRSSH ioctl ethtool -X uses, which cannot set FlowHash). It
// reads the configuration first: drivers without RSS, FlowHash without
// RSS_SET and a key on a device that reports none give an error matching
// ErrNotSupported; a key whose length differs from the device's is
// refused before sending.
func SetTable(dev Device, cfg TableConfig) error {
	return withClient(func(c *ethtool.Client) error {
		// Read first: a device without RSS answers RSS_GET with
		// EOPNOTSUPP, while RSS_SET of a key alone would only say EINVAL
		// (key size mismatch); and a key of the wrong length is caught
		// here with both lengths named.
		cur, err := c.RSS(dev, cfg.Context)
		if err != nil {
			return err
		}
		if cfg.Key != nil && len(cfg.Key) != len(cur.Key) {
			if len(cur.Key) == 0 {
				return &DeviceError{Family: "ethtool", Op: "RSS_SET", Target: dev.String(), Attr: "ETHTOOL_A_RSS_HKEY", NotSupported: true,
					Missing: "setting the hash key (the device reports none)", Err: fmt.Errorf("key of %d bytes given", len(cfg.Key))}
			}
			return &DeviceError{Family: "ethtool", Op: "RSS_SET", Target: dev.String(), Attr: "ETHTOOL_A_RSS_HKEY",
				Err: fmt.Errorf("hash key of %d bytes: the device's key has %d", len(cfg.Key), len(cur.Key))}
		}
		rc, err := rssConfig(c, cfg)
		if err != nil {
			return err
		}
		return c.SetRSS(dev, rc)
	})
}

// hfuncBit maps a hash function name to its ETH_RSS_HASH_* bit.
func hfuncBit(name string, names []string) (uint32, error) {
	i := slices.Index(names, name)
	if i < 0 || i >= 32 {
		return 0, fmt.Errorf("unknown RSS hash function %q: the kernel knows %s", name, strings.Join(names, ", "))
	}
	return 1 << uint(i), nil
}

// maxIndirSize bounds the tables Equal and Weights build (as large as the
// kernel's u32-entry ETHTOOL_A_RSS_INDIR in one netlink attribute allows).
const maxIndirSize = 1 << 13

// Equal returns an indirection table of size entries that spreads hashes
// evenly over queues RX queues 0..queues-1, as `ethtool -X DEV equal N`
// does: entry i is queue i % queues.
func Equal(queues, size int) ([]uint32, error) {
	if queues <= 0 {
		return nil, fmt.Errorf("equal indirection table: %d queues: need at least 1", queues)
	}
	if size <= 0 || size > maxIndirSize {
		return nil, fmt.Errorf("indirection table size %d: must be between 1 and %d", size, maxIndirSize)
	}
	t := make([]uint32, size)
	for i := range t {
		t[i] = uint32(i % queues)
	}
	return t, nil
}

// Weights returns an indirection table of size entries that gives queue q
// a share of the entries proportional to w[q], as `ethtool -X DEV weight
// W0 W1 …` does: the entries are filled in queue order, and entry i goes to
// the first queue whose cumulative weight boundary size*(w0+…+wq)/sum lies
// beyond i. A zero weight gives a queue no entries.
func Weights(size int, w ...uint32) ([]uint32, error) {
	if size <= 0 || size > maxIndirSize {
		return nil, fmt.Errorf("indirection table size %d: must be between 1 and %d", size, maxIndirSize)
	}
	var sum uint64
	for _, x := range w {
		sum += uint64(x)
	}
	if sum == 0 {
		return nil, fmt.Errorf("weighted indirection table: weights %v: at least one must be positive", w)
	}
	t := make([]uint32, size)
	q, cum := 0, uint64(w[0])
	for i := range t {
		for uint64(i) >= uint64(size)*cum/sum {
			q++
			cum += uint64(w[q])
		}
		t[i] = uint32(q)
	}
	return t, nil
}

// CreateContext creates an additional RSS context on dev with cfg's table,
// key, hash function and input transformation (cfg.Context: the number to
// ask for, 0 to let the kernel choose) and returns its number, like
// `ethtool -X DEV context new …`. Flow steering rules can then direct
// flows to it. Drivers without additional contexts give an error matching
// ErrNotSupported.
func CreateContext(dev Device, cfg TableConfig) (uint32, error) {
	var ctx uint32
	err := withClient(func(c *ethtool.Client) error {
		rc, err := rssConfig(c, cfg)
		if err != nil {
			return err
		}
		ctx, err = c.CreateRSSContext(dev, rc)
		return err
	})
	return ctx, err
}

// DeleteContext deletes additional RSS context ctx of dev, like
// `ethtool -X DEV context N delete`.
func DeleteContext(dev Device, ctx uint32) error {
	return withClient(func(c *ethtool.Client) error { return c.DeleteRSSContext(dev, ctx) })
}

// rssConfig turns a TableConfig into the client's form, resolving the
// hash function name with the kernel's string set.
func rssConfig(c *ethtool.Client, cfg TableConfig) (ethtool.RSSConfig, error) {
	rc := ethtool.RSSConfig{Context: cfg.Context, Indir: cfg.Indir, Key: cfg.Key, FlowHash: cfg.FlowHash}
	if cfg.HFunc != "" {
		names, err := c.RSSHashFuncs()
		if err != nil {
			return rc, err
		}
		bit, err := hfuncBit(cfg.HFunc, names)
		if err != nil {
			return rc, err
		}
		rc.HFunc = &bit
	}
	if cfg.InputXfrm != nil {
		x := uint32(*cfg.InputXfrm)
		rc.InputXfrm = &x
	}
	return rc, nil
}
