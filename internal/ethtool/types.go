package ethtool

import (
	"fmt"
	"strconv"
)

// Device names a network interface by Index, by Name, or both (the kernel
// then checks that they agree). The zero value names no device.
type Device struct {
	// Index is the interface index (ifindex) in the caller's namespace; 0
	// means "not given".
	Index int
	// Name is the interface name; "" means "not given".
	Name string
}

// String returns the name, or "ifindex N" when only the index is known.
func (d Device) String() string {
	switch {
	case d.Name != "":
		return d.Name
	case d.Index > 0:
		return "ifindex " + strconv.Itoa(d.Index)
	default:
		return "<no device>"
	}
}

func (d Device) validate() error {
	if d.Name == "" && d.Index <= 0 {
		return fmt.Errorf("no device: give an interface name or index")
	}
	if d.Index < 0 || d.Index > 1<<31-1 {
		return fmt.Errorf("invalid interface index %d", d.Index)
	}
	if len(d.Name) >= 16 {
		return fmt.Errorf("invalid interface name %q: longer than 15 bytes", d.Name)
	}
	return nil
}

// Channels are a device's queue (channel) counts, as `ethtool -l` shows
// them. The kernel omits a kind whose maximum is 0; it decodes as 0 here
// and ethtool prints it as "n/a".
type Channels struct {
	RXMax, TXMax, OtherMax, CombinedMax uint32 // pre-set maximums
	RX, TX, Other, Combined             uint32 // current counts
}

// ChannelsConfig says which channel counts to change. Nil fields are left
// as they are.
type ChannelsConfig struct {
	RX, TX, Other, Combined *uint32
}

// TCPDataSplit is the ring's TCP header/data split setting
// (enum ethtool_tcp_data_split).
type TCPDataSplit uint8

// TCP header/data split states.
const (
	TCPDataSplitUnknown  TCPDataSplit = 0 // not reported / let the driver decide
	TCPDataSplitDisabled TCPDataSplit = 1
	TCPDataSplitEnabled  TCPDataSplit = 2
)

