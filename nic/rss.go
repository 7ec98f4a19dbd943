package nic

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/xdpio/xdpio/internal/ethtool"
	"github.com/xdpio/xdpio/rss"
)

// FlowType is a traffic class of RSS.FlowHash ("tcp4", "udp6", …;
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

// RSS is a device's RSS configuration for one context, as `ethtool -x`
// shows it.
type RSS struct {
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
	InputXfrm rss.Symmetric
	// FlowHash says which header fields the hash covers for each flow
	// type (Linux 6.17 and later; nil when not reported). A flow type
	// without HashL4Src|HashL4Dst hashes addresses only: every flow
	// between two hosts lands on one queue.
	FlowHash map[FlowType]HashFields
}

// RSSConfig selects what SetRSS changes. Zero-valued fields keep their
// current value.
type RSSConfig struct {
	// Context is the RSS context to change (0: the default one).
	Context uint32
	// Indir is the new indirection table (rss.Equal and rss.Weights build
	// one); nil keeps it, an empty non-nil slice resets it to the
	// driver's default.
	Indir []uint32
	// Key is the new hash key; nil keeps it. Its length must be the
	// device's key length.
	Key []byte
	// HFunc names the hash function ("toeplitz", "xor", "crc32"); ""
	// keeps it.
	HFunc string
	// InputXfrm sets the input transformation; nil keeps it.
	InputXfrm *rss.Symmetric
	// FlowHash sets the hashed header fields of the flow types it names
	// (like `ethtool -N DEV rx-flow-hash tcp4 sdfn`); others keep theirs.
	FlowHash map[FlowType]HashFields
}

// RSS returns the device's RSS configuration for the default context
// (`ethtool -x DEV`). Drivers without RSS give an error matching
// ErrNotSupported.
func (d *Device) RSS() (RSS, error) { return d.RSSContext(0) }

// RSSContext returns the device's RSS configuration for RSS context ctx
// (`ethtool -x DEV context N`).
func (d *Device) RSSContext(ctx uint32) (RSS, error) {
	c, dev, err := d.ethtool("RSS_GET")
	if err != nil {
		return RSS{}, err
	}
	r, err := c.RSS(dev, ctx)
	if err != nil {
		return RSS{}, err
	}
	names, _ := c.RSSHashFuncs()
	return rssState(r, names), nil
}

