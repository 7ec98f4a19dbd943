//go:build linux

package ethtool

import "golang.org/x/sys/unix"

// Constants golang.org/x/sys/unix (v0.50.0) does not define. Values from
// the kernel's include/uapi/linux/ethtool_netlink_generated.h and
// include/uapi/linux/ethtool.h (Linux 6.18); the message IDs were checked
// against the operations the running kernel's "ethtool" family lists.
const (
	// Messages from user space (enum ETHTOOL_MSG_USER_*).
	msgRSSSet       = 0x30 // ETHTOOL_MSG_RSS_SET
	msgRSSCreateAct = 0x31 // ETHTOOL_MSG_RSS_CREATE_ACT
	msgRSSDeleteAct = 0x32 // ETHTOOL_MSG_RSS_DELETE_ACT

	// Messages from the kernel (enum ETHTOOL_MSG_KERNEL_*).
	msgPSENtf                   = 0x31 // ETHTOOL_MSG_PSE_NTF
	msgRSSNtf                   = 0x32 // ETHTOOL_MSG_RSS_NTF
	msgRSSCreateActReply        = 0x33 // ETHTOOL_MSG_RSS_CREATE_ACT_REPLY
	msgRSSCreateNtf             = 0x34 // ETHTOOL_MSG_RSS_CREATE_NTF
	msgRSSDeleteNtf             = 0x35 // ETHTOOL_MSG_RSS_DELETE_NTF
	msgFeaturesNtf              = unix.ETHTOOL_MSG_FEATURES_NTF
	msgChannelsNtf              = unix.ETHTOOL_MSG_CHANNELS_NTF
	msgRingsNtf                 = unix.ETHTOOL_MSG_RINGS_NTF
	msgCoalesceNtf              = unix.ETHTOOL_MSG_COALESCE_NTF
	msgFeaturesSetReply         = unix.ETHTOOL_MSG_FEATURES_SET_REPLY
	msgRSSGetReply              = unix.ETHTOOL_MSG_RSS_GET_REPLY
	msgChannelsGetReply         = unix.ETHTOOL_MSG_CHANNELS_GET_REPLY
	msgRingsGetReply            = unix.ETHTOOL_MSG_RINGS_GET_REPLY
	msgCoalesceGetReply         = unix.ETHTOOL_MSG_COALESCE_GET_REPLY
	msgFeaturesGetReply         = unix.ETHTOOL_MSG_FEATURES_GET_REPLY
	msgStrsetGetReply           = unix.ETHTOOL_MSG_STRSET_GET_REPLY
	headerAttr                  = 1 // ETHTOOL_A_*_HEADER is 1 in every message
	genlHeaderLen               = 4
	nlmsgHeaderLen              = 16
	nlaFNested           uint16 = 0x8000 // NLA_F_NESTED
	nlaTypeMask          uint16 = 0x3fff // NLA_TYPE_MASK

	// ETHTOOL_A_HEADER_PHY_INDEX (u32), Linux 6.12.
	aHeaderPHYIndex = 4

	// enum ETHTOOL_A_COALESCE_*, after USE_CQE_MODE_RX.
	aCoalesceTXAggrMaxBytes  = 26 // ETHTOOL_A_COALESCE_TX_AGGR_MAX_BYTES (u32)
	aCoalesceTXAggrMaxFrames = 27 // ETHTOOL_A_COALESCE_TX_AGGR_MAX_FRAMES (u32)
	aCoalesceTXAggrTimeUsecs = 28 // ETHTOOL_A_COALESCE_TX_AGGR_TIME_USECS (u32)
	aCoalesceRXProfile       = 29 // ETHTOOL_A_COALESCE_RX_PROFILE (nest)
	aCoalesceTXProfile       = 30 // ETHTOOL_A_COALESCE_TX_PROFILE (nest)

	// enum ETHTOOL_A_PROFILE_* and ETHTOOL_A_IRQ_MODERATION_*.
	aProfileIRQModeration = 1 // ETHTOOL_A_PROFILE_IRQ_MODERATION (nest)
	aIRQModerationUsec    = 1 // ETHTOOL_A_IRQ_MODERATION_USEC (u32)
	aIRQModerationPkts    = 2 // ETHTOOL_A_IRQ_MODERATION_PKTS (u32)
	aIRQModerationComps   = 3 // ETHTOOL_A_IRQ_MODERATION_COMPS (u32)

	// enum ETHTOOL_A_RSS_*.
	aRSSHeader       = 1 // ETHTOOL_A_RSS_HEADER (nest)
	aRSSContext      = 2 // ETHTOOL_A_RSS_CONTEXT (u32)
	aRSSHFunc        = 3 // ETHTOOL_A_RSS_HFUNC (u32)
	aRSSIndir        = 4 // ETHTOOL_A_RSS_INDIR (binary, u32 entries)
	aRSSHKey         = 5 // ETHTOOL_A_RSS_HKEY (binary)
	aRSSInputXfrm    = 6 // ETHTOOL_A_RSS_INPUT_XFRM (u32)
	aRSSStartContext = 7 // ETHTOOL_A_RSS_START_CONTEXT (u32)
	aRSSFlowHash     = 8 // ETHTOOL_A_RSS_FLOW_HASH (nest), Linux 6.17

	// enum ethtool_stringset (include/uapi/linux/ethtool.h).
	ssFeatures     = 4 // ETH_SS_FEATURES
	ssRSSHashFuncs = 5 // ETH_SS_RSS_HASH_FUNCS
)

