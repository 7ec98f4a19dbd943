package offload

import "encoding/binary"

// Views over header bytes, in the style of gVisor's header package. A view is
// a []byte that starts at the first byte of the header. Methods do not check
// bounds: check the length once, at the edge (len(b) >= IPv4MinLen and
// b.HeaderLength() <= len(b), for example), before calling the others, or
// use Parse, which does all the checks for a whole frame.
//
// A view over a UMEM frame is valid only until the frame's descriptor goes
// back to a ring; copy the bytes (append([]byte(nil), v...)) to keep them.

// EtherType values and header sizes of the link layer.
const (
	EtherTypeIPv4 = 0x0800 // IPv4
	EtherTypeIPv6 = 0x86dd // IPv6
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q customer VLAN tag
	EtherTypeQinQ = 0x88a8 // IEEE 802.1ad service VLAN tag (outer tag of Q-in-Q)

	EthernetLen = 14 // Ethernet II header: destination, source, EtherType
	VLANLen     = 4  // one 802.1Q/802.1ad tag: TCI, inner EtherType
)

// IP protocol numbers (IPv4 Protocol, IPv6 Next Header) this package knows.
const (
	ProtoHopByHop = 0   // IPv6 hop-by-hop options header
	ProtoICMP     = 1   // ICMP for IPv4
	ProtoTCP      = 6   // TCP
	ProtoUDP      = 17  // UDP
	ProtoRouting  = 43  // IPv6 routing header
	ProtoFragment = 44  // IPv6 fragment header
	ProtoESP      = 50  // encapsulating security payload
	ProtoAH       = 51  // authentication header
	ProtoICMPv6   = 58  // ICMP for IPv6
	ProtoNoNext   = 59  // IPv6: no next header
	ProtoDstOpts  = 60  // IPv6 destination options header
	ProtoUDPLite  = 136 // UDP-Lite (RFC 3828)
)

// Header sizes and checksum field offsets (from the start of the header).
const (
	IPv4MinLen = 20 // IPv4 header without options
	IPv4MaxLen = 60 // IPv4 header with 40 bytes of options
	IPv6Len    = 40 // IPv6 fixed header
	TCPMinLen  = 20 // TCP header without options
	TCPMaxLen  = 60 // TCP header with 40 bytes of options
	UDPLen     = 8  // UDP and UDP-Lite header
	ICMPLen    = 4  // type, code, checksum: the part of ICMP and ICMPv6 headers every message has

	IPv4ChecksumOffset = 10 // IPv4 header checksum
	TCPChecksumOffset  = 16 // TCP checksum
	UDPChecksumOffset  = 6  // UDP and UDP-Lite checksum
	ICMPChecksumOffset = 2  // ICMP and ICMPv6 checksum
)

// L4ChecksumOffset returns the offset of the checksum field inside the
// transport header of protocol proto (TCP, UDP, UDP-Lite, ICMP, ICMPv6), and
// false for a protocol without a checksum this package knows.
func L4ChecksumOffset(proto uint8) (int, bool) {
	switch proto {
	case ProtoTCP:
		return TCPChecksumOffset, true
	case ProtoUDP, ProtoUDPLite:
		return UDPChecksumOffset, true
	case ProtoICMP, ProtoICMPv6:
		return ICMPChecksumOffset, true
	}
	return 0, false
}

// Ethernet is a view of an Ethernet II header (EthernetLen bytes).
type Ethernet []byte

// Dst returns the destination MAC address.
func (b Ethernet) Dst() [6]byte { return [6]byte(b[0:6]) }

// SetDst sets the destination MAC address.
func (b Ethernet) SetDst(a [6]byte) { copy(b[0:6], a[:]) }

// Src returns the source MAC address.
func (b Ethernet) Src() [6]byte { return [6]byte(b[6:12]) }

// SetSrc sets the source MAC address.
func (b Ethernet) SetSrc(a [6]byte) { copy(b[6:12], a[:]) }

// Type returns the EtherType (or the TPID of a VLAN tag that follows).
func (b Ethernet) Type() uint16 { return binary.BigEndian.Uint16(b[12:]) }

// SetType sets the EtherType.
func (b Ethernet) SetType(t uint16) { binary.BigEndian.PutUint16(b[12:], t) }

