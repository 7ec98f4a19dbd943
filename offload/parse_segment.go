package offload

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors returned by Segment, SegmentUDP and their variants, besides
// ErrMalformed (a frame that cannot be parsed, as for VerifyRx). Test with
// errors.Is; the returned error names the operation and the offending value.
var (
	// ErrWrongProtocol means the frame parses but carries another transport
	// protocol (or another EtherType) than the operation needs, or an IP
	// fragment rather than a whole transport segment.
	ErrWrongProtocol = errors.New("wrong protocol")
	// ErrInvalidMSS means the segment size is zero, negative or too large.
	ErrInvalidMSS = errors.New("invalid segment size")
	// ErrDestTooSmall means the caller-provided destination buffers are too
	// few or too short for the segments.
	ErrDestTooSmall = errors.New("destination buffers too small")
)

// EtherTypes and protocol numbers used by the segmentation code.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88a8
	etherTypeQinQ2 = 0x9100

	ipProtoTCP = 6
	ipProtoUDP = 17

	ip6HopByHop = 0
	ip6Routing  = 43
	ip6Fragment = 44
	ip6DestOpts = 60

	// segMaxVLANTags bounds the VLAN tag stack the parser walks.
	segMaxVLANTags = 4
	// segMaxExtHeaders bounds the IPv6 extension header chain the parser
	// walks (a chain longer than this is rejected as malformed).
	segMaxExtHeaders = 8
)

// segLayout describes where the headers of a parsed frame are. All offsets
// are from the start of the frame.
type segLayout struct {
	l3    int  // IP header
	l4    int  // transport header
	pay   int  // transport payload (l4 + TCP header length, or l4 + 8)
	end   int  // end of the IP packet (bytes after it are link padding)
	v6    bool // IPv6 (else IPv4)
	proto uint8
	frag  bool // IPv4 fragment or IPv6 fragment header present
	ipOpt bool // IPv4 options present (IHL > 5)
}

// parseSegLayout parses the Ethernet, VLAN and IP headers of frame and the
// transport header of protocol want (TCP or UDP). op names the operation for
// error messages.
func parseSegLayout(frame []byte, want uint8, op string) (segLayout, error) {
	lo, e := parseLayout(frame, want)
	if e.kind != nil {
		return lo, e.err(op)
	}
	return lo, nil
}

// layoutErr describes a parse failure without allocating; err formats it.
type layoutErr struct {
	kind error
	msg  string
	args [2]int
	n    int
}

func lerr(kind error, msg string, args ...int) layoutErr {
	e := layoutErr{kind: kind, msg: msg, n: len(args)}
	copy(e.args[:], args)
	return e
}

func (e layoutErr) err(op string) error {
	a := make([]any, 0, 4)
	a = append(a, op, e.kind)
	for _, v := range e.args[:e.n] {
		a = append(a, v)
	}
	return fmt.Errorf("%s: %w: "+e.msg, a...)
}

// parseLayout is parseSegLayout without the allocation of an error value,
// for GRO, which meets non-TCP frames all the time.
func parseLayout(frame []byte, want uint8) (segLayout, layoutErr) {
	return parseLayoutExt(frame, want, 0, false)
}

