package offload

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNoL4Checksum means the frame has no transport checksum that can be
// offloaded: not IP, a protocol without a known checksum, a fragment, or
// an encrypted payload.
var ErrNoL4Checksum = errors.New("no transport checksum to fill")

// Filled says which checksums FillChecksum wrote.
type Filled uint8

// Filled bits.
const (
	FilledIPv4 Filled = 1 << iota // the IPv4 header checksum
	FilledL4                      // the TCP, UDP, UDP-Lite, ICMP or ICMPv6 checksum
)

// String returns "none", "ipv4", "l4" or "ipv4+l4".
func (f Filled) String() string {
	switch f {
	case 0:
		return "none"
	case FilledIPv4:
		return "ipv4"
	case FilledL4:
		return "l4"
	case FilledIPv4 | FilledL4:
		return "ipv4+l4"
	}
	return fmt.Sprintf("Filled(%#x)", uint8(f))
}

// FillChecksum computes and writes the checksums of an Ethernet frame in
// place, as a NIC with NETIF_F_HW_CSUM would on transmit: the IPv4 header
// checksum, and the TCP, UDP, UDP-Lite, ICMP or ICMPv6 checksum with its
// pseudo-header (the final destination of an IPv6 routing header). The
// old values of the checksum fields are ignored. It returns which
// checksums it wrote.
//
// A UDP checksum that computes to 0 is written as 0xffff (RFC 768); a UDP
// datagram over IPv4 always gets a checksum, also if its field was 0.
// Where the transport checksum cannot be computed from this frame alone
// (fragments, ESP) or the protocol has none, only the IPv4 header checksum
// is written; a non-IP frame is left alone (Filled 0, nil error).
//
// The IP length fields must be right: the transport checksum covers the
// transport segment as the IP header sizes it (bytes after it are link
// padding), UDP covers its length field's bytes, UDP-Lite its coverage. A
// frame that cannot be parsed returns an error wrapping ErrMalformed and
// is not modified. FillChecksum writes only to the checksum fields and
// does not allocate unless it returns an error.
func FillChecksum(frame []byte) (Filled, error) {
	var layout Layout
	lo := &layout
	r := lo.Parse(frame)
	if r == ReasonNotIP {
		return 0, nil
	}
	if r != ReasonNone {
		return 0, fmt.Errorf("fill checksum: %w: %s", ErrMalformed, r)
	}
	var covEnd, field int
	l4 := false
	if lo.Skip == ReasonNone {
		var known bool
		covEnd, field, known, r = layoutL4Span(frame, lo)
		if r != ReasonNone {
			return 0, fmt.Errorf("fill checksum: %w: %s", ErrMalformed, r)
		}
		l4 = known
	}
	var done Filled
	if !lo.IPv6 {
		ip := IPv4(frame[lo.L3:])
		ip.SetChecksum(ip.CalculateChecksum())
		done |= FilledIPv4
	}
	if l4 {
		binary.BigEndian.PutUint16(frame[field:], 0)
		v := ^Combine(Checksum(frame[lo.L4:covEnd], 0), layoutPseudoSum(frame, lo))
		if v == 0 && (lo.Proto == ProtoUDP || lo.Proto == ProtoUDPLite) {
			v = 0xffff
		}
		binary.BigEndian.PutUint16(frame[field:], v)
		done |= FilledL4
	}
	return done, nil
}

// FillPartial completes a checksum the way a NIC does for a Linux
// CHECKSUM_PARTIAL packet, or for an AF_XDP frame sent with
// XDP_TXMD_FLAGS_CHECKSUM in its xsk_tx_metadata: it sums frame[start:]
// to the end of the frame, folds and complements the sum, and stores it
// big-endian at frame[start+offset:]. A result of 0 is stored as 0xffff,
// as the kernel's skb_checksum_help does (for UDP, 0 would mean "no
// checksum"; for TCP and ICMP both are valid).
//
// start is csum_start (where summing begins: the transport header, counted
// from the first byte of frame, which for AF_XDP is xdp_desc.addr) and
// offset is csum_offset (from start to the checksum field: 16 for TCP, 6
// for UDP). As with the kernel, the checksum field must already hold the
// pseudo-header sum — folded to 16 bits, NOT complemented, big-endian —
// because it is summed along with the data and then overwritten; the
// kernel's TCP and UDP code writes ~csum_tcpudp_magic(saddr, daddr, len,
// proto, 0) there. PreparePartial writes it. The frame must end where the
// checksummed data ends: no link padding.
//
// start and offset out of range (start+offset+2 > len(frame)) return an
// error wrapping ErrChecksumRange and leave frame alone.
func FillPartial(frame []byte, start, offset int) error {
	if start < 0 || offset < 0 || start > len(frame) || offset > len(frame)-start-2 {
		return fmt.Errorf("fill partial checksum: %w: csum_start %d, csum_offset %d, frame %d bytes", ErrChecksumRange, start, offset, len(frame))
	}
	v := ^Checksum(frame[start:], 0)
	if v == 0 {
		v = 0xffff
	}
	binary.BigEndian.PutUint16(frame[start+offset:], v)
	return nil
}

// PreparePartial gets an Ethernet frame ready for transmit checksum
// offload, as the kernel's TCP, UDP and IP layers do before handing a
// CHECKSUM_PARTIAL packet to a device: it writes the IPv4 header checksum
// (the device does not compute it) and seeds the transport checksum field
// with the pseudo-header sum (0 for ICMP over IPv4, which has no
// pseudo-header). It returns csum_start and csum_offset for FillPartial or
// for the xsk_tx_metadata request of an AF_XDP frame.
//
// The frame must end where the transport checksum coverage ends: link
// padding after the IP packet, a UDP length shorter than the IP payload or
// a partial UDP-Lite coverage return ErrMalformed, because the device
// would sum those bytes too. Frames without an offloadable transport
// checksum return ErrNoL4Checksum. On error the frame is not modified.
func PreparePartial(frame []byte) (start, offset int, err error) {
	var layout Layout
	lo := &layout
	r := lo.Parse(frame)
	if r == ReasonNotIP {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: ethertype %#04x", ErrNoL4Checksum, lo.EtherType)
	}
	if r != ReasonNone {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: %s", ErrMalformed, r)
	}
	if lo.Skip != ReasonNone {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: %s", ErrNoL4Checksum, lo.Skip)
	}
	covEnd, field, known, r := layoutL4Span(frame, lo)
	if r != ReasonNone {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: %s", ErrMalformed, r)
	}
	if !known {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: %s", ErrNoL4Checksum, protoName(lo.Proto))
	}
	if covEnd != len(frame) {
		return 0, 0, fmt.Errorf("prepare partial checksum: %w: checksum coverage ends at byte %d of a %d-byte frame (link padding, short UDP length or partial UDP-Lite coverage)", ErrMalformed, covEnd, len(frame))
	}
	if !lo.IPv6 {
		ip := IPv4(frame[lo.L3:])
		ip.SetChecksum(ip.CalculateChecksum())
	}
	binary.BigEndian.PutUint16(frame[field:], layoutPseudoSum(frame, lo))
	return lo.L4, field - lo.L4, nil
}