// VLAN is a view of the 4 bytes that follow an 802.1Q or 802.1ad TPID: the
// tag control information and the EtherType of what follows the tag.
type VLAN []byte

// TCI returns the tag control information: priority (3 bits), drop
// eligible (1 bit), VLAN ID (12 bits).
func (b VLAN) TCI() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// ID returns the 12-bit VLAN ID.
func (b VLAN) ID() uint16 { return b.TCI() & 0x0fff }

// Type returns the EtherType that follows the tag.
func (b VLAN) Type() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// IPv4 is a view of an IPv4 header (RFC 791), options included.
type IPv4 []byte

// IPv4 flag bits as FlagsFragment returns them.
const (
	IPv4DontFragment  = 0x4000 // DF
	IPv4MoreFragments = 0x2000 // MF
	ipv4OffsetMask    = 0x1fff
)

// Version returns the IP version field (4 for a well-formed header).
func (b IPv4) Version() uint8 { return b[0] >> 4 }

// HeaderLength returns the header length in bytes (IHL × 4).
func (b IPv4) HeaderLength() int { return int(b[0]&0x0f) * 4 }

// TOS returns the type-of-service (DSCP and ECN) byte.
func (b IPv4) TOS() uint8 { return b[1] }

// TotalLength returns the total length of the datagram (header and payload).
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// SetTotalLength sets the total length. It does not update the checksum.
func (b IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(b[2:], n) }

// ID returns the identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[4:]) }

// SetID sets the identification field. It does not update the checksum.
func (b IPv4) SetID(id uint16) { binary.BigEndian.PutUint16(b[4:], id) }

// FlagsFragment returns the flags and fragment offset word as it is on the
// wire: IPv4DontFragment, IPv4MoreFragments, offset in 8-byte units.
func (b IPv4) FlagsFragment() uint16 { return binary.BigEndian.Uint16(b[6:]) }

// MoreFragments reports whether the MF flag is set.
func (b IPv4) MoreFragments() bool { return b.FlagsFragment()&IPv4MoreFragments != 0 }

// FragmentOffset returns the fragment offset in bytes.
func (b IPv4) FragmentOffset() int { return int(b.FlagsFragment()&ipv4OffsetMask) * 8 }

// IsFragment reports whether the datagram is a fragment (MF set or a
// nonzero offset), whose transport checksum covers more than this packet.
func (b IPv4) IsFragment() bool { return b.FlagsFragment()&(IPv4MoreFragments|ipv4OffsetMask) != 0 }

// TTL returns the time to live.
func (b IPv4) TTL() uint8 { return b[8] }

// Protocol returns the protocol number of the payload.
func (b IPv4) Protocol() uint8 { return b[9] }

// Checksum returns the header checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[IPv4ChecksumOffset:]) }

// SetChecksum sets the header checksum field.
func (b IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[IPv4ChecksumOffset:], c) }

// Src returns the source address.
func (b IPv4) Src() [4]byte { return [4]byte(b[12:16]) }

// Dst returns the destination address.
func (b IPv4) Dst() [4]byte { return [4]byte(b[16:20]) }

// CalculateChecksum returns the value the checksum field must hold: the
// complement of the sum of the header (HeaderLength bytes) with the
// checksum field taken as zero. It does not write it; SetChecksum does.
func (b IPv4) CalculateChecksum() uint16 {
	h := b[:b.HeaderLength()]
	s := Checksum(h[:IPv4ChecksumOffset], 0)
	return ^Checksum(h[IPv4ChecksumOffset+2:], s)
}

// ChecksumValid reports whether the header (HeaderLength bytes) sums to
// 0xffff, checksum field included.
func (b IPv4) ChecksumValid() bool { return Checksum(b[:b.HeaderLength()], 0) == 0xffff }

// PseudoHeaderSum returns the pseudo-header sum for a transport segment of
// length bytes carried by this header (see PseudoHeaderIPv4).
func (b IPv4) PseudoHeaderSum(proto uint8, length uint16) uint16 {
	return PseudoHeaderIPv4(b.Src(), b.Dst(), proto, length)
}

// IPv6 is a view of the IPv6 fixed header (RFC 8200), IPv6Len bytes.
type IPv6 []byte

// Version returns the IP version field (6 for a well-formed header).
func (b IPv6) Version() uint8 { return b[0] >> 4 }

