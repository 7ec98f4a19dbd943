package offload

import (
	"errors"
	"fmt"
)

// Errors returned by Segment, SegmentUDP and their variants, besides
// ErrMalformed (a frame that cannot be parsed, as for VerifyRX). Test with
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

// Protocol numbers as the segmentation code names them.
const (
	ipProtoTCP = ProtoTCP
	ipProtoUDP = ProtoUDP
)

// parseSegLayout parses the Ethernet, VLAN and IP headers of frame and the
// transport header of protocol want (TCP or UDP). op names the operation for
// error messages.
func parseSegLayout(frame []byte, want uint8, op string) (Layout, error) {
	var lo Layout
	e := parseLayout(&lo, frame, want)
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
func parseLayout(lo *Layout, frame []byte, want uint8) layoutErr {
	return parseLayoutExt(lo, frame, want, 0, false)
}

// parseLayoutExt is Parse with the rules of segmentation on top, for
// headers followed by extra more bytes of the packet held elsewhere
// (SegmentPayload): the IP length fields may reach extra bytes beyond
// frame, all headers must lie within frame, and with template the UDP
// length is not checked, since it is recomputed. The transport header must
// be want's (TCP or UDP) and complete, and the packet no fragment.
func parseLayoutExt(lo *Layout, frame []byte, want uint8, extra int, template bool) layoutErr {
	r := lo.parse(frame, extra)
	switch {
	case r == ReasonNotIP:
		return lerr(ErrWrongProtocol, "EtherType %#04x is not IPv4 or IPv6", int(lo.EtherType))
	case r != ReasonNone:
		return lerr(ErrMalformed, r.String())
	case lo.IPv6 && IPv6(frame[lo.L3:]).PayloadLength() == 0:
		return lerr(ErrMalformed, "IPv6 payload length 0 (jumbograms are not supported)")
	case lo.Fragment:
		return lerr(ErrWrongProtocol, "IP fragment, not a complete transport segment")
	case lo.AH:
		return lerr(ErrWrongProtocol, "IPsec AH: the authentication data covers the payload")
	case lo.Proto != want:
		return lerr(ErrWrongProtocol, "IP protocol %d, want %d", int(lo.Proto), int(want))
	}
	if lo.Payload == 0 {
		_, r := lo.transportLen(frame)
		return lerr(ErrMalformed, r.String())
	}
	if want == ProtoUDP && !template {
		if ul := int(UDP(frame[lo.L4:]).Length()); ul != lo.End-lo.L4 {
			return lerr(ErrMalformed, "UDP length %d, IP says %d", ul, lo.End-lo.L4)
		}
	}
	return layoutErr{}
}

// pseudoSum returns the pseudo-header sum of the IP header at ip for an L4
// length of l4len and protocol proto.
func pseudoSum(ip []byte, v6 bool, proto uint8, l4len int) uint16 {
	if v6 {
		return PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(l4len))
	}
	return PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(l4len))
}
