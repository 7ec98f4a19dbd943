package ethtool

import (
	"strconv"
	"strings"
)

// FlowType is a flow type of ETHTOOL_A_RSS_FLOW_HASH (ETHTOOL_A_FLOW_*):
// the traffic class whose hashed header fields a device reports or sets.
type FlowType uint16

// Flow types, numbered as the kernel's ETHTOOL_A_FLOW_* attributes.
const (
	FlowEther FlowType = iota + 1
	FlowIP4
	FlowIP6
	FlowTCP4
	FlowTCP6
	FlowUDP4
	FlowUDP6
	FlowSCTP4
	FlowSCTP6
	FlowAH4
	FlowAH6
	FlowESP4
	FlowESP6
	FlowAHESP4
	FlowAHESP6
	FlowGTPU4
	FlowGTPU6
	FlowGTPC4
	FlowGTPC6
	FlowGTPCTEID4
	FlowGTPCTEID6
	FlowGTPUEH4
	FlowGTPUEH6
	FlowGTPUUL4
	FlowGTPUUL6
	FlowGTPUDL4
	FlowGTPUDL6
)

var flowNames = []string{"", "ether", "ip4", "ip6", "tcp4", "tcp6", "udp4", "udp6", "sctp4", "sctp6", "ah4", "ah6",
	"esp4", "esp6", "ah-esp4", "ah-esp6", "gtpu4", "gtpu6", "gtpc4", "gtpc6", "gtpc-teid4", "gtpc-teid6",
	"gtpu-eh4", "gtpu-eh6", "gtpu-ul4", "gtpu-ul6", "gtpu-dl4", "gtpu-dl6"}

// String returns the kernel's name for the flow type ("tcp4", "udp6", …).
func (f FlowType) String() string {
	if int(f) < len(flowNames) && f > 0 {
		return flowNames[f]
	}
	return "flow-" + strconv.Itoa(int(f))
}

// ParseFlowType maps a name ("tcp4", "udp6", …) to its flow type.
func ParseFlowType(s string) (FlowType, bool) {
	for i, n := range flowNames {
		if i > 0 && n == s {
			return FlowType(i), true
		}
	}
	return 0, false
}

// HashFields is a set of header fields a flow type's hash covers (the
// kernel's RXH_* bits, as `ethtool -N DEV rx-flow-hash tcp4 sdfn` sets).
type HashFields uint32

// Header fields of HashFields.
const (
	HashL2DA     HashFields = 1 << 1 // RXH_L2DA: destination MAC
	HashVLAN     HashFields = 1 << 2 // RXH_VLAN: VLAN tag
	HashL3Proto  HashFields = 1 << 3 // RXH_L3_PROTO: L3 protocol
	HashIPSrc    HashFields = 1 << 4 // RXH_IP_SRC: source address
	HashIPDst    HashFields = 1 << 5 // RXH_IP_DST: destination address
	HashL4Src    HashFields = 1 << 6 // RXH_L4_B_0_1: source port
	HashL4Dst    HashFields = 1 << 7 // RXH_L4_B_2_3: destination port
	HashGTPTEID  HashFields = 1 << 8 // RXH_GTP_TEID
	HashIPSrcDst            = HashIPSrc | HashIPDst
	HashDiscard  HashFields = 1 << 31 // RXH_DISCARD: drop the flow type
)

var hashFieldNames = []struct {
	bit  HashFields
	name string
}{{HashL2DA, "l2-da"}, {HashVLAN, "vlan"}, {HashL3Proto, "l3-proto"}, {HashIPSrc, "ip-src"}, {HashIPDst, "ip-dst"},
	{HashL4Src, "l4-src"}, {HashL4Dst, "l4-dst"}, {HashGTPTEID, "gtp-teid"}, {HashDiscard, "discard"}}

// Names lists the fields in h by name ("ip-src", "l4-dst", …); unknown
// bits appear as "bit-N".
func (h HashFields) Names() []string {
	out := []string{}
	rest := h
	for _, f := range hashFieldNames {
		if h&f.bit != 0 {
			out = append(out, f.name)
			rest &^= f.bit
		}
	}
	for i := 0; i < 32; i++ {
		if rest&(1<<uint(i)) != 0 {
			out = append(out, "bit-"+strconv.Itoa(i))
		}
	}
	return out
}

// String joins Names with commas, or says "none".
func (h HashFields) String() string {
	if h == 0 {
		return "none"
	}
	return strings.Join(h.Names(), ",")
}

// ParseHashFields parses a comma-separated list of field names (as String
// prints them; "none" or "" for no fields).
func ParseHashFields(s string) (HashFields, bool) {
	var h HashFields
	if s == "" || s == "none" {
		return 0, true
	}
	for _, part := range strings.Split(s, ",") {
		found := false
		for _, f := range hashFieldNames {
			if f.name == strings.TrimSpace(part) {
				h |= f.bit
				found = true
			}
		}
		if !found {
			return 0, false
		}
	}
	return h, true
}