// TrafficClass returns the traffic class (DSCP and ECN).
func (b IPv6) TrafficClass() uint8 { return uint8(binary.BigEndian.Uint16(b[0:]) >> 4) }

// FlowLabel returns the 20-bit flow label.
func (b IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(b[0:]) & 0xfffff }

// PayloadLength returns the payload length: everything after the fixed
// header, extension headers included.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[4:]) }

// SetPayloadLength sets the payload length.
func (b IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(b[4:], n) }

// NextHeader returns the type of the header that follows the fixed header.
func (b IPv6) NextHeader() uint8 { return b[6] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[7] }

// Src returns the source address.
func (b IPv6) Src() [16]byte { return [16]byte(b[8:24]) }

// Dst returns the destination address as written in the fixed header (with
// a routing header, the pseudo-header uses the final destination instead;
// Parse finds it: Layout.FinalDst).
func (b IPv6) Dst() [16]byte { return [16]byte(b[24:40]) }

// TCP is a view of a TCP header (RFC 9293), options included.
type TCP []byte

// TCP flag bits as Flags returns them.
const (
	TCPFlagFIN = 0x01
	TCPFlagSYN = 0x02
	TCPFlagRST = 0x04
	TCPFlagPSH = 0x08
	TCPFlagACK = 0x10
	TCPFlagURG = 0x20
	TCPFlagECE = 0x40
	TCPFlagCWR = 0x80
)

// SrcPort returns the source port.
func (b TCP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// DstPort returns the destination port.
func (b TCP) DstPort() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// Seq returns the sequence number.
func (b TCP) Seq() uint32 { return binary.BigEndian.Uint32(b[4:]) }

// SetSeq sets the sequence number. It does not update the checksum.
func (b TCP) SetSeq(s uint32) { binary.BigEndian.PutUint32(b[4:], s) }

// Ack returns the acknowledgment number.
func (b TCP) Ack() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// DataOffset returns the header length in bytes (data offset × 4).
func (b TCP) DataOffset() int { return int(b[12]>>4) * 4 }

// Flags returns the eight flag bits (TCPFlagFIN … TCPFlagCWR).
func (b TCP) Flags() uint8 { return b[13] }

// SetFlags sets the eight flag bits. It does not update the checksum.
func (b TCP) SetFlags(f uint8) { b[13] = f }

// Window returns the window field.
func (b TCP) Window() uint16 { return binary.BigEndian.Uint16(b[14:]) }

// Checksum returns the checksum field.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[TCPChecksumOffset:]) }

// SetChecksum sets the checksum field.
func (b TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[TCPChecksumOffset:], c) }

// UrgentPointer returns the urgent pointer.
func (b TCP) UrgentPointer() uint16 { return binary.BigEndian.Uint16(b[18:]) }

// Options returns the option bytes (DataOffset-20 bytes).
func (b TCP) Options() []byte { return b[TCPMinLen:b.DataOffset()] }

// UDP is a view of a UDP or UDP-Lite header (UDPLen bytes).
type UDP []byte

// SrcPort returns the source port.
func (b UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// SetSrcPort sets the source port. It does not update the checksum.
func (b UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(b[0:], p) }

// DstPort returns the destination port.
func (b UDP) DstPort() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// SetDstPort sets the destination port. It does not update the checksum.
func (b UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(b[2:], p) }

// Length returns the length field: header and payload for UDP; for
// UDP-Lite the checksum coverage (0 means the whole datagram).
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[4:]) }

// SetLength sets the length field.
func (b UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(b[4:], n) }

// Checksum returns the checksum field (0 over IPv4 UDP: no checksum).
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[UDPChecksumOffset:]) }

// SetChecksum sets the checksum field.
func (b UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[UDPChecksumOffset:], c) }

// ICMP is a view of the common part of an ICMP or ICMPv6 header: type,
// code and checksum (ICMPLen bytes).
type ICMP []byte

// Type returns the message type.
func (b ICMP) Type() uint8 { return b[0] }

// Code returns the message code.
func (b ICMP) Code() uint8 { return b[1] }

// Checksum returns the checksum field.
func (b ICMP) Checksum() uint16 { return binary.BigEndian.Uint16(b[ICMPChecksumOffset:]) }

// SetChecksum sets the checksum field.
func (b ICMP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[ICMPChecksumOffset:], c) }