// parseLayoutExt parses headers that are followed by extra more bytes of
// the packet held elsewhere (SegmentPayload): the IP length fields may
// reach extra bytes beyond frame, all headers must lie within frame, and
// with template the UDP length is not checked, since it is recomputed.
func parseLayoutExt(frame []byte, want uint8, extra int, template bool) (segLayout, layoutErr) {
	var lo segLayout
	if len(frame) < 14 {
		return lo, lerr(ErrMalformed, "%d bytes is shorter than an Ethernet header", len(frame))
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	for tags := 0; et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQ2; tags++ {
		if tags == segMaxVLANTags {
			return lo, lerr(ErrMalformed, "more than %d VLAN tags", segMaxVLANTags)
		}
		off += 4
		if len(frame) < off+2 {
			return lo, lerr(ErrMalformed, "truncated VLAN tag")
		}
		et = binary.BigEndian.Uint16(frame[off:])
	}
	lo.l3 = off + 2
	ip := frame[lo.l3:]
	switch et {
	case etherTypeIPv4:
		if len(ip) < 20 {
			return lo, lerr(ErrMalformed, "truncated IPv4 header (%d bytes)", len(ip))
		}
		if v := ip[0] >> 4; v != 4 {
			return lo, lerr(ErrMalformed, "IP version %d in an IPv4 EtherType frame", int(v))
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl < 20 {
			return lo, lerr(ErrMalformed, "IPv4 header length %d < 20", ihl)
		}
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		if tot < ihl {
			return lo, lerr(ErrMalformed, "IPv4 total length %d < header length %d", tot, ihl)
		}
		if tot > len(ip)+extra {
			return lo, lerr(ErrMalformed, "IPv4 total length %d beyond the %d bytes after the link header", tot, len(ip))
		}
		lo.ipOpt = ihl > 20
		lo.frag = binary.BigEndian.Uint16(ip[6:])&0x3fff != 0
		lo.proto = ip[9]
		lo.l4 = lo.l3 + ihl
		lo.end = lo.l3 + tot
	case etherTypeIPv6:
		if len(ip) < 40 {
			return lo, lerr(ErrMalformed, "truncated IPv6 header (%d bytes)", len(ip))
		}
		if v := ip[0] >> 4; v != 6 {
			return lo, lerr(ErrMalformed, "IP version %d in an IPv6 EtherType frame", int(v))
		}
		lo.v6 = true
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if plen == 0 {
			return lo, lerr(ErrMalformed, "IPv6 payload length 0 (jumbograms are not supported)")
		}
		if 40+plen > len(ip)+extra {
			return lo, lerr(ErrMalformed, "IPv6 payload length %d beyond the %d bytes after the IPv6 header", plen, len(ip)-40)
		}
		lo.end = lo.l3 + 40 + plen
		hend := min(lo.end, len(frame)) // extension headers lie within frame
		nh := ip[6]
		off := lo.l3 + 40
		for n := 0; ; n++ {
			if nh != ip6HopByHop && nh != ip6Routing && nh != ip6DestOpts && nh != ip6Fragment {
				break
			}
			if n == segMaxExtHeaders {
				return lo, lerr(ErrMalformed, "more than %d IPv6 extension headers", segMaxExtHeaders)
			}
			if nh == ip6HopByHop && n != 0 {
				return lo, lerr(ErrMalformed, "IPv6 hop-by-hop options header not first")
			}
			if off+8 > hend {
				return lo, lerr(ErrMalformed, "truncated IPv6 extension header %d", int(nh))
			}
			hl := 8
			if nh == ip6Fragment {
				lo.frag = true
			} else {
				hl = (int(frame[off+1]) + 1) * 8
			}
			if off+hl > hend {
				return lo, lerr(ErrMalformed, "IPv6 extension header %d of %d bytes runs past the packet", int(nh), hl)
			}
			nh = frame[off]
			off += hl
		}
		lo.proto = nh
		lo.l4 = off
	default:
		return lo, lerr(ErrWrongProtocol, "EtherType %#04x is not IPv4 or IPv6", int(et))
	}
	if lo.frag {
		return lo, lerr(ErrWrongProtocol, "IP fragment, not a complete transport segment")
	}
	if lo.proto != want {
		return lo, lerr(ErrWrongProtocol, "IP protocol %d, want %d", int(lo.proto), int(want))
	}
	hend := min(lo.end, len(frame))
	switch want {
	case ipProtoTCP:
		if hend-lo.l4 < 20 {
			return lo, lerr(ErrMalformed, "truncated TCP header (%d bytes)", lo.end-lo.l4)
		}
		thl := int(frame[lo.l4+12]>>4) * 4
		if thl < 20 {
			return lo, lerr(ErrMalformed, "TCP data offset %d < 20", thl)
		}
		if lo.l4+thl > hend {
			return lo, lerr(ErrMalformed, "TCP header length %d beyond the %d bytes of the segment", thl, lo.end-lo.l4)
		}
		lo.pay = lo.l4 + thl
	case ipProtoUDP:
		if hend-lo.l4 < 8 {
			return lo, lerr(ErrMalformed, "truncated UDP header (%d bytes)", lo.end-lo.l4)
		}
		if ul := int(binary.BigEndian.Uint16(frame[lo.l4+4:])); !template && ul != lo.end-lo.l4 {
			return lo, lerr(ErrMalformed, "UDP length %d, IP says %d", ul, lo.end-lo.l4)
		}
		lo.pay = lo.l4 + 8
	}
	return lo, layoutErr{}
}

// pseudoSum returns the pseudo-header sum of the IP header at ip for an L4
// length of l4len and protocol proto.
func pseudoSum(ip []byte, v6 bool, proto uint8, l4len int) uint16 {
	if v6 {
		return PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(l4len))
	}
	return PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(l4len))
}
