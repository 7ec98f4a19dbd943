//go:build linux

package ethtool

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// maxBitsetSize bounds the size of a decoded bitset: the kernel's largest
// (link modes) has about a hundred bits, so this only stops garbage from
// allocating gigabytes.
const maxBitsetSize = 1 << 16

// decodeBitset decodes an ETHTOOL_A_BITSET_* nest in compact or verbose
// form.
func decodeBitset(b []byte) (Bitset, error) {
	ad, err := newDecoder(b)
	if err != nil {
		return Bitset{}, err
	}
	var (
		bs         Bitset
		nomask     bool
		haveSize   bool
		value      []byte
		mask       []byte
		haveValue  bool
		haveMask   bool
		bits       []bitEntry
		verboseErr error
	)
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_BITSET_NOMASK:
			nomask = true
		case unix.ETHTOOL_A_BITSET_SIZE:
			bs.Size = int(ad.Uint32())
			haveSize = true
		case unix.ETHTOOL_A_BITSET_VALUE:
			value, haveValue = ad.Bytes(), true
		case unix.ETHTOOL_A_BITSET_MASK:
			mask, haveMask = ad.Bytes(), true
		case unix.ETHTOOL_A_BITSET_BITS:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				bits, verboseErr = decodeBits(nad)
				return verboseErr
			})
		}
	}
	if err := ad.Err(); err != nil {
		return Bitset{}, err
	}
	if !haveSize {
		return Bitset{}, fmt.Errorf("bitset without ETHTOOL_A_BITSET_SIZE")
	}
	if bs.Size < 0 || bs.Size > maxBitsetSize {
		return Bitset{}, fmt.Errorf("bitset size %d out of range", bs.Size)
	}
	words := (bs.Size + 31) / 32
	if haveValue {
		// Compact form.
		var err error
		if bs.Value, err = bitsetWords(value, words, "value"); err != nil {
			return Bitset{}, err
		}
		if haveMask {
			if bs.Mask, err = bitsetWords(mask, words, "mask"); err != nil {
				return Bitset{}, err
			}
		} else if !nomask {
			return Bitset{}, fmt.Errorf("compact bitset without mask and without NOMASK")
		}
		return bs, nil
	}
	// Verbose form (or an empty compact one).
	bs.Value = make([]uint32, words)
	if !nomask {
		bs.Mask = make([]uint32, words)
	}
	for _, e := range bits {
		if !e.haveIndex {
			return Bitset{}, fmt.Errorf("bitset bit %q without index", e.name)
		}
		if e.index >= bs.Size {
			return Bitset{}, fmt.Errorf("bitset bit index %d outside size %d", e.index, bs.Size)
		}
		if e.name != "" {
			if bs.Names == nil {
				bs.Names = map[int]string{}
			}
			bs.Names[e.index] = e.name
		}
		if nomask || e.value {
			setBit(bs.Value, e.index)
		}
		if !nomask {
			setBit(bs.Mask, e.index)
		}
	}
	return bs, nil
}

type bitEntry struct {
	index     int
	haveIndex bool
	name      string
	value     bool
}

func decodeBits(ad *netlink.AttributeDecoder) ([]bitEntry, error) {
	var out []bitEntry
	for ad.Next() {
		if ad.Type() != unix.ETHTOOL_A_BITSET_BITS_BIT {
			continue
		}
		if len(out) >= maxBitsetSize {
			return nil, fmt.Errorf("more than %d bitset bits", maxBitsetSize)
		}
		var e bitEntry
		ad.Nested(func(nad *netlink.AttributeDecoder) error {
			for nad.Next() {
				switch nad.Type() {
				case unix.ETHTOOL_A_BITSET_BIT_INDEX:
					v := nad.Uint32()
					if v > maxBitsetSize {
						return fmt.Errorf("bitset bit index %d out of range", v)
					}
					e.index, e.haveIndex = int(v), true
				case unix.ETHTOOL_A_BITSET_BIT_NAME:
					e.name = nad.String()
				case unix.ETHTOOL_A_BITSET_BIT_VALUE:
					e.value = true
				}
			}
			return nil
		})
		out = append(out, e)
	}
	return out, ad.Err()
}

func bitsetWords(b []byte, words int, what string) ([]uint32, error) {
	if len(b) != 4*words {
		return nil, fmt.Errorf("bitset %s has %d bytes, want %d", what, len(b), 4*words)
	}
	w := make([]uint32, words)
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w, nil
}

// StringSet returns the strings of string set id (an ETH_SS_* value) for
// dev, by index (STRSET_GET). With the zero Device it returns the global
// set where the kernel has one.
func (c *Client) StringSet(dev Device, id uint32) ([]string, error) {
	r := request{cmd: unix.ETHTOOL_MSG_STRSET_GET, dev: dev, encode: func(ae *netlink.AttributeEncoder) {
		ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(nae *netlink.AttributeEncoder) error {
			nae.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(sae *netlink.AttributeEncoder) error {
				sae.Uint32(unix.ETHTOOL_A_STRINGSET_ID, id)
				return nil
			})
			return nil
		})
	}}
	out, err := c.do(r)
	if err != nil {
		return nil, err
	}
	b, err := oneReply("STRSET_GET", out, msgStrsetGetReply)
	if err != nil {
		return nil, &Error{Family: family, Op: "STRSET_GET", Target: dev.target(), Err: err}
	}
	s, err := decodeStringSet(b, id)
	if err != nil {
		return nil, &Error{Family: family, Op: "STRSET_GET", Target: dev.target(), Err: err}
	}
	return s, nil
}

