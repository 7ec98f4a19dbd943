package offload

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/xdpio/xdpio/internal/errs"
)

// Sentinel errors of the checksum functions (FillChecksum, FillPartial,
// PreparePartial). Test with errors.Is; the returned error also says why.
var (
	// ErrMalformed means the frame cannot be parsed: a truncated header,
	// an IPv4 IHL below 5, an IP or transport length beyond the frame or
	// inconsistent with another, an IPv6 extension header chain that runs
	// past the packet or is longer than the walk's bound.
	ErrMalformed = errs.ErrMalformed
	// ErrChecksumRange means csum_start/csum_offset do not point inside the
	// frame.
	ErrChecksumRange = errors.New("checksum offsets out of range")
)

// Verdict is the outcome of one checksum check.
type Verdict uint8

// Verdicts. The zero value is VerdictNone.
const (
	// VerdictNone: the frame carries no such checksum: the L3 verdict of
	// IPv6 and non-IP frames; the L4 verdict of a protocol without a
	// checksum this package knows, or of UDP over IPv4 with checksum 0.
	VerdictNone Verdict = iota
	// VerdictOK: the checksum is correct.
	VerdictOK
	// VerdictBad: the checksum is wrong (the kernel would count the packet
	// in InCsumErrors and drop it).
	VerdictBad
	// VerdictSkipped: the checksum exists but this frame alone cannot
	// verify it: a fragment (the transport checksum covers the reassembled
	// datagram), an encrypted payload, an IPv6 routing header whose final
	// destination cannot be found.
	VerdictSkipped
	// VerdictMalformed: the header that carries the checksum, or one in
	// front of it, is truncated or has inconsistent lengths. The frame is
	// invalid whatever the sum says.
	VerdictMalformed
)

var verdictNames = [...]string{"none", "ok", "bad", "skipped", "malformed"}

// String returns "none", "ok", "bad", "skipped" or "malformed".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Reason says why a verdict is malformed, skipped or none, without
// allocating. It is ReasonNone when both verdicts speak for themselves.
type Reason uint8

// Reasons.
const (
	ReasonNone Reason = iota

	// Malformed frames.
	ReasonShortEthernet    // frame shorter than an Ethernet header or a VLAN tag
	ReasonVLANTags         // more than MaxVLANTags VLAN tags
	ReasonIPVersion        // IP version field does not match the EtherType
	ReasonShortIPHeader    // IP header (IPv4 IHL, IPv6 fixed header) beyond the end of the frame
	ReasonIHL              // IPv4 header length below 20 bytes
	ReasonIPLength         // IP length field beyond the frame or below the header length
	ReasonExtHeader        // IPv6 extension header beyond the end of the packet
	ReasonExtHeaderChain   // more than MaxExtHeaders IPv6 extension headers
	ReasonHopByHop         // IPv6 hop-by-hop header not directly after the fixed header
	ReasonRoutingHeader    // IPv6 routing header whose address list is inconsistent
	ReasonShortL4Header    // transport header beyond the end of the packet
	ReasonL4Length         // UDP length, UDP-Lite coverage or TCP data offset inconsistent with the IP length
	reasonFirstSkipped     // (marker)
	ReasonFragment         // fragment: the transport checksum covers the reassembled datagram
	ReasonEncrypted        // ESP: the transport header is encrypted
	ReasonRoutingUnknown   // IPv6 routing header of an unknown type with segments left: final destination unknown
	reasonFirstNone        // (marker)
	ReasonNotIP            // EtherType is neither IPv4 nor IPv6
	ReasonNoChecksum       // transport protocol without a checksum this package knows
	ReasonUDPZeroChecksum  // UDP over IPv4 with checksum 0: sender did not compute one
	reasonFirstBad         // (marker)
	ReasonUDP6ZeroChecksum // UDP over IPv6 with checksum 0 (RFC 8200 section 8.1: receivers discard it)
)

