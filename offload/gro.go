package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrInvalidOptions is wrapped by NewGRO's error for an out-of-range
// option; the message names the field and its allowed range.
var ErrInvalidOptions = errors.New("invalid options")

// GROOptions configures a GRO table. The zero value gives Linux's defaults.
type GROOptions struct {
	// MaxSize is the largest IP packet (IPv4 total length, or IPv6 header
	// plus payload) a merge may build, in bytes. Default and maximum 65535
	// (Linux: gro_max_size 65536, exclusive).
	MaxSize int
	// MaxFlows is how many flows the table holds at once. When a packet of
	// a new flow finds it full, the oldest held flow is flushed first.
	// Default 8 (Linux: MAX_GRO_SKBS per bucket).
	MaxFlows int
	// PartialChecksum writes into the TCP checksum field of a merged packet
	// only the pseudo-header sum, as Linux's tcp_gro_complete does
	// (CHECKSUM_PARTIAL), for consumers that trust GRO to have verified the
	// segments. By default the full checksum is written, so a merged frame
	// is valid on the wire.
	PartialChecksum bool
	// Verify makes GRO the checksum check of the frames it takes, in the
	// pass that copies them (no frame is read twice): every frame it
	// hands over had its IPv4 header and TCP checksums verified, merged
	// or not, and a frame whose checksum is wrong, or that is no TCP
	// segment GRO can verify (not TCP, malformed, an IP fragment), is
	// dropped and counted in Stats instead of passed on. Feed it the TCP
	// segments, and check the other frames apart.
	Verify bool
	// AcceptPartialChecksum, with Verify, takes a segment whose TCP
	// checksum field holds the pseudo-header sum alone as if it verified
	// (merging it, and counting it in Stats) instead of dropping it: for
	// a peer on the same host over veth, whose TX checksum offload leaves
	// it so. Its data is checked by nothing.
	AcceptPartialChecksum bool
}

// GROStats are what a GRO with GROOptions.Verify dropped.
type GROStats struct {
	// BadChecksum are frames dropped for a wrong IPv4 header or TCP
	// checksum. PartialChecksum are frames whose TCP checksum field held
	// the pseudo-header sum alone (see PartialChecksum), left unfinished
	// for a TX offload by a sender on the same host: counted in
	// BadChecksum too, unless AcceptPartialChecksum handed them over.
	BadChecksum, PartialChecksum uint64
	// Unverifiable are frames dropped as no TCP segment GRO can verify.
	Unverifiable uint64
}

// GRO merges in-order TCP segments of one flow into super-packets, the
// inverse of Segment, under the rules of Linux's tcp_gro_receive and
// inet_gro_receive/ipv6_gro_receive:
//
//   - same flow: identical link header (MACs, VLAN tags), IP addresses,
//     IPv6 flow label and extension headers, TCP ports;
//   - mergeable: IPv4 without options or fragmentation, total length equal
//     to the frame (no padding), valid IPv4 header and TCP checksums;
//     IPv6 with at most hop-by-hop, routing and destination options headers;
//   - a segment joins the held packet when its sequence number continues
//     it, its payload is not larger than the first segment's, the merged
//     IP packet stays within MaxSize, and the headers agree: TTL/hop limit,
//     TOS/traffic class, DF, IPv4 ID incrementing by one per segment (or
//     the same in every segment, decided at the second one, with or without
//     DF as in current Linux), TCP data offset, window, ACK
//     number and options byte for byte (so timestamps must be equal, as in
//     the kernel), and flags except FIN and PSH; a segment with CWR does
//     not join;
//   - the merged packet is delivered when a segment shorter than the first
//     one, or one with URG, PSH, RST, SYN or FIN, joins it; when a segment of
//     its flow cannot join (the held packet goes first, keeping order); and
//     on Flush. A segment without payload, or with one of those flags, is
//     never held.
//
// Frames GRO cannot merge (other protocols, malformed frames) pass through
// unchanged, copied, in order with their flow. A merged packet keeps the
// first segment's headers (and IPv4 ID), takes FIN and PSH from the later
// segments, and gets its lengths and checksums recomputed. A packet held
// alone is delivered byte for byte as it came.
//
// Output frames are appended to the dst slice each call takes and belong
// to the caller. GRO reuses the buffers of the elements between len(dst)
// and cap(dst), so handing back the previous result as dst[:0] once its
// frames are consumed makes steady-state operation allocation-free. GRO
// never keeps a reference to an input frame.
//
// Call Flush at the end of every receive batch, as NAPI flushes GRO at the
// end of a poll, so that a held packet never waits for traffic that may
// not come. A GRO is not safe for concurrent use; use one per queue, like
// the kernel's per-NAPI table.
type GRO struct {
	opts    GROOptions
	stats   GROStats
	slots   []groSlot
	clock   uint64
	bufSize int
}

