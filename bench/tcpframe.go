package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/bench/iperf3"

	"github.com/xdpio/xdpio/offload"
)

// errNotTCPSegment is wrapped by parseTCPSegment's error for a frame that
// is not a TCP segment this mode sends: another protocol, a truncated or
// inconsistent header, VLAN tags, IPv6 extension headers, a fragment.
var errNotTCPSegment = errors.New("not a TCP-mode segment")

// Header sizes of the frames TCP mode sends: Ethernet II, IPv4 without
// options or IPv6 without extension headers, TCP without options.
const (
	tcpHdrLen4 = offload.EthernetLen + offload.IPv4MinLen + offload.TCPMinLen
	tcpHdrLen6 = offload.EthernetLen + offload.IPv6Len + offload.TCPMinLen
	tcpWindow  = 65535
	tcpAckNum  = 1 // the fixed acknowledgement number of the one-way stream
)

// tcpTxFlow is the sending state of one flow: its header template and the
// next sequence number and IPv4 ID.
type tcpTxFlow struct {
	hdr  []byte // Ethernet, IP and TCP header; lengths and checksums are filled per segment
	v6   bool
	seq  uint32
	ipID uint16
	mss  int
}

// newTCPTxFlow builds the header template of a flow from src to dst.
func newTCPTxFlow(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, isn uint32, mss int) (*tcpTxFlow, error) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	if s.Is4() != d.Is4() || !s.IsValid() || !d.IsValid() {
		return nil, fmt.Errorf("tcp flow %v → %v: addresses of different families: %w", src, dst, ErrUnsupported)
	}
	if len(srcMAC) != 6 || len(dstMAC) != 6 {
		return nil, fmt.Errorf("tcp flow %v → %v: MAC addresses %v, %v: need 6 bytes each", src, dst, srcMAC, dstMAC)
	}
	if err := iperf3.CheckMSS("sender", mss); err != nil {
		return nil, fmt.Errorf("tcp flow %v → %v: %w", src, dst, err)
	}
	f := &tcpTxFlow{v6: d.Is6(), seq: isn, mss: mss}
	l3 := offload.EthernetLen
	var l4 int
	if f.v6 {
		f.hdr = make([]byte, tcpHdrLen6)
		l4 = l3 + offload.IPv6Len
		offload.Ethernet(f.hdr).SetType(offload.EtherTypeIPv6)
		ip := f.hdr[l3:]
		ip[0] = 0x60
		ip[6] = offload.ProtoTCP
		ip[7] = 64
		s16, d16 := s.As16(), d.As16()
		copy(ip[8:], s16[:])
		copy(ip[24:], d16[:])
	} else {
		f.hdr = make([]byte, tcpHdrLen4)
		l4 = l3 + offload.IPv4MinLen
		offload.Ethernet(f.hdr).SetType(offload.EtherTypeIPv4)
		ip := f.hdr[l3:]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[6:], offload.IPv4DontFragment)
		ip[8] = 64
		ip[9] = offload.ProtoTCP
		s4, d4 := s.As4(), d.As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
	}
	copy(f.hdr[0:], dstMAC)
	copy(f.hdr[6:], srcMAC)
	t := f.hdr[l4:]
	binary.BigEndian.PutUint16(t[0:], src.Port())
	binary.BigEndian.PutUint16(t[2:], dst.Port())
	binary.BigEndian.PutUint32(t[8:], tcpAckNum)
	t[12] = offload.TCPMinLen / 4 << 4
	t[13] = offload.TCPFlagACK
	binary.BigEndian.PutUint16(t[14:], tcpWindow)
	return f, nil
}

func (f *tcpTxFlow) l4() int { return len(f.hdr) - offload.TCPMinLen }

// segments returns how many frames a write of n bytes takes.
func (f *tcpTxFlow) segments(n int) int { return (n + f.mss - 1) / f.mss }

// maxWrite is the largest write TCP mode makes: whole segments that fit
// one super-packet (a 16-bit IP length).
func maxWrite(v6 bool, mss int) int {
	room := 65535 - offload.IPv4MinLen - offload.TCPMinLen
	if v6 {
		room = 65535 - offload.TCPMinLen
	}
	if mss > room {
		return room
	}
	return room / mss * mss
}

// writeTSO sends payload as one super-packet cut by offload.SegmentPayload
// into the buffers next hands out: headers copied from the template,
// sequence numbers and IPv4 IDs advanced, PSH on the last segment only,
// checksums computed while the payload is copied.
func (f *tcpTxFlow) writeTSO(payload []byte, next func(size int) []byte) (int, error) {
	l4 := f.l4()
	binary.BigEndian.PutUint32(f.hdr[l4+4:], f.seq)
	f.hdr[l4+13] = offload.TCPFlagACK | offload.TCPFlagPSH
	if !f.v6 {
		binary.BigEndian.PutUint16(f.hdr[offload.EthernetLen+4:], f.ipID)
	}
	n, err := offload.SegmentPayload(f.hdr, payload, offload.SegmentOptions{MSS: f.mss}, next)
	if err != nil {
		return n, fmt.Errorf("tcp write of %d bytes: %w", len(payload), err)
	}
	f.seq += uint32(len(payload))
	f.ipID += uint16(n)
	return n, nil
}