var reasonText = [...]string{
	ReasonNone:             "",
	ReasonShortEthernet:    "truncated Ethernet header or VLAN tag",
	ReasonVLANTags:         "too many VLAN tags",
	ReasonIPVersion:        "IP version does not match EtherType",
	ReasonShortIPHeader:    "IP header beyond end of frame",
	ReasonIHL:              "IPv4 header length below 20",
	ReasonIPLength:         "IP length field beyond end of frame or below header length",
	ReasonExtHeader:        "IPv6 extension header beyond end of packet",
	ReasonExtHeaderChain:   "IPv6 extension header chain too long",
	ReasonHopByHop:         "IPv6 hop-by-hop header not first",
	ReasonRoutingHeader:    "inconsistent IPv6 routing header",
	ReasonShortL4Header:    "transport header beyond end of packet",
	ReasonL4Length:         "transport length inconsistent with IP length",
	reasonFirstSkipped:     "",
	ReasonFragment:         "fragment",
	ReasonEncrypted:        "encrypted (ESP)",
	ReasonRoutingUnknown:   "IPv6 routing header of unknown type, final destination unknown",
	reasonFirstNone:        "",
	ReasonNotIP:            "not IP",
	ReasonNoChecksum:       "no transport checksum",
	ReasonUDPZeroChecksum:  "UDP checksum 0 (none)",
	reasonFirstBad:         "",
	ReasonUDP6ZeroChecksum: "UDP checksum 0 over IPv6",
}

// String describes the reason in a few words ("" for ReasonNone).
func (r Reason) String() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Malformed reports whether r explains a malformed frame.
func (r Reason) Malformed() bool { return r > ReasonNone && r < reasonFirstSkipped }

// RXResult is the checksum verdict on one received frame. It is a plain
// value: VerifyRX does not allocate.
type RXResult struct {
	// EtherType of the network layer after any VLAN tags (EtherTypeIPv4,
	// EtherTypeIPv6 or another); 0 if the Ethernet header is truncated.
	EtherType uint16
	// Proto is the transport protocol: IPv4 Protocol, or for IPv6 the next
	// header after the extension headers. Valid when L4 is not malformed.
	Proto uint8
	// L3 is the IPv4 header checksum verdict: ok, bad, malformed (the IP
	// header cannot be parsed; also for IPv6), or none (IPv6 has no header
	// checksum; not IP).
	L3 Verdict
	// L4 is the transport checksum verdict (TCP, UDP, UDP-Lite, ICMP,
	// ICMPv6). It is malformed whenever L3 is.
	L4 Verdict
	// Reason explains a malformed, skipped or none verdict, or a bad one
	// that is not a wrong sum (UDP checksum 0 over IPv6).
	Reason Reason
	// L3Offset and L4Offset locate the IP and transport headers in the
	// frame (0 when not found).
	L3Offset, L4Offset int
}

// OK reports whether nothing is bad or malformed: every checksum the frame
// carries and this frame can verify is correct.
func (r RXResult) OK() bool { return !r.Bad() && !r.Malformed() }

// Bad reports whether a checksum is wrong.
func (r RXResult) Bad() bool { return r.L3 == VerdictBad || r.L4 == VerdictBad }

// Malformed reports whether the frame cannot be parsed.
func (r RXResult) Malformed() bool { return r.L3 == VerdictMalformed || r.L4 == VerdictMalformed }

// L4Verified reports whether the transport checksum was verified correct:
// what Linux marks CHECKSUM_UNNECESSARY.
func (r RXResult) L4Verified() bool { return r.L4 == VerdictOK }

// String describes the result on one line, e.g. "ipv4 ok, tcp ok",
// "ipv6, udp bad", "ipv4 ok, udp none (UDP checksum 0 (none))",
// "malformed (IP header beyond end of frame)".
func (r RXResult) String() string {
	if r.Malformed() {
		return "malformed (" + r.Reason.String() + ")"
	}
	var s string
	switch r.EtherType {
	case EtherTypeIPv4:
		s = "ipv4 " + r.L3.String()
	case EtherTypeIPv6:
		s = "ipv6"
	default:
		return "not ip (ethertype 0x" + strconv.FormatUint(uint64(r.EtherType), 16) + ")"
	}
	s += ", " + protoName(r.Proto) + " " + r.L4.String()
	if r.Reason != ReasonNone {
		s += " (" + r.Reason.String() + ")"
	}
	return s
}

// protoName names a transport protocol for String.
func protoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoUDPLite:
		return "udplite"
	case ProtoICMP:
		return "icmp"
	case ProtoICMPv6:
		return "icmpv6"
	case ProtoESP:
		return "esp"
	case ProtoNoNext:
		return "no-next-header"
	case ProtoFragment:
		return "fragment"
	}
	return "proto " + strconv.Itoa(int(p))
}