// groSlot is one held packet.
type groSlot struct {
	used    bool
	age     uint64
	buf     []byte // the packet: headers and merged payload
	l3, l4  int
	pay     int // payload offset
	v6      bool
	count   int    // segments merged
	mss     int    // payload length of the first segment
	nextSeq uint32 // sequence number the next segment must carry
	id0     uint16 // IPv4 ID of the first segment
	fixedID bool   // IPv4 IDs are fixed, not incrementing
	paySum  uint64 // unfolded sum of the merged payload
}

// NewGRO returns an empty GRO table. It fails on out-of-range options.
func NewGRO(opts GROOptions) (*GRO, error) {
	if opts.MaxSize == 0 {
		opts.MaxSize = 65535
	}
	if opts.MaxSize < 68 || opts.MaxSize > 65535 {
		return nil, fmt.Errorf("new GRO: %w: MaxSize %d: must be between 68 and 65535", ErrInvalidOptions, opts.MaxSize)
	}
	if opts.MaxFlows == 0 {
		opts.MaxFlows = 8
	}
	if opts.MaxFlows < 1 || opts.MaxFlows > 1024 {
		return nil, fmt.Errorf("new GRO: %w: MaxFlows %d: must be between 1 and 1024", ErrInvalidOptions, opts.MaxFlows)
	}
	if opts.AcceptPartialChecksum && !opts.Verify {
		return nil, fmt.Errorf("new GRO: %w: AcceptPartialChecksum needs Verify", ErrInvalidOptions)
	}
	return &GRO{
		opts:    opts,
		slots:   make([]groSlot, opts.MaxFlows),
		bufSize: opts.MaxSize + 14 + VLANLen*MaxVLANTags,
	}, nil
}

// Held returns the number of packets the table holds.
func (g *GRO) Held() int {
	n := 0
	for i := range g.slots {
		if g.slots[i].used {
			n++
		}
	}
	return n
}

// Stats returns what the GRO dropped (with GROOptions.Verify).
func (g *GRO) Stats() GROStats { return g.stats }

// Flush delivers every held packet, oldest first, appending them to dst.
func (g *GRO) Flush(dst [][]byte) [][]byte {
	for {
		s := g.oldest()
		if s == nil {
			return dst
		}
		dst = g.emitSlot(dst, s)
	}
}

// Feed offers one received frame to the table and appends the frames that
// are ready for delivery (possibly none, possibly several) to dst.
func (g *GRO) Feed(dst [][]byte, frame []byte) [][]byte {
	var layout Layout
	lo := &layout
	if perr := parseLayout(lo, frame, ipProtoTCP); perr.kind != nil {
		if g.opts.Verify {
			g.stats.Unverifiable++
			return dst
		}
		return g.emitCopy(dst, frame)
	}
	s := g.lookup(frame, lo)
	if !groEligible(frame, lo) || lo.End-lo.L3 > g.opts.MaxSize {
		if s != nil {
			dst = g.emitSlot(dst, s)
		}
		return g.emitAlone(dst, frame, lo)
	}
	th := frame[lo.L4:lo.Payload]
	flags := th[13]
	plen := lo.End - lo.Payload
	if s != nil {
		if g.canMerge(s, frame, lo) {
			if !g.appendPayload(s, frame, lo) {
				// Bad TCP checksum: deliver what we hold, then the
				// segment as it is (or, with Verify, drop it).
				dst = g.emitSlot(dst, s)
				return g.emitAlone(dst, frame, lo)
			}
			if plen < s.mss || flags&(tcpURG|tcpPSH|tcpRST|tcpSYN|tcpFIN) != 0 {
				dst = g.emitSlot(dst, s)
			}
			return dst
		}
		dst = g.emitSlot(dst, s)
	}
	if plen == 0 || flags&(tcpURG|tcpPSH|tcpRST|tcpSYN|tcpFIN) != 0 {
		return g.emitAlone(dst, frame, lo)
	}
	s = g.free()
	if s == nil {
		s = g.oldest()
		dst = g.emitSlot(dst, s)
	}
	if !g.hold(s, frame, lo) {
		return g.emitAlone(dst, frame, lo)
	}
	return dst
}

