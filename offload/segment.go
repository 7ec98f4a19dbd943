package offload

import (
	"encoding/binary"
	"fmt"
)

// SegmentOptions configures Segment, SegmentUDP and their variants.
type SegmentOptions struct {
	// MSS is the largest transport payload of one output frame, in bytes:
	// the TCP maximum segment size for Segment, the UDP GSO size
	// (UDP_SEGMENT) for SegmentUDP. Required, 1 to 65535.
	MSS int
	// FixedID keeps the IPv4 identification of every output frame equal to
	// the input's, as a NIC with NETIF_F_TSO_MANGLEID may do and as Linux
	// does for SKB_GSO_TCP_FIXEDID flows. By default the ID increments by
	// one per frame, as Linux GSO does. IPv6 has no ID; the field is
	// ignored there.
	FixedID bool
}

// TCP flag bits (byte 13 of the TCP header).
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
	tcpECE = 0x40
	tcpCWR = 0x80
)

// Segment splits the TCP super-packet frame (Ethernet II, optional
// 802.1Q/802.1ad tags, IPv4 or IPv6 with extension headers, TCP with
// options) into frames of at most opts.MSS payload bytes each, as Linux GSO
// (tcp_gso_segment) and a TSO NIC do, and appends them to dst.
//
// Every output frame carries a copy of the input's link, IP and TCP headers
// with: the TCP sequence number advanced by the payload before it; CWR kept
// on the first frame only; FIN and PSH kept on the last frame only; the IPv4
// ID incremented per frame (unless opts.FixedID); the IPv4 total length or
// IPv6 payload length of the frame; and a freshly computed IPv4 header
// checksum and TCP checksum. The checksum is summed while the payload is
// copied, in one pass. Link-layer padding after the IP packet is dropped.
// A super-packet whose payload fits in one MSS yields one frame, a
// checksummed copy.
//
// Segment reuses the capacity of dst: slices between len(dst) and cap(dst)
// that are large enough are overwritten instead of allocated, so passing
// the previous result as dst[:0] makes steady-state calls allocation-free.
// On error dst is returned with its original length and the error wraps
// ErrMalformed, ErrWrongProtocol or ErrInvalidMSS.
func Segment(dst [][]byte, frame []byte, opts SegmentOptions) ([][]byte, error) {
	return appendSegments(dst, frame, opts, ipProtoTCP, "segment")
}

// SegmentInto is Segment writing into caller-provided buffers, such as
// UMEM frames: segment i is written to bufs[i][:n] and bufs[i] is resliced
// to its length n. Each buffer needs the capacity for its segment (headers
// plus MSS for all but the last). It returns the number of segments
// written; on error the frames before that count are complete. It never
// allocates.
func SegmentInto(bufs [][]byte, frame []byte, opts SegmentOptions) (int, error) {
	return segmentCore(frame, opts, ipProtoTCP, "segment", func(i, size int) []byte {
		if i >= len(bufs) || cap(bufs[i]) < size {
			return nil
		}
		bufs[i] = bufs[i][:size]
		return bufs[i]
	})
}

// SegmentFunc is Segment writing into buffers obtained one at a time from
// next, for callers that take frames from a pool as they go. next receives
// the length of the next segment and returns a buffer of at least that
// length, or nil to stop (SegmentFunc then fails with ErrDestTooSmall). The
// segment occupies the first size bytes of the buffer. It returns the
// number of segments written.
func SegmentFunc(frame []byte, opts SegmentOptions, next func(size int) []byte) (int, error) {
	return segmentCore(frame, opts, ipProtoTCP, "segment", func(_, size int) []byte { return next(size) })
}

// SegmentCount returns how many frames Segment would produce from frame
// and the length of the largest of them, so that a caller can reserve
// buffers first.
func SegmentCount(frame []byte, opts SegmentOptions) (frames, maxLen int, err error) {
	p, err := planSegments(frame, opts, ipProtoTCP, "segment")
	return p.n, p.maxLen(), err
}

// appendSegments implements Segment and SegmentUDP.
func appendSegments(dst [][]byte, frame []byte, opts SegmentOptions, proto uint8, op string) ([][]byte, error) {
	n0 := len(dst)
	var capHint int
	_, err := segmentCore(frame, opts, proto, op, func(i, size int) []byte {
		if i == 0 {
			// The first segment is the largest; size new buffers for
			// it so that later calls can reuse them for any segment.
			capHint = size
		}
		if len(dst) < cap(dst) {
			dst = dst[:len(dst)+1]
			if b := dst[len(dst)-1]; cap(b) >= size {
				b = b[:size]
				dst[len(dst)-1] = b
				return b
			}
		} else {
			dst = append(dst, nil)
		}
		b := make([]byte, size, max(size, capHint))
		dst[len(dst)-1] = b
		return b
	})
	if err != nil {
		return dst[:n0], err
	}
	return dst, nil
}

// segPlan is a parsed and validated segmentation job.
type segPlan struct {
	lo   Layout
	plen int // payload bytes of the super-packet
	mss  int
	n    int // number of output segments
}

func (p segPlan) maxLen() int {
	if p.n == 0 {
		return 0
	}
	return p.lo.Payload + min(p.mss, p.plen)
}

