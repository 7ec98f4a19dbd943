package offload

import "encoding/binary"

// Bounds of the header walk.
const (
	// MaxVLANTags is the longest stack of 802.1Q/802.1ad tags Parse
	// walks; a frame with more is malformed.
	MaxVLANTags = 4
	// MaxExtHeaders is the longest IPv6 extension header chain Parse
	// walks (the kernel's ipv6_skip_exthdr is bounded only by the packet);
	// a longer chain is malformed.
	MaxExtHeaders = 16
)

// etherTypeQinQOld is the pre-standard 802.1ad TPID some switches still use.
const etherTypeQinQOld = 0x9100

// Layout is where the headers of an Ethernet frame are, as Parse finds
// them: the one frame parser of this module (VerifyRX, FillChecksum,
// Segment, GRO, package rss's dispatch and package xdpnet all use it).
// Offsets count from the first byte of the frame. It is a plain value;
// the views it points at ([IPv4], [IPv6], [TCP], [UDP]) are slices of the
// frame, valid as long as the frame is.
type Layout struct {
	// L3 is the offset of the IP header (after the Ethernet header and
	// VLAN tags). It is set also when the frame is not IP.
	L3 int
	// L4 is the offset of the transport header: after the IPv4 options,
	// or after the IPv6 extension headers (for a later IPv6 fragment,
	// after the fragment header: what follows it is data).
	L4 int
	// Payload is the offset of the transport payload of a TCP or UDP
	// packet whose header lies within the frame (L4 plus the TCP data
	// offset, or L4+8); 0 for other protocols and broken headers.
	Payload int
	// End is the end of the IP packet by its length field; bytes from End
	// to the end of the frame are link padding.
	End int
	// FinalDst is the offset of the IPv6 destination address the
	// transport pseudo-header uses: the fixed header's, or the final
	// destination a routing header names (RFC 8200 section 8.1). 0 for
	// IPv4.
	FinalDst int
	// EtherType after the VLAN tags; 0 if the Ethernet header is
	// truncated.
	EtherType uint16
	// Proto is the transport protocol: IPv4 Protocol, or the IPv6 next
	// header after the extension headers.
	Proto uint8
	// VLANTags is the number of 802.1Q/802.1ad tags in front of L3.
	VLANTags uint8
	// ExtHeaders is the number of IPv6 extension headers in front of L4.
	ExtHeaders uint8
	// IPv6 says the network layer is IPv6 (else IPv4, when EtherType
	// says IP at all).
	IPv6 bool
	// Fragment says the packet is an IPv4 fragment (MF or an offset) or
	// carries an IPv6 fragment header, an atomic one (RFC 6946) included.
	Fragment bool
	// AH says an IPv6 authentication header precedes L4.
	AH bool
	// Skip is ReasonFragment, ReasonEncrypted (ESP) or
	// ReasonRoutingUnknown when the transport checksum cannot be verified
	// from this frame alone, else ReasonNone.
	Skip Reason
	// later: a fragment with a nonzero offset; L4 holds data, no header.
	later bool
}

// Parse walks the Ethernet II header, up to MaxVLANTags 802.1Q/802.1ad
// tags, the IPv4 header (options skipped) or the IPv6 header and its
// extension headers (hop-by-hop, routing, destination options, fragment,
// AH; at most MaxExtHeaders), and returns where the headers are.
//
// The Reason is ReasonNone for an IP frame whose link and IP headers are
// well-formed, ReasonNotIP (EtherType set) for a frame of another
// EtherType, or a malformed reason (Reason.Malformed) for a truncated or
// inconsistent one; the Layout then holds what was found before the
// fault. Parse does not check the transport header beyond locating it
// (Payload is 0 when a TCP or UDP header does not fit); VerifyRX checks
// it. It never writes to frame, never panics and does not allocate.
func Parse(frame []byte) (Layout, Reason) {
	var lo Layout
	r := lo.parse(frame, 0)
	return lo, r
}

// Parse is the package's Parse writing into lo, which it resets first: the
// form for a hot path, where the Layout is not copied on return.
func (lo *Layout) Parse(frame []byte) Reason {
	return lo.parse(frame, 0)
}

// ParseIP is Parse without the look at the transport header: Payload
// stays 0, L4 and Proto are set. It is for callers that read a few bytes
// at L4 themselves (RSS hashing reads the ports) and check that they lie
// before End.
func (lo *Layout) ParseIP(frame []byte) Reason {
	return lo.parseIP(frame, 0)
}

