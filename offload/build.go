package offload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ErrInvalidHeaders is wrapped by the errors of the frame builder
// (Headers): addresses of two families, a MAC address that is not 6
// bytes, a frame too short, a payload too long for the IP length field.
var ErrInvalidHeaders = errors.New("invalid headers")

// Headers describes the headers of the frames of one flow: Ethernet II
// without VLAN tags, IPv4 (20 bytes, DF set, no options) or IPv6 (40
// bytes, no extension headers), then UDP or TCP. The family is the
// destination's; an IPv4-mapped IPv6 address counts as IPv6 (unmap it
// first for IPv4). The builder methods write a whole frame with every
// checksum right: the one frame builder of this module (package xdpnet
// sends with it). They never allocate.
type Headers struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.AddrPort
	// TTL is the IPv4 TTL or IPv6 hop limit; 0 is taken as 64.
	TTL uint8
	// TOS is the IPv4 type of service or IPv6 traffic class.
	TOS uint8
}

// TCPFields are the TCP header fields BuildTCP writes besides the ports
// (the data offset is 5: no options).
type TCPFields struct {
	Seq, Ack uint32
	Flags    uint8 // TCPFlagFIN … TCPFlagCWR
	Window   uint16
}

// Len returns the length of the headers for transport protocol proto
// (ProtoUDP or ProtoTCP without options): 42 or 54 bytes over IPv4, 62 or
// 74 over IPv6.
func (h *Headers) Len(proto uint8) int {
	n := EthernetLen + IPv4MinLen
	if !h.Dst.Addr().Is4() {
		n = EthernetLen + IPv6Len
	}
	if proto == ProtoTCP {
		return n + TCPMinLen
	}
	return n + UDPLen
}

// Check reports what makes h unusable: addresses not valid or not of one
// family, MAC addresses that are not 6 bytes. The Build methods check it
// themselves; Check is for a caller that wants to know early.
func (h *Headers) Check() error {
	src, dst := h.Src.Addr(), h.Dst.Addr()
	switch {
	case !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4():
		return fmt.Errorf("%w: frame from %v to %v: addresses of one family needed", ErrInvalidHeaders, h.Src, h.Dst)
	case len(h.SrcMAC) != 6 || len(h.DstMAC) != 6:
		return fmt.Errorf("%w: frame from %v to %v: 6-byte MAC addresses needed", ErrInvalidHeaders, h.SrcMAC, h.DstMAC)
	}
	return nil
}

// check is Check plus the room for a payload of plen bytes in frame.
func (h *Headers) check(frame []byte, proto uint8, plen int) error {
	if err := h.Check(); err != nil {
		return err
	}
	hl := h.Len(proto)
	if plen > 65535-(hl-EthernetLen) {
		return fmt.Errorf("%w: a %d-byte payload does not fit one IP packet", ErrInvalidHeaders, plen)
	}
	if len(frame) < hl+plen {
		return fmt.Errorf("%w: a %d-byte frame for %d bytes of headers and payload", ErrInvalidHeaders, len(frame), hl+plen)
	}
	return nil
}

// BuildUDP writes the headers of h and payload into frame, with the IPv4
// header and UDP checksums filled (the payload is summed while it is
// copied), and returns the frame's length: Len(ProtoUDP)+len(payload).
// id is the IPv4 identification (unused over IPv6). A UDP checksum that
// computes to 0 is sent as 0xffff.
func (h *Headers) BuildUDP(frame []byte, id uint16, payload []byte) (int, error) {
	if err := h.check(frame, ProtoUDP, len(payload)); err != nil {
		return 0, err
	}
	n, sum := h.putUDP(frame, id, len(payload))
	_, ps := CopyChecksum(frame[n:], payload)
	c := ^Fold(sum + uint64(ps))
	if c == 0 {
		c = 0xffff // 0 means "no checksum"
	}
	UDP(frame[n-UDPLen:]).SetChecksum(c)
	return n + len(payload), nil
}

// BuildUDPPartial is BuildUDP for a transmit checksum offload
// (CHECKSUM_PARTIAL, AF_XDP TX metadata): the UDP checksum field gets the
// pseudo-header sum, which the kernel or the NIC completes (csum_start is
// Len(ProtoUDP)-8, csum_offset 6); the payload is only copied.
func (h *Headers) BuildUDPPartial(frame []byte, id uint16, payload []byte) (int, error) {
	if err := h.check(frame, ProtoUDP, len(payload)); err != nil {
		return 0, err
	}
	n, _ := h.putUDP(frame, id, len(payload))
	copy(frame[n:], payload)
	ulen := uint64(UDPLen + len(payload))
	ph := uint64(ProtoUDP) + ulen + h.addrSum(frame)
	UDP(frame[n-UDPLen:]).SetChecksum(Fold(ph))
	return n + len(payload), nil
}