func planSegments(frame []byte, opts SegmentOptions, proto uint8, op string) (segPlan, error) {
	var p segPlan
	if opts.MSS <= 0 || opts.MSS > 65535 {
		return p, fmt.Errorf("%s: %w: MSS %d: must be between 1 and 65535", op, ErrInvalidMSS, opts.MSS)
	}
	lo, err := parseSegLayout(frame, proto, op)
	if err != nil {
		return p, err
	}
	p.lo = lo
	p.mss = opts.MSS
	p.plen = lo.End - lo.Payload
	p.n = max(1, (p.plen+p.mss-1)/p.mss)
	return p, nil
}

// segmentCore does the work of every segmentation entry point. next(i,
// size) returns the buffer for segment i, at least size bytes, or nil.
func segmentCore(frame []byte, opts SegmentOptions, proto uint8, op string, next func(i, size int) []byte) (int, error) {
	p, err := planSegments(frame, opts, proto, op)
	if err != nil {
		return 0, err
	}
	return segmentPlanned(frame, frame[p.lo.Payload:p.lo.End], p, opts, proto, op, next)
}

// segmentPlanned writes the segments of plan p: headers from frame (up to
// p.lo.Payload), payload from payload.
func segmentPlanned(frame, payload []byte, p segPlan, opts SegmentOptions, proto uint8, op string, next func(i, size int) []byte) (int, error) {
	lo := p.lo
	hdr := frame[:lo.Payload]
	ip := frame[lo.L3:]

	// IPv4 header checksum: the sum of the header with total length, ID
	// and checksum zeroed, to which each segment adds its own two fields.
	var ipBase uint64
	var id0 uint16
	if !lo.IPv6 {
		ihl := lo.L4 - lo.L3
		ipBase = uint64(Checksum(ip[:ihl], 0))
		ipBase += uint64(^binary.BigEndian.Uint16(ip[2:]))  // remove total length
		ipBase += uint64(^binary.BigEndian.Uint16(ip[4:]))  // remove ID
		ipBase += uint64(^binary.BigEndian.Uint16(ip[10:])) // remove checksum
		id0 = binary.BigEndian.Uint16(ip[4:])
	}

	// Transport checksum: pseudo-header without length, plus the header
	// with the fields that change per segment removed.
	var l4Base uint64
	pseudo := uint64(pseudoSum(ip, lo.IPv6, proto, 0))
	th := frame[lo.L4:lo.Payload]
	var seq0 uint32
	var flags0 byte
	l4Base = pseudo + uint64(Checksum(th, 0))
	if proto == ipProtoTCP {
		seq0 = binary.BigEndian.Uint32(th[4:])
		flags0 = th[13]
		l4Base += uint64(^uint16(seq0 >> 16))
		l4Base += uint64(^uint16(seq0))
		l4Base += uint64(^uint16(flags0))
		l4Base += uint64(^binary.BigEndian.Uint16(th[16:]))
	} else {
		l4Base += uint64(^binary.BigEndian.Uint16(th[4:])) // length
		l4Base += uint64(^binary.BigEndian.Uint16(th[6:])) // checksum
	}

	for i := 0; i < p.n; i++ {
		off := i * p.mss
		segLen := min(p.mss, len(payload)-off)
		size := lo.Payload + segLen
		out := next(i, size)
		if len(out) < size {
			return i, fmt.Errorf("%s: %w: segment %d of %d needs %d bytes", op, ErrDestTooSmall, i, p.n, size)
		}
		out = out[:size]
		copy(out, hdr)
		paySum := copyAndSum(out[lo.Payload:], payload[off:off+segLen])

		oip := out[lo.L3:]
		if lo.IPv6 {
			binary.BigEndian.PutUint16(oip[4:], uint16(size-lo.L3-40))
		} else {
			tot := uint16(size - lo.L3)
			id := id0
			if !opts.FixedID {
				id += uint16(i)
			}
			binary.BigEndian.PutUint16(oip[2:], tot)
			binary.BigEndian.PutUint16(oip[4:], id)
			binary.BigEndian.PutUint16(oip[10:], ^Fold(ipBase+uint64(tot)+uint64(id)))
		}

		oth := out[lo.L4:]
		l4len := uint64(size - lo.L4)
		sum := l4Base + l4len + uint64(paySum)
		if proto == ipProtoTCP {
			seq := seq0 + uint32(off)
			flags := flags0
			if i > 0 {
				flags &^= tcpCWR
			}
			if i < p.n-1 {
				flags &^= tcpFIN | tcpPSH
			}
			binary.BigEndian.PutUint32(oth[4:], seq)
			oth[13] = flags
			sum += uint64(seq>>16) + uint64(seq&0xffff) + uint64(flags)
			binary.BigEndian.PutUint16(oth[16:], ^Fold(sum))
		} else {
			binary.BigEndian.PutUint16(oth[4:], uint16(l4len))
			sum += l4len
			c := ^Fold(sum)
			if c == 0 {
				c = 0xffff // RFC 768: a computed zero is sent as all ones
			}
			binary.BigEndian.PutUint16(oth[6:], c)
		}
	}
	return p.n, nil
}