// msgNames names the user-space messages this package sends.
var msgNames = map[uint8]string{
	unix.ETHTOOL_MSG_STRSET_GET:   "STRSET_GET",
	unix.ETHTOOL_MSG_FEATURES_GET: "FEATURES_GET",
	unix.ETHTOOL_MSG_FEATURES_SET: "FEATURES_SET",
	unix.ETHTOOL_MSG_RINGS_GET:    "RINGS_GET",
	unix.ETHTOOL_MSG_RINGS_SET:    "RINGS_SET",
	unix.ETHTOOL_MSG_CHANNELS_GET: "CHANNELS_GET",
	unix.ETHTOOL_MSG_CHANNELS_SET: "CHANNELS_SET",
	unix.ETHTOOL_MSG_COALESCE_GET: "COALESCE_GET",
	unix.ETHTOOL_MSG_COALESCE_SET: "COALESCE_SET",
	unix.ETHTOOL_MSG_RSS_GET:      "RSS_GET",
	msgRSSSet:                     "RSS_SET",
	msgRSSCreateAct:               "RSS_CREATE_ACT",
	msgRSSDeleteAct:               "RSS_DELETE_ACT",
}

// attrTree names the attributes of a message or nest, for error texts.
type attrTree struct {
	names    map[uint16]string
	children map[uint16]*attrTree
}

func (t *attrTree) name(typ uint16) string {
	if t == nil {
		return ""
	}
	if n, ok := t.names[typ]; ok {
		return n
	}
	return ""
}

var headerTree = &attrTree{names: map[uint16]string{
	unix.ETHTOOL_A_HEADER_DEV_INDEX: "ETHTOOL_A_HEADER_DEV_INDEX",
	unix.ETHTOOL_A_HEADER_DEV_NAME:  "ETHTOOL_A_HEADER_DEV_NAME",
	unix.ETHTOOL_A_HEADER_FLAGS:     "ETHTOOL_A_HEADER_FLAGS",
	aHeaderPHYIndex:                 "ETHTOOL_A_HEADER_PHY_INDEX",
}}

var bitsetTree = &attrTree{
	names: map[uint16]string{
		unix.ETHTOOL_A_BITSET_NOMASK: "ETHTOOL_A_BITSET_NOMASK",
		unix.ETHTOOL_A_BITSET_SIZE:   "ETHTOOL_A_BITSET_SIZE",
		unix.ETHTOOL_A_BITSET_BITS:   "ETHTOOL_A_BITSET_BITS",
		unix.ETHTOOL_A_BITSET_VALUE:  "ETHTOOL_A_BITSET_VALUE",
		unix.ETHTOOL_A_BITSET_MASK:   "ETHTOOL_A_BITSET_MASK",
	},
	children: map[uint16]*attrTree{
		unix.ETHTOOL_A_BITSET_BITS: {
			names: map[uint16]string{unix.ETHTOOL_A_BITSET_BITS_BIT: "ETHTOOL_A_BITSET_BITS_BIT"},
			children: map[uint16]*attrTree{unix.ETHTOOL_A_BITSET_BITS_BIT: {names: map[uint16]string{
				unix.ETHTOOL_A_BITSET_BIT_INDEX: "ETHTOOL_A_BITSET_BIT_INDEX",
				unix.ETHTOOL_A_BITSET_BIT_NAME:  "ETHTOOL_A_BITSET_BIT_NAME",
				unix.ETHTOOL_A_BITSET_BIT_VALUE: "ETHTOOL_A_BITSET_BIT_VALUE",
			}}},
		},
	},
}

var profileTree = &attrTree{
	names: map[uint16]string{aProfileIRQModeration: "ETHTOOL_A_PROFILE_IRQ_MODERATION"},
	children: map[uint16]*attrTree{aProfileIRQModeration: {names: map[uint16]string{
		aIRQModerationUsec:  "ETHTOOL_A_IRQ_MODERATION_USEC",
		aIRQModerationPkts:  "ETHTOOL_A_IRQ_MODERATION_PKTS",
		aIRQModerationComps: "ETHTOOL_A_IRQ_MODERATION_COMPS",
	}}},
}

func msgTree(prefix string, names []string, children map[uint16]*attrTree) *attrTree {
	t := &attrTree{names: map[uint16]string{}, children: map[uint16]*attrTree{headerAttr: headerTree}}
	for i, n := range names {
		if n != "" {
			t.names[uint16(i)] = prefix + n
		}
	}
	for k, v := range children {
		t.children[k] = v
	}
	return t
}

var channelsTree = msgTree("ETHTOOL_A_CHANNELS_", []string{"", "HEADER", "RX_MAX", "TX_MAX", "OTHER_MAX", "COMBINED_MAX", "RX_COUNT", "TX_COUNT", "OTHER_COUNT", "COMBINED_COUNT"}, nil)