// writeSegments sends the same bytes as writeTSO, one segment at a time:
// each frame's headers written from the flow's state, its payload copied,
// then its checksums computed by offload.FillChecksum. This is the work a
// sender without TSO does per segment.
func (f *tcpTxFlow) writeSegments(payload []byte, next func(size int) []byte) (int, error) {
	hl, l4 := len(f.hdr), f.l4()
	count := 0
	for off := 0; off < len(payload) || off == 0; {
		n := min(f.mss, len(payload)-off)
		buf := next(hl + n)
		if buf == nil {
			return count, fmt.Errorf("tcp segment %d: %w", count, offload.ErrDestTooSmall)
		}
		fr := buf[:hl+n]
		copy(fr, f.hdr)
		ip := fr[offload.EthernetLen:]
		if f.v6 {
			binary.BigEndian.PutUint16(ip[4:], uint16(offload.TCPMinLen+n))
		} else {
			binary.BigEndian.PutUint16(ip[2:], uint16(hl-offload.EthernetLen+n))
			binary.BigEndian.PutUint16(ip[4:], f.ipID)
		}
		t := fr[l4:]
		binary.BigEndian.PutUint32(t[4:], f.seq)
		flags := byte(offload.TCPFlagACK)
		if off+n == len(payload) {
			flags |= offload.TCPFlagPSH
		}
		t[13] = flags
		copy(fr[hl:], payload[off:off+n])
		if _, err := offload.FillChecksum(fr); err != nil {
			return count, fmt.Errorf("tcp segment %d: %w", count, err)
		}
		f.seq += uint32(n)
		f.ipID++
		off += n
		count++
		if n == 0 {
			break
		}
	}
	return count, nil
}

// tcpSegment is what the receiver reads from a frame.
type tcpSegment struct {
	src          netip.AddrPort
	dst          netip.AddrPort
	seq          uint32
	flags        uint8
	payload      int // payload length
	payloadStart int // offset of the payload in the frame
}

// parseTCPSegment reads an Ethernet II / IPv4 (options allowed, no
// fragment) or IPv6 (no extension headers) / TCP frame. Link padding after
// the IP packet is ignored. It does not check checksums (VerifyRx does).
func parseTCPSegment(f []byte) (tcpSegment, error) {
	var s tcpSegment
	bad := func(why string, a ...any) (tcpSegment, error) {
		return tcpSegment{}, fmt.Errorf("parse tcp segment: %s: %w", fmt.Sprintf(why, a...), errNotTCPSegment)
	}
	if len(f) < offload.EthernetLen {
		return bad("%d-byte frame", len(f))
	}
	var src, dst netip.Addr
	var l4, end int
	switch et := binary.BigEndian.Uint16(f[12:]); et {
	case offload.EtherTypeIPv4:
		ip := f[offload.EthernetLen:]
		if len(ip) < offload.IPv4MinLen || ip[0]>>4 != 4 {
			return bad("short or not an IPv4 header")
		}
		ihl := int(ip[0]&0xf) * 4
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		switch {
		case ihl < offload.IPv4MinLen || tot < ihl || tot > len(ip):
			return bad("IPv4 header length %d, total length %d in %d bytes", ihl, tot, len(ip))
		case ip[9] != offload.ProtoTCP:
			return bad("IP protocol %d", ip[9])
		case binary.BigEndian.Uint16(ip[6:])&0x3fff != 0:
			return bad("IPv4 fragment")
		}
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		l4, end = offload.EthernetLen+ihl, offload.EthernetLen+tot
	case offload.EtherTypeIPv6:
		ip := f[offload.EthernetLen:]
		if len(ip) < offload.IPv6Len || ip[0]>>4 != 6 {
			return bad("short or not an IPv6 header")
		}
		pl := int(binary.BigEndian.Uint16(ip[4:]))
		switch {
		case offload.IPv6Len+pl > len(ip):
			return bad("IPv6 payload length %d in %d bytes", pl, len(ip)-offload.IPv6Len)
		case ip[6] != offload.ProtoTCP:
			return bad("IPv6 next header %d", ip[6])
		}
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		l4, end = offload.EthernetLen+offload.IPv6Len, offload.EthernetLen+offload.IPv6Len+pl
	default:
		return bad("EtherType %#04x", et)
	}
	if end-l4 < offload.TCPMinLen {
		return bad("%d bytes for the TCP header", end-l4)
	}
	t := f[l4:end]
	doff := int(t[12]>>4) * 4
	if doff < offload.TCPMinLen || doff > len(t) {
		return bad("TCP data offset %d in a %d-byte segment", doff, len(t))
	}
	s.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(t[0:]))
	s.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(t[2:]))
	s.seq = binary.BigEndian.Uint32(t[4:])
	s.flags = t[13]
	s.payloadStart = l4 + doff
	s.payload = end - s.payloadStart
	return s, nil
}

// tcpRxFlow accounts one flow's segments at the receiver.
type tcpRxFlow struct {
	iperf3.TCPReceiverStream
	next uint32 // the next expected sequence number
}

// add accounts a segment with a good checksum: in order, ahead (a gap),
// or behind (late or duplicate). After a gap the flow continues from the
// segment that jumped ahead, so the rest of the stream is still measured.
// Segments without payload are counted and do not move the sequence.
func (f *tcpRxFlow) add(seq uint32, n int) {
	if n == 0 {
		f.Segments++
		return
	}
	d := int32(seq - f.next)
	switch {
	case d == 0:
		f.InOrderBytes += uint64(n)
	case d > 0:
		f.OutOfOrder++
		f.GapBytes += uint64(d)
	default:
		f.Late++
		return
	}
	f.Segments++
	f.Bytes += uint64(n)
	f.next = seq + uint32(n)
}