// parse is Parse for headers followed by extra more bytes of the packet
// held elsewhere (SegmentPayload's template): the IP length fields may
// reach extra bytes beyond frame; all headers must lie within frame.
func (lo *Layout) parse(frame []byte, extra int) Reason {
	r := lo.parseIP(frame, extra)
	if r == ReasonNone && (lo.Proto == ProtoTCP || lo.Proto == ProtoUDP) && !lo.later {
		if n, r := lo.transportLen(frame); r == ReasonNone {
			lo.Payload = lo.L4 + n
		}
	}
	return r
}

// parseIP is parse up to the transport header.
func (lo *Layout) parseIP(frame []byte, extra int) Reason {
	*lo = Layout{}
	if len(frame) < EthernetLen {
		return ReasonShortEthernet
	}
	off := EthernetLen
	et := binary.BigEndian.Uint16(frame[12:])
	for et == EtherTypeVLAN || et == EtherTypeQinQ || et == etherTypeQinQOld {
		if lo.VLANTags == MaxVLANTags {
			return ReasonVLANTags
		}
		if len(frame) < off+VLANLen {
			return ReasonShortEthernet
		}
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += VLANLen
		lo.VLANTags++
	}
	lo.EtherType = et
	lo.L3 = off
	var r Reason
	switch et {
	case EtherTypeIPv4:
		r = parseIPv4(frame, lo, extra)
	case EtherTypeIPv6:
		r = parseIPv6(frame, lo, extra)
	default:
		return ReasonNotIP
	}
	return r
}

func parseIPv4(frame []byte, lo *Layout, extra int) Reason {
	p := frame[lo.L3:]
	if len(p) < IPv4MinLen {
		return ReasonShortIPHeader
	}
	p = p[:len(p):len(p)]
	_ = p[IPv4MinLen-1] // one bounds check for the fixed header
	if p[0]>>4 != 4 {
		return ReasonIPVersion
	}
	hl := int(p[0]&0x0f) * 4
	if hl < IPv4MinLen {
		return ReasonIHL
	}
	if hl > len(p) {
		return ReasonShortIPHeader
	}
	tl := int(p[2])<<8 | int(p[3])
	if tl < hl || tl > len(p)+extra {
		return ReasonIPLength
	}
	lo.L4 = lo.L3 + hl
	lo.End = lo.L3 + tl
	lo.Proto = p[9]
	if ff := uint16(p[6])<<8 | uint16(p[7]); ff&(IPv4MoreFragments|ipv4OffsetMask) != 0 {
		lo.Fragment = true
		lo.later = ff&ipv4OffsetMask != 0
		lo.Skip = ReasonFragment
	} else if lo.Proto == ProtoESP {
		lo.Skip = ReasonEncrypted
	}
	return ReasonNone
}

func parseIPv6(frame []byte, lo *Layout, extra int) Reason {
	p := frame[lo.L3:]
	if len(p) < IPv6Len {
		return ReasonShortIPHeader
	}
	ip := IPv6(p)
	if ip.Version() != 6 {
		return ReasonIPVersion
	}
	end := IPv6Len + int(ip.PayloadLength())
	if end > len(p)+extra {
		return ReasonIPLength
	}
	lo.IPv6 = true
	lo.End = lo.L3 + end
	lo.FinalDst = lo.L3 + 24
	p = p[:min(end, len(p))] // extension headers lie within frame
	off := IPv6Len
	nh := ip.NextHeader()
	for n := 0; ; n++ {
		var hlen int
		switch nh {
		case ProtoHopByHop, ProtoRouting, ProtoDstOpts, ProtoFragment, ProtoAH:
		default:
			lo.L4 = lo.L3 + off
			lo.Proto = nh
			if nh == ProtoESP && lo.Skip == ReasonNone {
				lo.Skip = ReasonEncrypted
			}
			return ReasonNone
		}
		if n == MaxExtHeaders {
			lo.Proto = nh // where the walk gave up
			return ReasonExtHeaderChain
		}
		if nh == ProtoHopByHop && n != 0 {
			return ReasonHopByHop
		}
		if len(p) < off+8 {
			return ReasonExtHeader
		}
		h := p[off:]
		switch nh {
		case ProtoFragment:
			hlen = 8
			lo.Fragment = true
			// Offset and M flag; an atomic fragment (both zero, RFC 6946)
			// is a whole datagram and is verified like one.
			fo := binary.BigEndian.Uint16(h[2:])
			if fo&0xfff9 != 0 {
				lo.Skip = ReasonFragment
			}
			if fo&0xfff8 != 0 {
				// A later fragment: what follows is data, not headers.
				lo.later = true
				lo.ExtHeaders++
				lo.L4 = lo.L3 + off + hlen
				lo.Proto = h[0]
				return ReasonNone
			}
		case ProtoAH:
			hlen = (int(h[1]) + 2) * 4
			lo.AH = true
		default:
			hlen = (int(h[1]) + 1) * 8
		}
		if len(p) < off+hlen {
			return ReasonExtHeader
		}
		if nh == ProtoRouting {
			if r := lo.routingDst(h[:hlen], lo.L3+off); r != ReasonNone {
				if r.Malformed() {
					return r
				}
				if lo.Skip == ReasonNone {
					lo.Skip = r
				}
			}
		}
		lo.ExtHeaders++
		nh = h[0]
		off += hlen
	}
}