// String returns ethtool's spelling: "n/a", "off" or "on".
func (s TCPDataSplit) String() string {
	switch s {
	case TCPDataSplitUnknown:
		return "n/a"
	case TCPDataSplitDisabled:
		return "off"
	case TCPDataSplitEnabled:
		return "on"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// Rings are a device's ring sizes and ring options, as `ethtool -g` shows
// them. The kernel omits what the driver does not report (0 here).
type Rings struct {
	RXMax, RXMiniMax, RXJumboMax, TXMax uint32 // pre-set maximums
	RX, RXMini, RXJumbo, TX             uint32 // current sizes
	RXBufLen                            uint32 // RX buffer size in bytes
	TCPDataSplit                        TCPDataSplit
	CQESize                             uint32 // completion queue entry size
	TXPush, RXPush                      bool
	TXPushBufLen, TXPushBufLenMax       uint32
	HDSThresh, HDSThreshMax             uint32 // header/data split threshold
}

// RingsConfig says which ring parameters to change. Nil fields are left as
// they are.
type RingsConfig struct {
	RX, RXMini, RXJumbo, TX *uint32
	RXBufLen                *uint32
	TCPDataSplit            *TCPDataSplit
	CQESize                 *uint32
	TXPush, RXPush          *bool
	TXPushBufLen            *uint32
	HDSThresh               *uint32
}

// IRQModeration is one entry of a DIM (adaptive moderation) profile.
// A nil field is not reported / not changed.
type IRQModeration struct {
	Usec, Pkts, Comps *uint32
}

// Coalesce are interrupt-coalescing parameters (`ethtool -c`/`-C`). In a
// reply, a nil field is a parameter the driver does not support (the
// kernel reports only supported ones). In a request, nil fields are left
// as they are.
type Coalesce struct {
	RXUsecs, RXMaxFrames, RXUsecsIRQ, RXMaxFramesIRQ *uint32
	TXUsecs, TXMaxFrames, TXUsecsIRQ, TXMaxFramesIRQ *uint32
	StatsBlockUsecs                                  *uint32
	UseAdaptiveRX, UseAdaptiveTX                     *bool
	PktRateLow                                       *uint32
	RXUsecsLow, RXMaxFramesLow                       *uint32
	TXUsecsLow, TXMaxFramesLow                       *uint32
	PktRateHigh                                      *uint32
	RXUsecsHigh, RXMaxFramesHigh                     *uint32
	TXUsecsHigh, TXMaxFramesHigh                     *uint32
	RateSampleInterval                               *uint32
	UseCQEModeTX, UseCQEModeRX                       *bool
	TXAggrMaxBytes, TXAggrMaxFrames, TXAggrTimeUsecs *uint32
	// RXProfile and TXProfile are the DIM profiles; nil when not
	// supported (reply) or not to be changed (request).
	RXProfile, TXProfile []IRQModeration
}

// Bitset is a decoded ethtool bitset: a size, the set bits and, when the
// kernel sent a mask, the bits the mask covers. Names holds the bit names
// when the kernel sent them (verbose form) or the caller resolved them.
type Bitset struct {
	Size  int
	Value []uint32 // bit i is Value[i/32]>>(i%32)&1
	Mask  []uint32 // nil for a list (NOMASK) bitset
	Names map[int]string
}

// Bit reports whether bit i is set.
func (b Bitset) Bit(i int) bool { return bitOf(b.Value, i) }

// InMask reports whether bit i is covered by the mask (always true for a
// list bitset without mask).
func (b Bitset) InMask(i int) bool {
	if b.Mask == nil {
		return i >= 0 && i < b.Size
	}
	return bitOf(b.Mask, i)
}

func bitOf(w []uint32, i int) bool {
	if i < 0 || i/32 >= len(w) {
		return false
	}
	return w[i/32]>>(uint(i)%32)&1 == 1
}

func setBit(w []uint32, i int) {
	w[i/32] |= 1 << (uint(i) % 32)
}

// Feature is one netdev feature of a device, as `ethtool -k` shows it.
type Feature struct {
	// Name is the kernel's name (ETH_SS_FEATURES); "" for an unused bit,
	// which ethtool does not show.
	Name       string
	Active     bool // currently on
	Wanted     bool // requested by the user
	Changeable bool // in the driver's hw_features: the user may toggle it
	NoChange   bool // "never changed" by the driver (ETHTOOL_A_FEATURES_NOCHANGE)
}

// Fixed reports whether the feature cannot be changed (ethtool's "[fixed]").
func (f Feature) Fixed() bool { return !f.Changeable || f.NoChange }

// Features are all netdev features of a device, in the kernel's bit order.
type Features []Feature

// Lookup returns the feature with the given kernel name.
func (fs Features) Lookup(name string) (Feature, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// FeatureChange is what FEATURES_SET reports for one feature.
type FeatureChange struct {
	Name string
	// Wanted is what the caller asked for; Active is the state after the
	// request.
	Wanted, Active bool
}

// FeaturesResult is the kernel's answer to a FEATURES_SET request.
type FeaturesResult struct {
	// Refused lists requested features whose active state differs from the
	// request (the kernel's "wanted" diff): the driver or a dependency
	// refused them.
	Refused []FeatureChange
	// Changed lists features whose active state changed, including ones
	// that changed as a consequence of the request.
	Changed []FeatureChange
}

// RSS hash function bits (ETH_RSS_HASH_*), as in ETHTOOL_A_RSS_HFUNC.
const (
	HashToeplitz uint32 = 1 << 0
	HashXOR      uint32 = 1 << 1
	HashCRC32    uint32 = 1 << 2
)

// RSS input transformation bits (RXH_XFRM_*), as in
// ETHTOOL_A_RSS_INPUT_XFRM.
const (
	XfrmSymXOR   uint32 = 1 << 0 // symmetric-xor
	XfrmSymORXOR uint32 = 1 << 1 // symmetric-or-xor
)

// RSS is a device's RSS configuration for one context (0 is the default).
type RSS struct {
	Context   uint32
	HFunc     uint32   // one HashXXX bit; 0 when not reported
	Indir     []uint32 // indirection table: entry i names an RX queue
	Key       []byte   // hash key
	InputXfrm uint32   // XfrmXXX bits
	// HFuncNames maps the device's hash-function bits to their names, from
	// the kernel's ETH_SS_RSS_HASH_FUNCS string set.
	HFuncNames map[uint32]string
	// FlowHash says which header fields the hash covers for each flow
	// type (ETHTOOL_A_RSS_FLOW_HASH, Linux 6.17); nil when not reported.
	FlowHash map[FlowType]HashFields
}

// RSSConfig says what to change in an RSS context. Nil fields are left as
// they are.
type RSSConfig struct {
	Context uint32 // RSS context (0: the default one)
	HFunc   *uint32
	// Indir is the new indirection table; a non-nil empty slice resets it
	// to the driver's default.
	Indir     []uint32
	Key       []byte
	InputXfrm *uint32
	// FlowHash sets the hashed header fields of the given flow types
	// (like `ethtool -N DEV rx-flow-hash tcp4 sdfn`); nil keeps them all.
	FlowHash map[FlowType]HashFields
}