// layoutL4Span checks the transport header of a parsed frame and returns the end
// of the bytes its checksum covers (UDP length and UDP-Lite coverage can
// end before the IP packet does) and the checksum field offset in the
// frame. ok is false for a protocol without a known checksum.
func layoutL4Span(frame []byte, lo *Layout) (covEnd, field int, ok bool, r Reason) {
	seg := frame[lo.L4:lo.End]
	switch lo.Proto {
	case ProtoTCP:
		if len(seg) < TCPMinLen {
			return 0, 0, true, ReasonShortL4Header
		}
		if d := TCP(seg).DataOffset(); d < TCPMinLen || d > len(seg) {
			return 0, 0, true, ReasonL4Length
		}
		return lo.End, lo.L4 + TCPChecksumOffset, true, ReasonNone
	case ProtoUDP:
		if len(seg) < UDPLen {
			return 0, 0, true, ReasonShortL4Header
		}
		ul := int(UDP(seg).Length())
		// Linux trims the datagram to the UDP length when it is shorter
		// than the IP payload, and drops it when it is longer or below 8.
		// UDP length 0 over IPv6 belongs to jumbograms, which do not fit a
		// frame.
		if ul < UDPLen || ul > len(seg) {
			return 0, 0, true, ReasonL4Length
		}
		return lo.L4 + ul, lo.L4 + UDPChecksumOffset, true, ReasonNone
	case ProtoUDPLite:
		if len(seg) < UDPLen {
			return 0, 0, true, ReasonShortL4Header
		}
		// RFC 3828: coverage 0 is the whole datagram, else at least the
		// header and at most the datagram.
		cov := int(UDP(seg).Length())
		if cov == 0 {
			cov = len(seg)
		}
		if cov < UDPLen || cov > len(seg) {
			return 0, 0, true, ReasonL4Length
		}
		return lo.L4 + cov, lo.L4 + UDPChecksumOffset, true, ReasonNone
	case ProtoICMP, ProtoICMPv6:
		if len(seg) < ICMPLen {
			return 0, 0, true, ReasonShortL4Header
		}
		return lo.End, lo.L4 + ICMPChecksumOffset, true, ReasonNone
	}
	return 0, 0, false, ReasonNone
}

// layoutPseudoSum returns the pseudo-header sum of a parsed frame's transport
// segment (0 for ICMP over IPv4, which has none). The length is that of
// the whole transport segment (the IP payload), also for UDP-Lite.
func layoutPseudoSum(frame []byte, lo *Layout) uint16 {
	length := lo.End - lo.L4
	if lo.Proto == ProtoUDP {
		length = int(UDP(frame[lo.L4:]).Length()) // the trimmed datagram
	}
	return lo.PseudoHeaderSum(frame, length)
}

// VerifyRX checks the checksums of a received Ethernet frame and returns
// a verdict per layer: the IPv4 header checksum, and the TCP, UDP,
// UDP-Lite, ICMP or ICMPv6 checksum. It sums the bytes itself; a caller
// that already has a CHECKSUM_COMPLETE sum uses VerifyRXComplete instead.
//
// The frame starts with the Ethernet II header, may carry 802.1Q/802.1ad
// tags, and ends where the received bytes end (link padding after the IP
// packet is ignored; no FCS). VerifyRX never writes to frame and does not
// allocate.
func VerifyRX(frame []byte) RXResult {
	return verifyRX(frame, 0, false)
}

// VerifyRXComplete is VerifyRX for a caller that has a complete sum, as a
// NIC reports it with Linux CHECKSUM_COMPLETE (ravb, mlx5, …): sum is the
// 16-bit one's complement sum, not complemented, of frame[EthernetLen:] —
// every byte after the 14-byte Ethernet header to the end of the frame:
// VLAN tags, IP header, payload and link padding — as
// Checksum(frame[EthernetLen:], 0) computes it. (Linux keeps skb->csum as
// a 32-bit __wsum in network byte order; fold it and read it big-endian.)
//
// The transport checksum is then derived as the kernel does it: the sums
// of the VLAN tags, the IP header (and extension headers) and the bytes
// after the transport segment are subtracted from sum, so the payload is
// not read again. The IPv4 header checksum is computed from the header.
func VerifyRXComplete(frame []byte, sum uint16) RXResult {
	return verifyRX(frame, sum, true)
}