// emitAlone appends a copy of a TCP frame that merges with nothing to
// dst: with Verify, only if its checksums verify, summed as it is copied.
func (g *GRO) emitAlone(dst [][]byte, frame []byte, lo *Layout) [][]byte {
	if !g.opts.Verify {
		return g.emitCopy(dst, frame)
	}
	if !lo.IPv6 && Checksum(frame[lo.L3:lo.L4], 0) != 0xffff {
		g.stats.BadChecksum++
		return dst
	}
	n := len(dst)
	dst, b := g.spare(dst, len(frame))
	b = append(b, frame[:lo.Payload]...)
	b = b[:len(frame)]
	ps := copySum(b[lo.Payload:lo.End], frame[lo.Payload:lo.End])
	copy(b[lo.End:], frame[lo.End:])
	if !tcpSumOK(frame, lo, ps) {
		if partialTCP(frame, lo) {
			g.stats.PartialChecksum++
			if g.opts.AcceptPartialChecksum {
				dst[n] = b
				return dst
			}
		}
		g.stats.BadChecksum++
		dst[n] = b[:0] // the buffer stays for the next output
		return dst[:n]
	}
	dst[n] = b
	return dst
}

// groEligible reports whether a parsed TCP frame may take part in merging
// at all (inet_gro_receive's and ipv6_gro_receive's flush conditions that
// depend on the packet alone).
func groEligible(frame []byte, lo *Layout) bool {
	if lo.End != len(frame) { // link padding: lengths disagree
		return false
	}
	if lo.IPv6 {
		// A routing header's final destination is the pseudo-header's:
		// merged packets are summed with the fixed header's.
		return lo.FinalDst == lo.L3+24
	}
	ip := frame[lo.L3:lo.L4]
	if lo.HasIPv4Options() || lo.Fragment {
		return false
	}
	return Checksum(ip, 0) == 0xffff
}

// lookup returns the held slot of frame's flow, or nil.
func (g *GRO) lookup(frame []byte, lo *Layout) *groSlot {
	for i := range g.slots {
		s := &g.slots[i]
		if !s.used || s.l3 != lo.L3 || s.v6 != lo.IPv6 || s.l4 != lo.L4 {
			continue
		}
		h := s.buf
		if !bytes.Equal(h[:lo.L3], frame[:lo.L3]) {
			continue
		}
		ip, ip2 := frame[lo.L3:], h[lo.L3:]
		if lo.IPv6 {
			// Version and flow label, addresses, next header, and the
			// extension headers must match.
			if binary.BigEndian.Uint32(ip)&0xf00fffff != binary.BigEndian.Uint32(ip2)&0xf00fffff ||
				ip[6] != ip2[6] || !bytes.Equal(ip[8:40], ip2[8:40]) ||
				!bytes.Equal(frame[lo.L3+40:lo.L4], h[lo.L3+40:lo.L4]) {
				continue
			}
		} else if ip[9] != ip2[9] || !bytes.Equal(ip[12:20], ip2[12:20]) {
			continue
		}
		if !bytes.Equal(frame[lo.L4:lo.L4+4], h[lo.L4:lo.L4+4]) {
			continue
		}
		return s
	}
	return nil
}