var ringsTree = msgTree("ETHTOOL_A_RINGS_", []string{"", "HEADER", "RX_MAX", "RX_MINI_MAX", "RX_JUMBO_MAX", "TX_MAX", "RX", "RX_MINI", "RX_JUMBO", "TX", "RX_BUF_LEN", "TCP_DATA_SPLIT", "CQE_SIZE", "TX_PUSH", "RX_PUSH", "TX_PUSH_BUF_LEN", "TX_PUSH_BUF_LEN_MAX", "HDS_THRESH", "HDS_THRESH_MAX"}, nil)

// coalesceNames lists ETHTOOL_A_COALESCE_* by attribute number.
var coalesceNames = []string{"", "HEADER", "RX_USECS", "RX_MAX_FRAMES", "RX_USECS_IRQ", "RX_MAX_FRAMES_IRQ", "TX_USECS", "TX_MAX_FRAMES", "TX_USECS_IRQ", "TX_MAX_FRAMES_IRQ", "STATS_BLOCK_USECS", "USE_ADAPTIVE_RX", "USE_ADAPTIVE_TX", "PKT_RATE_LOW", "RX_USECS_LOW", "RX_MAX_FRAMES_LOW", "TX_USECS_LOW", "TX_MAX_FRAMES_LOW", "PKT_RATE_HIGH", "RX_USECS_HIGH", "RX_MAX_FRAMES_HIGH", "TX_USECS_HIGH", "TX_MAX_FRAMES_HIGH", "RATE_SAMPLE_INTERVAL", "USE_CQE_MODE_TX", "USE_CQE_MODE_RX", "TX_AGGR_MAX_BYTES", "TX_AGGR_MAX_FRAMES", "TX_AGGR_TIME_USECS", "RX_PROFILE", "TX_PROFILE"}

var coalesceTree = msgTree("ETHTOOL_A_COALESCE_", coalesceNames, map[uint16]*attrTree{aCoalesceRXProfile: profileTree, aCoalesceTXProfile: profileTree})

var featuresTree = msgTree("ETHTOOL_A_FEATURES_", []string{"", "HEADER", "HW", "WANTED", "ACTIVE", "NOCHANGE"}, map[uint16]*attrTree{
	unix.ETHTOOL_A_FEATURES_HW: bitsetTree, unix.ETHTOOL_A_FEATURES_WANTED: bitsetTree,
	unix.ETHTOOL_A_FEATURES_ACTIVE: bitsetTree, unix.ETHTOOL_A_FEATURES_NOCHANGE: bitsetTree,
})

var rssTree = msgTree("ETHTOOL_A_RSS_", []string{"", "HEADER", "CONTEXT", "HFUNC", "INDIR", "HKEY", "INPUT_XFRM", "START_CONTEXT", "FLOW_HASH"}, nil)

var strsetTree = msgTree("ETHTOOL_A_STRSET_", []string{"", "HEADER", "STRINGSETS", "COUNTS_ONLY"}, nil)

// requestTrees maps a user-space message to its attribute names.
var requestTrees = map[uint8]*attrTree{
	unix.ETHTOOL_MSG_STRSET_GET:   strsetTree,
	unix.ETHTOOL_MSG_FEATURES_GET: featuresTree,
	unix.ETHTOOL_MSG_FEATURES_SET: featuresTree,
	unix.ETHTOOL_MSG_RINGS_GET:    ringsTree,
	unix.ETHTOOL_MSG_RINGS_SET:    ringsTree,
	unix.ETHTOOL_MSG_CHANNELS_GET: channelsTree,
	unix.ETHTOOL_MSG_CHANNELS_SET: channelsTree,
	unix.ETHTOOL_MSG_COALESCE_GET: coalesceTree,
	unix.ETHTOOL_MSG_COALESCE_SET: coalesceTree,
	unix.ETHTOOL_MSG_RSS_GET:      rssTree,
	msgRSSSet:                     rssTree,
	msgRSSCreateAct:               rssTree,
	msgRSSDeleteAct:               rssTree,
}

// attrAt names the attribute that starts at byte offset off of the
// attribute stream b (the request payload after the generic netlink
// header), descending into nests. It returns "" when no attribute starts
// there.
func attrAt(t *attrTree, b []byte, off int) string {
	pos := 0
	for pos+4 <= len(b) {
		l := int(nativeUint16(b[pos:]))
		typ := nativeUint16(b[pos+2:])
		if l < 4 || pos+l > len(b) {
			return ""
		}
		ty := typ & nlaTypeMask
		if off == pos {
			if n := t.name(ty); n != "" {
				return n
			}
			return "attribute " + itoa(int(ty))
		}
		if off > pos && off < pos+l {
			var child *attrTree
			if t != nil {
				child = t.children[ty]
			}
			inner := attrAt(child, b[pos+4:pos+l], off-pos-4)
			if inner == "" {
				return t.name(ty)
			}
			if p := t.name(ty); p != "" {
				return p + "." + inner
			}
			return inner
		}
		pos += (l + 3) &^ 3
	}
	return ""
}