// routingDst points lo.FinalDst at the final destination named by a
// routing header h (at frame offset at) whose segments-left field is
// nonzero: the pseudo-header uses it (RFC 8200 section 8.1).
func (lo *Layout) routingDst(h []byte, at int) Reason {
	typ, left := h[2], int(h[3])
	if left == 0 {
		return ReasonNone // at the final destination: the fixed header holds it
	}
	n := (len(h) - 8) / 16 // addresses after the 8-byte routing header start
	switch typ {
	case 0, 2:
		// RH0 (RFC 2460, deprecated) and type 2 (RFC 6275): the final
		// destination is the last address of the list.
		if n == 0 || left > n {
			return ReasonRoutingHeader
		}
		lo.FinalDst = at + 8 + 16*(n-1)
	case 4:
		// Segment routing header (RFC 8754): Segment List[0] is the last
		// segment of the path; Last Entry is h[4].
		if n == 0 || int(h[4]) >= n || left > int(h[4])+1 {
			return ReasonRoutingHeader
		}
		lo.FinalDst = at + 8
	default:
		return ReasonRoutingUnknown
	}
	return ReasonNone
}

// transportLen checks the TCP or UDP header at L4 against the bytes that
// lie within both the IP packet and the frame and returns its length
// (the TCP data offset, or 8), or ReasonShortL4Header or ReasonL4Length.
func (lo *Layout) transportLen(frame []byte) (int, Reason) {
	hend := min(lo.End, len(frame))
	switch lo.Proto {
	case ProtoTCP:
		if hend-lo.L4 < TCPMinLen {
			return 0, ReasonShortL4Header
		}
		d := TCP(frame[lo.L4:]).DataOffset()
		if d < TCPMinLen || lo.L4+d > hend {
			return 0, ReasonL4Length
		}
		return d, ReasonNone
	case ProtoUDP:
		if hend-lo.L4 < UDPLen {
			return 0, ReasonShortL4Header
		}
		return UDPLen, ReasonNone
	}
	return 0, ReasonNone
}

// HasIPv4Options reports whether the IPv4 header is longer than 20 bytes.
func (lo *Layout) HasIPv4Options() bool { return !lo.IPv6 && lo.L4-lo.L3 > IPv4MinLen }

// Src returns the source address of a parsed IP frame, as 4 or 16 bytes
// of frame.
func (lo *Layout) Src(frame []byte) []byte {
	if lo.IPv6 {
		return frame[lo.L3+8 : lo.L3+24]
	}
	return frame[lo.L3+12 : lo.L3+16]
}

// Dst returns the destination address of the IP header of a parsed IP
// frame, as 4 or 16 bytes of frame (for IPv6 the fixed header's, not the
// final destination of a routing header: see FinalDst).
func (lo *Layout) Dst(frame []byte) []byte {
	if lo.IPv6 {
		return frame[lo.L3+24 : lo.L3+40]
	}
	return frame[lo.L3+16 : lo.L3+20]
}

// PseudoHeaderSum returns the pseudo-header sum of a parsed frame's
// transport segment of length bytes (0 for ICMP over IPv4, which has
// none), with the final destination of an IPv6 routing header.
func (lo *Layout) PseudoHeaderSum(frame []byte, length int) uint16 {
	if lo.Proto == ProtoICMP && !lo.IPv6 {
		return 0
	}
	if lo.IPv6 {
		return PseudoHeaderIPv6([16]byte(frame[lo.L3+8:lo.L3+24]), [16]byte(frame[lo.FinalDst:lo.FinalDst+16]), lo.Proto, uint32(length))
	}
	ip := IPv4(frame[lo.L3:])
	return PseudoHeaderIPv4(ip.Src(), ip.Dst(), lo.Proto, uint16(length))
}