// decodeStringSet decodes a STRSET_GET reply and returns set id.
func decodeStringSet(b []byte, id uint32) ([]string, error) {
	ad, err := newDecoder(b)
	if err != nil {
		return nil, decodeError("STRSET_GET", err)
	}
	var (
		out   []string
		found bool
	)
	for ad.Next() {
		if ad.Type() != unix.ETHTOOL_A_STRSET_STRINGSETS {
			continue
		}
		ad.Nested(func(sad *netlink.AttributeDecoder) error {
			for sad.Next() {
				if sad.Type() != unix.ETHTOOL_A_STRINGSETS_STRINGSET {
					continue
				}
				var (
					setID uint32
					count = -1
					strs  = map[int]string{}
				)
				sad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						switch nad.Type() {
						case unix.ETHTOOL_A_STRINGSET_ID:
							setID = nad.Uint32()
						case unix.ETHTOOL_A_STRINGSET_COUNT:
							v := nad.Uint32()
							if v > maxBitsetSize {
								return fmt.Errorf("string set count %d out of range", v)
							}
							count = int(v)
						case unix.ETHTOOL_A_STRINGSET_STRINGS:
							nad.Nested(func(tad *netlink.AttributeDecoder) error {
								for tad.Next() {
									if tad.Type() != unix.ETHTOOL_A_STRINGS_STRING {
										continue
									}
									idx, val, have := -1, "", false
									tad.Nested(func(ead *netlink.AttributeDecoder) error {
										for ead.Next() {
											switch ead.Type() {
											case unix.ETHTOOL_A_STRING_INDEX:
												idx = int(ead.Uint32())
											case unix.ETHTOOL_A_STRING_VALUE:
												val, have = ead.String(), true
											}
										}
										return nil
									})
									if idx < 0 || idx >= maxBitsetSize || !have {
										return fmt.Errorf("string without valid index or value")
									}
									strs[idx] = val
								}
								return nil
							})
						}
					}
					return nil
				})
				if sad.Err() != nil || setID != id {
					continue
				}
				if count < 0 {
					count = len(strs)
				}
				list := make([]string, count)
				for i, s := range strs {
					if i >= count {
						return fmt.Errorf("string index %d outside count %d", i, count)
					}
					list[i] = s
				}
				out, found = list, true
			}
			return nil
		})
	}
	if err := ad.Err(); err != nil {
		return nil, decodeError("STRSET_GET", err)
	}
	if !found {
		return nil, fmt.Errorf("decode STRSET_GET reply: string set %d %w", id, errNoStringSet)
	}
	return out, nil
}

// Features returns dev's netdev features (FEATURES_GET, `ethtool -k`),
// named from the kernel's ETH_SS_FEATURES string set.
func (c *Client) Features(dev Device) (Features, error) {
	names, err := c.StringSet(dev, ssFeatures)
	if err != nil {
		return nil, err
	}
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_FEATURES_GET, dev: dev, flags: FlagCompactBitsets})
	if err != nil {
		return nil, err
	}
	b, err := oneReply("FEATURES_GET", msgs, msgFeaturesGetReply)
	if err != nil {
		return nil, &Error{Family: family, Op: "FEATURES_GET", Target: dev.target(), Err: err}
	}
	fs, err := decodeFeatures(b, names)
	if err != nil {
		return nil, &Error{Family: family, Op: "FEATURES_GET", Target: dev.target(), Err: err}
	}
	return fs, nil
}

// decodeFeatures decodes a FEATURES_GET reply; names are the feature
// strings by bit index (a verbose bitset's own names win).
func decodeFeatures(b []byte, names []string) (Features, error) {
	ad, err := newDecoder(b)
	if err != nil {
		return nil, decodeError("FEATURES_GET", err)
	}
	var sets [4]*Bitset
	for ad.Next() {
		t := ad.Type()
		if t < unix.ETHTOOL_A_FEATURES_HW || t > unix.ETHTOOL_A_FEATURES_NOCHANGE {
			continue
		}
		bs, err := decodeBitset(ad.Bytes())
		if err != nil {
			return nil, decodeError("FEATURES_GET", fmt.Errorf("%s: %w", featuresTree.name(t), err))
		}
		sets[t-unix.ETHTOOL_A_FEATURES_HW] = &bs
	}
	if err := ad.Err(); err != nil {
		return nil, decodeError("FEATURES_GET", err)
	}
	for i, s := range sets {
		if s == nil {
			return nil, decodeError("FEATURES_GET", fmt.Errorf("%s missing", featuresTree.name(uint16(i)+unix.ETHTOOL_A_FEATURES_HW)))
		}
	}
	hw, wanted, active, nochange := sets[0], sets[1], sets[2], sets[3]
	n := active.Size
	fs := make(Features, 0, n)
	for i := 0; i < n; i++ {
		name := ""
		for _, s := range sets {
			if nm, ok := s.Names[i]; ok {
				name = nm
			}
		}
		if name == "" && i < len(names) {
			name = names[i]
		}
		fs = append(fs, Feature{
			Name:       name,
			Active:     active.Bit(i),
			Wanted:     wanted.Bit(i),
			Changeable: hw.Bit(i),
			NoChange:   nochange.Bit(i),
		})
	}
	return fs, nil
}