func rssState(r ethtool.RSS, names []string) RSS {
	st := RSS{
		Context:   r.Context,
		Indir:     r.Indir,
		Key:       r.Key,
		HFuncs:    names,
		InputXfrm: rss.Symmetric(r.InputXfrm),
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

// RSSContexts returns the RSS configuration of every RSS context of the
// device, the default one (0) first.
func (d *Device) RSSContexts() ([]RSS, error) {
	c, dev, err := d.ethtool("RSS_GET")
	if err != nil {
		return nil, err
	}
	rs, err := c.RSSContexts(dev)
	if err != nil {
		return nil, err
	}
	names, _ := c.RSSHashFuncs()
	out := make([]RSS, 0, len(rs))
	for _, r := range rs {
		out = append(out, rssState(r, names))
	}
	return out, nil
}

// SetRSS changes what cfg sets in the device's RSS configuration (RSS_SET,
// like `ethtool -X`; before Linux 6.17, which added RSS_SET, the
// ETHTOOL_SRSSH ioctl ethtool -X uses, which cannot set FlowHash). It
// reads the configuration first: drivers without RSS, FlowHash without
// RSS_SET and a key on a device that reports none give an error matching
// ErrNotSupported; a key whose length differs from the device's is
// refused before sending.
func (d *Device) SetRSS(cfg RSSConfig) error {
	c, dev, err := d.ethtool("RSS_SET")
	if err != nil {
		return err
	}
	// Read first: a device without RSS answers RSS_GET with EOPNOTSUPP,
	// while RSS_SET of a key alone would only say EINVAL (key size
	// mismatch); and a key of the wrong length is caught here with both
	// lengths named.
	cur, err := c.RSS(dev, cfg.Context)
	if err != nil {
		return err
	}
	if cfg.Key != nil && len(cfg.Key) != len(cur.Key) {
		if len(cur.Key) == 0 {
			return &RequestError{Family: "ethtool", Op: "RSS_SET", Target: dev.String(), Attr: "ETHTOOL_A_RSS_HKEY", NotSupported: true,
				Missing: "setting the hash key (the device reports none)", Err: fmt.Errorf("key of %d bytes given", len(cfg.Key))}
		}
		return &RequestError{Family: "ethtool", Op: "RSS_SET", Target: dev.String(), Attr: "ETHTOOL_A_RSS_HKEY",
			Err: fmt.Errorf("hash key of %d bytes: the device's key has %d", len(cfg.Key), len(cur.Key))}
	}
	rc, err := rssConfig(c, cfg)
	if err != nil {
		return err
	}
	return c.SetRSS(dev, rc)
}

// hfuncBit maps a hash function name to its ETH_RSS_HASH_* bit.
func hfuncBit(name string, names []string) (uint32, error) {
	i := slices.Index(names, name)
	if i < 0 || i >= 32 {
		return 0, fmt.Errorf("unknown RSS hash function %q: the kernel knows %s", name, strings.Join(names, ", "))
	}
	return 1 << uint(i), nil
}

// CreateRSSContext creates an additional RSS context on the device with
// cfg's table, key, hash function and input transformation (cfg.Context:
// the number to ask for, 0 to let the kernel choose) and returns its
// number, like `ethtool -X DEV context new …`. Flow steering rules can
// then direct flows to it. Drivers without additional contexts give an
// error matching ErrNotSupported.
func (d *Device) CreateRSSContext(cfg RSSConfig) (uint32, error) {
	c, dev, err := d.ethtool("RSS_CREATE_ACT")
	if err != nil {
		return 0, err
	}
	rc, err := rssConfig(c, cfg)
	if err != nil {
		return 0, err
	}
	return c.CreateRSSContext(dev, rc)
}

// DeleteRSSContext deletes additional RSS context ctx of the device, like
// `ethtool -X DEV context N delete`.
func (d *Device) DeleteRSSContext(ctx uint32) error {
	c, dev, err := d.ethtool("RSS_DELETE_ACT")
	if err != nil {
		return err
	}
	return c.DeleteRSSContext(dev, ctx)
}

// rssConfig turns an RSSConfig into the client's form, resolving the hash
// function name with the kernel's string set.
func rssConfig(c *ethtool.Client, cfg RSSConfig) (ethtool.RSSConfig, error) {
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

// Predictor returns an rss.Predictor for the configuration: its key,
// indirection table and input transformation, with the given index rule.
// It fails with ErrNotSupported when the device hashes with a function
// other than Toeplitz (xor, crc32), with rss.ErrKeyInvalid when the
// device did not report its key, and with rss.ErrIndirection when it did
// not report its table.
func (r RSS) Predictor(rule rss.IndexRule) (*rss.Predictor, error) {
	if r.HFunc != "" && r.HFunc != "toeplitz" {
		return nil, fmt.Errorf("predictor for RSS context %d: hash function %q: only toeplitz is modelled: %w", r.Context, r.HFunc, ErrNotSupported)
	}
	if len(r.Key) == 0 {
		return nil, fmt.Errorf("predictor for RSS context %d: the device did not report its hash key: %w", r.Context, rss.ErrKeyInvalid)
	}
	p, err := rss.NewPredictor(rss.PredictorOptions{Key: r.Key, Indirection: r.Indir, Rule: rule, Symmetric: r.InputXfrm})
	if err != nil {
		return nil, fmt.Errorf("predictor for RSS context %d: %w", r.Context, err)
	}
	return p, nil
}