// BuildTCP writes the headers of h with the TCP fields t and payload into
// frame, the IPv4 header and TCP checksums filled, and returns the frame's
// length: Len(ProtoTCP)+len(payload). id is the IPv4 identification. With
// an empty payload it makes the header template Segment and
// SegmentPayload take.
func (h *Headers) BuildTCP(frame []byte, id uint16, t TCPFields, payload []byte) (int, error) {
	if err := h.check(frame, ProtoTCP, len(payload)); err != nil {
		return 0, err
	}
	l4 := h.putIP(frame, ProtoTCP, id, TCPMinLen+len(payload))
	tcp := TCP(frame[l4 : l4+TCPMinLen])
	binary.BigEndian.PutUint32(tcp[0:], uint32(h.Src.Port())<<16|uint32(h.Dst.Port()))
	binary.BigEndian.PutUint32(tcp[4:], t.Seq)
	binary.BigEndian.PutUint32(tcp[8:], t.Ack)
	binary.BigEndian.PutUint32(tcp[12:], 5<<28|uint32(t.Flags)<<16|uint32(t.Window))
	binary.BigEndian.PutUint32(tcp[16:], 0) // checksum, urgent pointer
	n := l4 + TCPMinLen
	_, ps := CopyChecksum(frame[n:], payload)
	l4len := uint64(TCPMinLen + len(payload))
	sum := uint64(ProtoTCP) + l4len + h.addrSum(frame) + uint64(Checksum(tcp, 0)) + uint64(ps)
	tcp.SetChecksum(^Fold(sum))
	return n + len(payload), nil
}

// addrSum returns the sum of the addresses in the IP header h wrote into
// frame, as 32-bit words in a wide accumulator.
func (h *Headers) addrSum(frame []byte) uint64 {
	var s uint64
	if h.Dst.Addr().Is4() {
		ip := frame[EthernetLen:]
		return uint64(binary.BigEndian.Uint32(ip[12:])) + uint64(binary.BigEndian.Uint32(ip[16:]))
	}
	ip := frame[EthernetLen:]
	for i := 8; i < 40; i += 4 {
		s += uint64(binary.BigEndian.Uint32(ip[i:]))
	}
	return s
}

// putIP writes the Ethernet and IP headers for a transport segment of
// l4len bytes, the IPv4 header checksum filled, and returns the offset of
// the transport header.
func (h *Headers) putIP(frame []byte, proto uint8, id uint16, l4len int) int {
	copy(frame[0:6], h.DstMAC)
	copy(frame[6:12], h.SrcMAC)
	ttl := h.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip := frame[EthernetLen:]
	src, dst := h.Src.Addr(), h.Dst.Addr()
	if dst.Is4() {
		Ethernet(frame).SetType(EtherTypeIPv4)
		s4, d4 := src.As4(), dst.As4()
		w0 := 0x45<<24 | uint32(h.TOS)<<16 | uint32(IPv4MinLen+l4len)
		w1 := uint32(id)<<16 | IPv4DontFragment // the path MTU is respected, never fragmented
		w2 := uint32(ttl)<<24 | uint32(proto)<<16
		sa, da := binary.BigEndian.Uint32(s4[:]), binary.BigEndian.Uint32(d4[:])
		binary.BigEndian.PutUint32(ip[0:], w0)
		binary.BigEndian.PutUint32(ip[4:], w1)
		hs := uint64(w0) + uint64(w1) + uint64(w2) + uint64(sa) + uint64(da)
		binary.BigEndian.PutUint32(ip[8:], w2|uint32(^Fold(hs)))
		binary.BigEndian.PutUint32(ip[12:], sa)
		binary.BigEndian.PutUint32(ip[16:], da)
		return EthernetLen + IPv4MinLen
	}
	Ethernet(frame).SetType(EtherTypeIPv6)
	binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(h.TOS)<<20)
	binary.BigEndian.PutUint32(ip[4:], uint32(l4len)<<16|uint32(proto)<<8|uint32(ttl))
	s16, d16 := src.As16(), dst.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	return EthernetLen + IPv6Len
}

// putUDP writes the headers for a UDP payload of plen bytes, the IPv4
// header checksum filled and the UDP one 0, and returns their length and
// the UDP checksum's sum so far: pseudo-header and UDP header, as 16-bit
// words added in a wide accumulator (fold it with the payload's).
func (h *Headers) putUDP(frame []byte, id uint16, plen int) (int, uint64) {
	ulen := uint64(UDPLen + plen)
	l4 := h.putIP(frame, ProtoUDP, id, int(ulen))
	sport, dport := h.Src.Port(), h.Dst.Port()
	udp := frame[l4 : l4+UDPLen]
	binary.BigEndian.PutUint32(udp[0:], uint32(sport)<<16|uint32(dport))
	binary.BigEndian.PutUint32(udp[4:], uint32(ulen)<<16)
	// Pseudo-header and UDP header words.
	sum := uint64(ProtoUDP) + ulen + ulen + uint64(sport) + uint64(dport) + h.addrSum(frame)
	return l4 + UDPLen, sum
}
