package tcpplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/bench/iperf3"

	"github.com/xdpio/xdpio/internal/errs"
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

// tcpTXFlow is the sending state of one flow: its headers (and their
// template for TSO) and the next sequence number and IPv4 ID.
type tcpTXFlow struct {
	h    offload.Headers
	hdr  []byte // Ethernet, IP and TCP header; lengths and checksums are filled per segment
	v6   bool
	seq  uint32
	ipID uint16
	mss  int
}

// newTCPTxFlow builds the headers of a flow from src to dst with
// offload's frame builder: DF and TTL 64 over IPv4, no TCP options.
func newTCPTxFlow(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, isn uint32, mss int) (*tcpTXFlow, error) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	if s.Is4() != d.Is4() || !s.IsValid() || !d.IsValid() {
		return nil, fmt.Errorf("tcp flow %v → %v: addresses of different families: %w", src, dst, errs.ErrNotSupported)
	}
	if err := iperf3.CheckMSS("sender", mss); err != nil {
		return nil, fmt.Errorf("tcp flow %v → %v: %w", src, dst, err)
	}
	f := &tcpTXFlow{v6: d.Is6(), seq: isn, mss: mss,
		h: offload.Headers{SrcMAC: srcMAC, DstMAC: dstMAC, Src: netip.AddrPortFrom(s, src.Port()), Dst: netip.AddrPortFrom(d, dst.Port())}}
	if err := f.h.Check(); err != nil {
		return nil, fmt.Errorf("tcp flow %v → %v: %w", src, dst, err)
	}
	f.hdr = make([]byte, f.h.Len(offload.ProtoTCP))
	if _, err := f.h.BuildTCP(f.hdr, 0, f.fields(offload.TCPFlagACK), nil); err != nil {
		return nil, fmt.Errorf("tcp flow %v → %v: %w", src, dst, err)
	}
	return f, nil
}

// fields are the TCP fields of the flow's next segment.
func (f *tcpTXFlow) fields(flags uint8) offload.TCPFields {
	return offload.TCPFields{Seq: f.seq, Ack: tcpAckNum, Flags: flags, Window: tcpWindow}
}

func (f *tcpTXFlow) l4() int { return len(f.hdr) - offload.TCPMinLen }

// segments returns how many frames a write of n bytes takes.
func (f *tcpTXFlow) segments(n int) int { return (n + f.mss - 1) / f.mss }

// MaxWrite is the largest write TCP mode makes over IPv6 (v6) or IPv4
// with segments of mss bytes: whole segments that fit one super-packet (a
// 16-bit IP length), or the most the super-packet holds if one segment
// does not fit.
func MaxWrite(v6 bool, mss int) int {
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
func (f *tcpTXFlow) writeTSO(payload []byte, next func(size int) []byte) (int, error) {
	l4 := f.l4()
	offload.TCP(f.hdr[l4:]).SetSeq(f.seq)
	f.hdr[l4+13] = offload.TCPFlagACK | offload.TCPFlagPSH
	if !f.v6 {
		offload.IPv4(f.hdr[offload.EthernetLen:]).SetID(f.ipID)
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
// each frame built by offload's frame builder from the flow's state, its
// payload copied and summed in one pass. This is the work a sender without
// TSO does per segment.
func (f *tcpTXFlow) writeSegments(payload []byte, next func(size int) []byte) (int, error) {
	hl := len(f.hdr)
	count := 0
	for off := 0; off < len(payload) || off == 0; {
		n := min(f.mss, len(payload)-off)
		buf := next(hl + n)
		if buf == nil {
			return count, fmt.Errorf("tcp segment %d: %w", count, offload.ErrDestTooSmall)
		}
		flags := uint8(offload.TCPFlagACK)
		if off+n == len(payload) {
			flags |= offload.TCPFlagPSH
		}
		if _, err := f.h.BuildTCP(buf[:hl+n], f.ipID, f.fields(flags), payload[off:off+n]); err != nil {
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
// fragment) or IPv6 (no extension headers) / TCP frame with offload's
// parser. Link padding after the IP packet is ignored. It does not check
// checksums (VerifyRX does).
func parseTCPSegment(f []byte) (tcpSegment, error) {
	bad := func(why string, a ...any) (tcpSegment, error) {
		return tcpSegment{}, fmt.Errorf("parse tcp segment: %s: %w", fmt.Sprintf(why, a...), errNotTCPSegment)
	}
	lo, r := offload.Parse(f)
	switch {
	case r != offload.ReasonNone:
		return bad("%v", r)
	case lo.VLANTags != 0:
		return bad("%d VLAN tags", lo.VLANTags)
	case lo.ExtHeaders != 0:
		return bad("%d IPv6 extension headers", lo.ExtHeaders)
	case lo.Fragment:
		return bad("IP fragment")
	case lo.Proto != offload.ProtoTCP:
		return bad("IP protocol %d", lo.Proto)
	case lo.Payload == 0:
		return bad("no whole TCP header")
	}
	t := offload.TCP(f[lo.L4:])
	src, _ := netip.AddrFromSlice(lo.Src(f))
	dst, _ := netip.AddrFromSlice(lo.Dst(f))
	return tcpSegment{
		src:          netip.AddrPortFrom(src, t.SrcPort()),
		dst:          netip.AddrPortFrom(dst, t.DstPort()),
		seq:          t.Seq(),
		flags:        t.Flags(),
		payloadStart: lo.Payload,
		payload:      lo.End - lo.Payload,
	}, nil
}

// tcpRXFlow accounts one flow's segments at the receiver.
type tcpRXFlow struct {
	iperf3.TCPReceiverStream
	next uint32 // the next expected sequence number
}

// add accounts a segment with a good checksum: in order, ahead (a gap),
// or behind (late or duplicate). After a gap the flow continues from the
// segment that jumped ahead, so the rest of the stream is still measured.
// Segments without payload are counted and do not move the sequence.
func (f *tcpRXFlow) add(seq uint32, n int) {
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
