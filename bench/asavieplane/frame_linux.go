//go:build linux

package asavieplane

import (
	"encoding/binary"
	"net/netip"

	"github.com/xdpio/xdpio/offload"
)

// datagram is a UDP datagram parseFrame found in a frame; payload aliases
// the frame.
type datagram struct {
	src, dst netip.AddrPort
	payload  []byte
}

// parseFrame finds the UDP datagram in a received frame with package
// offload's parser, the same checks xskplane's conns make (through
// xdpnet): untagged Ethernet, IPv4 (not a fragment) or IPv6 (no extension
// headers), UDP, consistent lengths, checksums right (offload.VerifyRX)
// but for a UDP checksum a sender on this host left unfinished for a veth
// offload (its field holds the pseudo-header's sum), which both planes
// accept. ok is false for any other frame.
func parseFrame(f []byte) (d datagram, ok bool) {
	var lo offload.Layout
	if r := lo.Parse(f); r != offload.ReasonNone || lo.VLANTags > 0 || lo.ExtHeaders > 0 || lo.Fragment ||
		lo.Proto != offload.ProtoUDP || lo.Payload == 0 {
		return d, false
	}
	l4 := f[lo.L4:lo.End]
	u := offload.UDP(l4)
	ulen := int(u.Length())
	if ulen < offload.UDPLen || ulen > len(l4) {
		return d, false
	}
	if v := offload.VerifyRX(f); v.L3 == offload.VerdictBad || (v.Bad() && !partial(f, &lo, u, ulen)) {
		return d, false
	}
	if lo.IPv6 {
		ip := offload.IPv6(f[lo.L3:lo.L4])
		d.src = netip.AddrPortFrom(netip.AddrFrom16(ip.Src()), u.SrcPort())
		d.dst = netip.AddrPortFrom(netip.AddrFrom16(ip.Dst()), u.DstPort())
	} else {
		ip := offload.IPv4(f[lo.L3:lo.L4])
		d.src = netip.AddrPortFrom(netip.AddrFrom4(ip.Src()), u.SrcPort())
		d.dst = netip.AddrPortFrom(netip.AddrFrom4(ip.Dst()), u.DstPort())
	}
	d.payload = l4[offload.UDPLen:ulen]
	return d, true
}

// partial reports whether the UDP checksum field holds just the
// pseudo-header's sum (CHECKSUM_PARTIAL left by a veth sender).
func partial(f []byte, lo *offload.Layout, u offload.UDP, ulen int) bool {
	var ph uint16
	if lo.IPv6 {
		ip := offload.IPv6(f[lo.L3:lo.L4])
		ph = offload.PseudoHeaderIPv6(ip.Src(), ip.Dst(), offload.ProtoUDP, uint32(ulen))
	} else {
		ip := offload.IPv4(f[lo.L3:lo.L4])
		ph = offload.PseudoHeaderIPv4(ip.Src(), ip.Dst(), offload.ProtoUDP, uint16(ulen))
	}
	return binary.BigEndian.Uint16(f[lo.L4+6:]) == ph
}

// buildFrame writes the headers for payload from src to dst (MACs from
// and to) in front of it in frame, checksums filled, with offload's
// builder, and returns the frame's length.
func buildFrame(frame []byte, from, to []byte, src, dst netip.AddrPort, payload []byte) (int, error) {
	h := offload.Headers{SrcMAC: from, DstMAC: to, Src: src, Dst: dst}
	return h.BuildUDP(frame, 0, payload)
}