// canMerge applies tcp_gro_receive's and the network layer's flush
// conditions between held slot s and the same-flow segment frame.
func (g *GRO) canMerge(s *groSlot, frame []byte, lo *Layout) bool {
	h := s.buf
	newFixed := s.fixedID
	th, th2 := frame[lo.L4:lo.Payload], h[s.l4:s.pay]
	if th[13]&tcpCWR != 0 {
		return false
	}
	// Data offset, reserved bits, flags except CWR/FIN/PSH, window.
	w := binary.BigEndian.Uint32(th[12:]) ^ binary.BigEndian.Uint32(th2[12:])
	if w&^(uint32(tcpCWR|tcpFIN|tcpPSH)<<16) != 0 {
		return false
	}
	if !bytes.Equal(th[8:12], th2[8:12]) || !bytes.Equal(th[20:], th2[20:]) {
		return false
	}
	ip, ip2 := frame[lo.L3:], h[s.l3:]
	if lo.IPv6 {
		if binary.BigEndian.Uint32(ip)&0x0ff00000 != binary.BigEndian.Uint32(ip2)&0x0ff00000 || ip[7] != ip2[7] {
			return false
		}
	} else {
		if ip[8] != ip2[8] || ip[1] != ip2[1] || (ip[6]^ip2[6])&0x40 != 0 {
			return false
		}
		off := binary.BigEndian.Uint16(ip[4:]) - s.id0
		fixed := s.fixedID || (s.count == 1 && off == 0)
		want := uint16(s.count)
		if fixed {
			want = 0
		}
		if off != want {
			return false
		}
		newFixed = fixed
	}
	plen := lo.End - lo.Payload
	if plen == 0 || plen > s.mss {
		return false
	}
	if binary.BigEndian.Uint32(th[4:]) != s.nextSeq {
		return false
	}
	if len(h)-s.l3+plen > g.opts.MaxSize {
		return false
	}
	s.fixedID = newFixed
	return true
}

// appendPayload copies frame's payload behind s's, verifying the segment's
// TCP checksum in the same pass. On a bad checksum it leaves s as it was
// and returns false.
func (g *GRO) appendPayload(s *groSlot, frame []byte, lo *Layout) bool {
	pay := frame[lo.Payload:lo.End]
	n := len(s.buf)
	ps := copySum(s.buf[n:n+len(pay)], pay)
	if !g.sumOK(frame, lo, ps) {
		return false
	}
	if (n-s.pay)%2 == 1 {
		ps = swapSum(ps)
	}
	s.paySum += uint64(ps)
	s.buf = s.buf[:n+len(pay)]
	s.count++
	s.nextSeq += uint32(len(pay))
	s.buf[s.l4+13] |= frame[lo.L4+13] & (tcpFIN | tcpPSH)
	return true
}

// sumOK is tcpSumOK, but for a partial checksum that
// AcceptPartialChecksum takes (and counts).
func (g *GRO) sumOK(frame []byte, lo *Layout, paySum uint16) bool {
	if tcpSumOK(frame, lo, paySum) {
		return true
	}
	if g.opts.AcceptPartialChecksum && partialTCP(frame, lo) {
		g.stats.PartialChecksum++
		return true
	}
	return false
}

// partialTCP reports whether the checksum field of a TCP frame whose sum
// does not verify holds the pseudo-header sum (PartialChecksum).
func partialTCP(frame []byte, lo *Layout) bool {
	return binary.BigEndian.Uint16(frame[lo.L4+16:]) == layoutPseudoSum(frame, lo)
}

// tcpSumOK reports whether frame's TCP checksum verifies, given the sum of
// its payload.
func tcpSumOK(frame []byte, lo *Layout, paySum uint16) bool {
	ph := pseudoSum(frame[lo.L3:], lo.IPv6, ipProtoTCP, lo.End-lo.L4)
	if lo.IPv6 && lo.FinalDst != lo.L3+24 {
		ph = PseudoHeaderIPv6([16]byte(frame[lo.L3+8:lo.L3+24]), [16]byte(frame[lo.FinalDst:lo.FinalDst+16]), ipProtoTCP, uint32(lo.End-lo.L4))
	}
	sum := uint64(ph) +
		uint64(Checksum(frame[lo.L4:lo.Payload], 0)) + uint64(paySum)
	return Fold(sum) == 0xffff
}

