package offload

import "encoding/binary"

// segMaxHeader bounds the header template SegmentPayload accepts.
const segMaxHeader = 512

// SegmentPayload is SegmentFunc for a super-packet held as a header
// template and a separate payload, the way net/core/tso.c builds segments:
// hdr is the Ethernet (with optional VLAN tags), IP (with options or
// extension headers) and TCP header of the stream, payload the bytes to
// send. The IPv4 total length, IPv6 payload length and all checksums in
// hdr are ignored and computed for each segment, so an application can
// keep one template per connection and segment data straight from its own
// buffers into UMEM frames, without first building a contiguous
// super-packet. hdr must end where the TCP header ends and be at most 512
// bytes; headers plus payload must fit the IP length field (ErrMalformed
// otherwise). It never allocates.
func SegmentPayload(hdr, payload []byte, opts SegmentOptions, next func(size int) []byte) (int, error) {
	return segmentPayload(hdr, payload, opts, ipProtoTCP, "segment payload", next)
}

// SegmentUDPPayload is SegmentPayload for UDP: hdr ends with the UDP
// header (its length and checksum are ignored), payload is the data that
// SegmentUDP would split into datagrams of opts.MSS bytes.
func SegmentUDPPayload(hdr, payload []byte, opts SegmentOptions, next func(size int) []byte) (int, error) {
	return segmentPayload(hdr, payload, opts, ipProtoUDP, "segment UDP payload", next)
}

func segmentPayload(hdr, payload []byte, opts SegmentOptions, proto uint8, op string, next func(size int) []byte) (int, error) {
	if len(hdr) > segMaxHeader {
		return 0, lerr(ErrMalformed, "header template of %d bytes: at most %d", len(hdr), segMaxHeader).err(op)
	}
	if opts.MSS <= 0 || opts.MSS > 65535 {
		return 0, lerr(ErrInvalidMSS, "MSS %d: must be between 1 and 65535", opts.MSS).err(op)
	}
	// Work on a copy whose IP length field covers the payload, so that
	// the ordinary parser and segmenter apply.
	var buf [segMaxHeader]byte
	h := buf[:len(hdr)]
	copy(h, hdr)
	// Parse finds the IP header even though its length field is not
	// yet right (it then fails on the IP header, which is fine here).
	if l, _ := Parse(h); l.EtherType != 0 {
		l3, et := l.L3, l.EtherType
		switch {
		case et == EtherTypeIPv4 && len(h) >= l3+4:
			tot := len(h) - l3 + len(payload)
			if tot > 65535 {
				return 0, lerr(ErrMalformed, "IPv4 packet of %d bytes: payload beyond the 16-bit total length", tot).err(op)
			}
			binary.BigEndian.PutUint16(h[l3+2:], uint16(tot))
		case et == EtherTypeIPv6 && len(h) >= l3+40:
			plen := len(h) - l3 - 40 + len(payload)
			if plen > 65535 {
				return 0, lerr(ErrMalformed, "IPv6 payload of %d bytes: beyond the 16-bit payload length", plen).err(op)
			}
			binary.BigEndian.PutUint16(h[l3+4:], uint16(plen))
		}
	}
	var lo Layout
	e := parseLayoutExt(&lo, h, proto, len(payload), true)
	if e.kind != nil {
		return 0, e.err(op)
	}
	if lo.Payload != len(h) {
		return 0, lerr(ErrMalformed, "header template has %d bytes after the transport header", len(h)-lo.Payload).err(op)
	}
	p := segPlan{lo: lo, plen: len(payload), mss: opts.MSS}
	p.n = max(1, (p.plen+p.mss-1)/p.mss)
	return segmentPlanned(h, payload, p, opts, proto, op, func(_, size int) []byte { return next(size) })
}