// SetFeatures turns the named kernel features (ETH_SS_FEATURES names such
// as "tx-tcp-segmentation") on or off (FEATURES_SET, `ethtool -K`) and
// reports what the kernel refused and what changed. Unknown names fail
// before anything is sent.
func (c *Client) SetFeatures(dev Device, want map[string]bool) (FeaturesResult, error) {
	names, err := c.StringSet(dev, ssFeatures)
	if err != nil {
		return FeaturesResult{}, err
	}
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		if !known[k] {
			return FeaturesResult{}, &Error{Family: family, Op: "FEATURES_SET", Target: dev.target(), Attr: "ETHTOOL_A_FEATURES_WANTED",
				Err: fmt.Errorf("unknown feature %q (see `ethtool -k` for the names this kernel knows)", k)}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_FEATURES_SET, dev: dev, flags: FlagCompactBitsets,
		encode: encodeFeaturesSet(keys, want)})
	if err != nil {
		return FeaturesResult{}, err
	}
	if len(msgs) == 0 {
		return FeaturesResult{}, nil
	}
	b, err := oneReply("FEATURES_SET", msgs, msgFeaturesSetReply)
	if err != nil {
		return FeaturesResult{}, &Error{Family: family, Op: "FEATURES_SET", Target: dev.target(), Err: err}
	}
	res, err := decodeFeaturesSetReply(b, names)
	if err != nil {
		return FeaturesResult{}, &Error{Family: family, Op: "FEATURES_SET", Target: dev.target(), Err: err}
	}
	return res, nil
}

// encodeFeaturesSet encodes the wanted features as a verbose bitset of
// names, as ethtool -K does: the bits listed form the mask, VALUE marks
// the ones to turn on.
func encodeFeaturesSet(keys []string, want map[string]bool) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		ae.Nested(unix.ETHTOOL_A_FEATURES_WANTED, func(bae *netlink.AttributeEncoder) error {
			bae.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bits *netlink.AttributeEncoder) error {
				for _, k := range keys {
					bits.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(bit *netlink.AttributeEncoder) error {
						bit.String(unix.ETHTOOL_A_BITSET_BIT_NAME, k)
						if want[k] {
							bit.Flag(unix.ETHTOOL_A_BITSET_BIT_VALUE, true)
						}
						return nil
					})
				}
				return nil
			})
			return nil
		})
	}
}

// decodeFeaturesSetReply decodes the WANTED and ACTIVE diffs of a
// FEATURES_SET reply.
func decodeFeaturesSetReply(b []byte, names []string) (FeaturesResult, error) {
	ad, err := newDecoder(b)
	if err != nil {
		return FeaturesResult{}, decodeError("FEATURES_SET", err)
	}
	var wanted, active *Bitset
	for ad.Next() {
		switch t := ad.Type(); t {
		case unix.ETHTOOL_A_FEATURES_WANTED, unix.ETHTOOL_A_FEATURES_ACTIVE:
			bs, err := decodeBitset(ad.Bytes())
			if err != nil {
				return FeaturesResult{}, decodeError("FEATURES_SET", fmt.Errorf("%s: %w", featuresTree.name(t), err))
			}
			if t == unix.ETHTOOL_A_FEATURES_WANTED {
				wanted = &bs
			} else {
				active = &bs
			}
		}
	}
	if err := ad.Err(); err != nil {
		return FeaturesResult{}, decodeError("FEATURES_SET", err)
	}
	var res FeaturesResult
	name := func(bs *Bitset, i int) string {
		if n, ok := bs.Names[i]; ok {
			return n
		}
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("feature-bit-%d", i)
	}
	// WANTED: value = requested state, mask = bits where it differs from
	// the active state. ACTIVE: value = new state, mask = bits changed.
	if wanted != nil {
		for i := 0; i < wanted.Size; i++ {
			if wanted.Mask != nil && wanted.InMask(i) {
				res.Refused = append(res.Refused, FeatureChange{Name: name(wanted, i), Wanted: wanted.Bit(i), Active: !wanted.Bit(i)})
			}
		}
	}
	if active != nil {
		for i := 0; i < active.Size; i++ {
			if active.Mask != nil && active.InMask(i) {
				res.Changed = append(res.Changed, FeatureChange{Name: name(active, i), Wanted: active.Bit(i), Active: active.Bit(i)})
			}
		}
	}
	return res, nil
}