// hold makes frame the head of empty slot s. It fails (leaving s empty)
// on a bad TCP checksum.
func (g *GRO) hold(s *groSlot, frame []byte, lo *Layout) bool {
	if cap(s.buf) < g.bufSize {
		s.buf = make([]byte, 0, g.bufSize)
	}
	b := s.buf[:lo.End]
	copy(b, frame[:lo.Payload])
	ps := copySum(b[lo.Payload:], frame[lo.Payload:lo.End])
	if !g.sumOK(frame, lo, ps) {
		return false
	}
	g.clock++
	*s = groSlot{
		used:    true,
		age:     g.clock,
		buf:     b,
		l3:      lo.L3,
		l4:      lo.L4,
		pay:     lo.Payload,
		v6:      lo.IPv6,
		count:   1,
		mss:     lo.End - lo.Payload,
		nextSeq: binary.BigEndian.Uint32(frame[lo.L4+4:]) + uint32(lo.End-lo.Payload),
		paySum:  uint64(ps),
	}
	if !lo.IPv6 {
		s.id0 = binary.BigEndian.Uint16(frame[lo.L3+4:])
	}
	return true
}

func (g *GRO) free() *groSlot {
	for i := range g.slots {
		if !g.slots[i].used {
			return &g.slots[i]
		}
	}
	return nil
}

func (g *GRO) oldest() *groSlot {
	var o *groSlot
	for i := range g.slots {
		s := &g.slots[i]
		if s.used && (o == nil || s.age < o.age) {
			o = s
		}
	}
	return o
}

// spare returns a buffer of capacity at least n from dst's unused
// capacity, or a new one, and dst extended by one element for it.
func (g *GRO) spare(dst [][]byte, n int) ([][]byte, []byte) {
	if len(dst) < cap(dst) {
		dst = dst[:len(dst)+1]
		if b := dst[len(dst)-1]; cap(b) >= n {
			return dst, b[:0]
		}
		return dst, make([]byte, 0, max(n, g.bufSize))
	}
	return append(dst, nil), make([]byte, 0, max(n, g.bufSize))
}

// emitCopy appends a copy of frame to dst.
func (g *GRO) emitCopy(dst [][]byte, frame []byte) [][]byte {
	dst, b := g.spare(dst, len(frame))
	dst[len(dst)-1] = append(b, frame...)
	return dst
}

// emitSlot finishes s's packet, appends it to dst and empties s, giving
// it a spare buffer from dst in exchange.
func (g *GRO) emitSlot(dst [][]byte, s *groSlot) [][]byte {
	b := s.buf
	if s.count > 1 {
		ip := b[s.l3:]
		if s.v6 {
			binary.BigEndian.PutUint16(ip[4:], uint16(len(b)-s.l3-40))
		} else {
			binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-s.l3))
			binary.BigEndian.PutUint16(ip[10:], 0)
			binary.BigEndian.PutUint16(ip[10:], ^Checksum(ip[:s.l4-s.l3], 0))
		}
		th := b[s.l4:]
		l4len := len(b) - s.l4
		ph := pseudoSum(ip, s.v6, ipProtoTCP, l4len)
		binary.BigEndian.PutUint16(th[16:], 0)
		if g.opts.PartialChecksum {
			binary.BigEndian.PutUint16(th[16:], ph)
		} else {
			sum := uint64(ph) + uint64(Checksum(th[:s.pay-s.l4], 0)) + s.paySum
			binary.BigEndian.PutUint16(th[16:], ^Fold(sum))
		}
	}
	dst, spare := g.spare(dst, g.bufSize)
	dst[len(dst)-1] = b
	*s = groSlot{buf: spare}
	return dst
}