func verifyRX(frame []byte, sum uint16, haveSum bool) RXResult {
	var res RXResult
	var layout Layout
	lo := &layout
	r := lo.Parse(frame)
	res.EtherType = lo.EtherType
	res.L3Offset = lo.L3
	if r != ReasonNone {
		res.Reason = r
		if r.Malformed() {
			res.L3, res.L4 = VerdictMalformed, VerdictMalformed
		}
		return res
	}
	res.Proto = lo.Proto
	res.L4Offset = lo.L4
	if !lo.IPv6 {
		if Checksum(frame[lo.L3:lo.L4], 0) == 0xffff {
			res.L3 = VerdictOK
		} else {
			res.L3 = VerdictBad
		}
	}
	if lo.Skip != ReasonNone {
		res.L4, res.Reason = VerdictSkipped, lo.Skip
		return res
	}
	covEnd, field, known, r := layoutL4Span(frame, lo)
	if !known {
		res.Reason = ReasonNoChecksum
		return res
	}
	if r != ReasonNone {
		res.L4, res.Reason = VerdictMalformed, r
		return res
	}
	check := binary.BigEndian.Uint16(frame[field:])
	if lo.Proto == ProtoUDP && check == 0 {
		if lo.IPv6 {
			res.L4, res.Reason = VerdictBad, ReasonUDP6ZeroChecksum
		} else {
			res.Reason = ReasonUDPZeroChecksum
		}
		return res
	}
	var l4 uint16
	if haveSum {
		// Subtract everything in front of the transport header after the
		// Ethernet header (tags, IP header, extension headers) and
		// everything after the covered bytes. Offsets are relative to
		// EthernetLen; the front part has even length, the back part
		// starts at an odd position when covEnd-EthernetLen is odd, and
		// then its sum is byte-swapped (RFC 1071 section 1.2(B)).
		l4 = onesSub(sum, Checksum(frame[EthernetLen:lo.L4], 0))
		if covEnd < len(frame) {
			tail := Checksum(frame[covEnd:], 0)
			if (covEnd-EthernetLen)&1 != 0 {
				tail = tail<<8 | tail>>8
			}
			l4 = onesSub(l4, tail)
		}
	} else {
		l4 = Checksum(frame[lo.L4:covEnd], 0)
	}
	if s := Combine(l4, layoutPseudoSum(frame, lo)); s == 0xffff || s == 0 {
		// 0 and 0xffff are the same value in one's complement; a derived
		// sum can land on either.
		res.L4 = VerdictOK
	} else {
		res.L4 = VerdictBad
	}
	return res
}

// PartialChecksum reports whether the transport checksum field of a
// received Ethernet frame (TCP, UDP or UDP-Lite) holds just the
// pseudo-header sum, which is what a Linux sender leaves there for a
// transmit checksum offload (CHECKSUM_PARTIAL; see FillPartial). Such
// frames arrive unfinished only from a sender on the same host, through a
// veth whose TX checksum offload is on (its default): the kernel trusts
// them there because it knows where they came from, which a frame read
// through XDP no longer says. Any sender can write the same bytes: a
// frame this accepts is one whose data nothing has checked.
//
// It returns false for a frame that does not parse, carries no such
// checksum, or has a correct one (VerifyRX says VerdictOK): a correct
// checksum can equal the pseudo-header sum only when the data sums to 0.
// It does not allocate or write to frame.
func PartialChecksum(frame []byte) bool {
	var layout Layout
	lo := &layout
	if lo.Parse(frame) != ReasonNone || lo.Skip != ReasonNone {
		return false
	}
	if lo.Proto != ProtoTCP && lo.Proto != ProtoUDP && lo.Proto != ProtoUDPLite {
		return false
	}
	_, field, known, r := layoutL4Span(frame, lo)
	if !known || r != ReasonNone {
		return false
	}
	if binary.BigEndian.Uint16(frame[field:]) != layoutPseudoSum(frame, lo) {
		return false
	}
	return VerifyRX(frame).L4 == VerdictBad
}

// onesSub subtracts b from a in one's complement arithmetic.
func onesSub(a, b uint16) uint16 { return Combine(a, ^b) }
