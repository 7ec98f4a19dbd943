package xdpnet

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/offload"
)

// Frame layout: Ethernet II without VLAN tags, IPv4 (options allowed on
// receive, none on send) or IPv6 (no extension headers), UDP.
const (
	ethLen    = 14
	ipv4Len   = 20
	ipv6Len   = 40
	udpLen    = 8
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	protoUDP  = 17

	// maxHeader is the longest header this package writes.
	maxHeader = ethLen + ipv6Len + udpLen
)

// cause is why a received frame was not delivered; causeOK: it was.
type cause uint8

const (
	causeOK cause = iota
	// causeNotIP: not IPv4 or IPv6, or carrying a VLAN tag (such frames
	// belong to a VLAN interface, not to this one).
	causeNotIP
	// causeMalformed: a header is truncated or its lengths are
	// inconsistent.
	causeMalformed
	// causeFragment: an IPv4 fragment (the filter leaves them to the
	// kernel, which reassembles them).
	causeFragment
	// causeNotUDP: another transport protocol, or IPv6 extension headers.
	causeNotUDP
	// causeNotForUs: to another address or port.
	causeNotForUs
	// causeBadChecksum: the IPv4 header or UDP checksum is wrong.
	causeBadChecksum
	// causePartialChecksum: the UDP checksum field holds only the
	// pseudo-header sum: a sender on this host left it to a checksum
	// offload that never ran (veth, CHECKSUM_PARTIAL).
	causePartialChecksum
	// causeZeroChecksum6: UDP over IPv6 without a checksum (RFC 8200
	// section 8.1: discarded).
	causeZeroChecksum6
	// causeOtherPeer: a connected conn got a datagram from another peer.
	causeOtherPeer
	numCauses
)

// RxChecksum chooses how received UDP checksums are treated.
type RxChecksum int

const (
	// RxChecksumVerify verifies the IPv4 header and UDP checksums of
	// every datagram and drops (and counts) those that are wrong,
	// including a checksum a sender on this host left unfinished for an
	// offload (veth with TX checksumming on: Stats' PartialChecksum).
	RxChecksumVerify RxChecksum = iota
	// RxChecksumAcceptPartial verifies like RxChecksumVerify but accepts a
	// UDP checksum field that holds just the pseudo-header sum, as the
	// kernel does for packets that never left the host: for peers on the
	// same machine over veth whose TX checksum offload stays on.
	RxChecksumAcceptPartial
	// RxChecksumNone trusts the frames: no checksum is verified.
	RxChecksumNone
)

// String returns "verify", "accept-partial" or "none".
func (m RxChecksum) String() string {
	switch m {
	case RxChecksumVerify:
		return "verify"
	case RxChecksumAcceptPartial:
		return "accept-partial"
	case RxChecksumNone:
		return "none"
	}
	return "RxChecksum(" + itoa(int(m)) + ")"
}

// rxDatagram is a datagram found in a received frame. payload aliases the
// frame.
type rxDatagram struct {
	src, dst netip.AddrPort
	payload  []byte
}

// parseRx looks at a received frame: an untagged Ethernet II frame with
// an IPv4 or IPv6 UDP datagram to a port from port to port+ports-1 (ports
// 0 counts as 1) and, when local is valid, to that
// address (an unspecified local takes any address of its family, or of
// both for an unspecified IPv6 one). It verifies checksums as mode says.
// It never writes to f and does not allocate.
func parseRx(f []byte, local netip.Addr, port uint16, mode RxChecksum) (rxDatagram, cause) {
	return parseRxPorts(f, local, port, 1, mode)
}

// parseRxPorts is parseRx for a block of ports.
func parseRxPorts(f []byte, local netip.Addr, port uint16, ports int, mode RxChecksum) (rxDatagram, cause) {
	var d rxDatagram
	if len(f) < ethLen {
		return d, causeMalformed
	}
	var l4 []byte
	var pseudo uint16
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherIPv4:
		ip := f[ethLen:]
		if len(ip) < ipv4Len {
			return d, causeMalformed
		}
		if ip[0]>>4 != 4 {
			return d, causeMalformed
		}
		ihl := int(ip[0]&0x0f) * 4
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		if ihl < ipv4Len || tot < ihl || tot > len(ip) {
			return d, causeMalformed
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return d, causeFragment
		}
		if ip[9] != protoUDP {
			return d, causeNotUDP
		}
		dst := netip.AddrFrom4([4]byte(ip[16:20]))
		if !accepts(local, dst) {
			return d, causeNotForUs
		}
		if mode != RxChecksumNone && offload.Checksum(ip[:ihl], 0) != 0xffff {
			return d, causeBadChecksum
		}
		l4 = ip[ihl:tot]
		if len(l4) < udpLen {
			return d, causeMalformed
		}
		d.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(l4[0:]))
		d.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
		if mode != RxChecksumNone && binary.BigEndian.Uint16(l4[6:]) != 0 {
			pseudo = offload.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), protoUDP, 0)
		}
	case etherIPv6:
		ip := f[ethLen:]
		if len(ip) < ipv6Len {
			return d, causeMalformed
		}
		if ip[0]>>4 != 6 {
			return d, causeMalformed
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if ipv6Len+plen > len(ip) {
			return d, causeMalformed
		}
		if ip[6] != protoUDP {
			return d, causeNotUDP
		}
		dst := netip.AddrFrom16([16]byte(ip[24:40]))
		if !accepts(local, dst) {
			return d, causeNotForUs
		}
		l4 = ip[ipv6Len : ipv6Len+plen]
		if len(l4) < udpLen {
			return d, causeMalformed
		}
		d.src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8:24])), binary.BigEndian.Uint16(l4[0:]))
		d.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
		if mode != RxChecksumNone {
			if binary.BigEndian.Uint16(l4[6:]) == 0 {
				return d, causeZeroChecksum6
			}
			pseudo = offload.PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), protoUDP, 0)
		}
	default:
		return d, causeNotIP
	}
	if p := d.dst.Port(); p < port || int(p-port) >= max(ports, 1) {
		return d, causeNotForUs
	}
	ulen := int(binary.BigEndian.Uint16(l4[4:]))
	if ulen < udpLen || ulen > len(l4) {
		return d, causeMalformed
	}
	l4 = l4[:ulen]
	if pseudo != 0 {
		ph := offload.Combine(pseudo, uint16(ulen))
		if offload.Checksum(l4, ph) != 0xffff {
			// A sender that left the sum to an offload wrote the
			// pseudo-header sum into the field and nothing more.
			if binary.BigEndian.Uint16(l4[6:]) != ph {
				return d, causeBadChecksum
			}
			if mode != RxChecksumAcceptPartial {
				return d, causePartialChecksum
			}
		}
	}
	d.payload = l4[udpLen:]
	return d, causeOK
}

// accepts reports whether a datagram to dst is for the local address
// local: the same address, or any address of the family when local is
// unspecified (an unspecified IPv6 address takes IPv4 too, like a
// dual-stack socket).
func accepts(local, dst netip.Addr) bool {
	switch {
	case !local.IsValid():
		return true
	case local.IsUnspecified():
		return local.Is6() || dst.Is4()
	}
	return local == dst
}

// txHeader describes the headers of datagrams from one source to one
// destination; writeHeader writes them in front of a payload.
type txHeader struct {
	srcMAC, dstMAC net.HardwareAddr
	src, dst       netip.AddrPort
	ttl, tos       uint8
}

// headerLen returns the length of the headers for the family of dst.
func headerLen(dst netip.Addr) int {
	if dst.Is4() {
		return ethLen + ipv4Len + udpLen
	}
	return ethLen + ipv6Len + udpLen
}

// writeDatagram writes the Ethernet, IP and UDP headers of h and payload
// into frame, fills both checksums (summing the payload while it copies
// it), and returns the frame's length. frame must hold
// headerLen(h.dst.Addr())+len(payload) bytes; id is the IPv4
// identification.
func writeDatagram(frame []byte, h *txHeader, id uint16, payload []byte) int {
	src, dst := h.src.Addr(), h.dst.Addr()
	copy(frame[0:6], h.dstMAC)
	copy(frame[6:12], h.srcMAC)
	ip := frame[ethLen:]
	ulen := udpLen + len(payload)
	var udp []byte
	var pseudo uint16
	ipHdr := ipv6Len
	if dst.Is4() {
		ipHdr = ipv4Len
		binary.BigEndian.PutUint16(frame[12:], etherIPv4)
		ip[0] = 0x45
		ip[1] = h.tos
		binary.BigEndian.PutUint16(ip[2:], uint16(ipv4Len+ulen))
		binary.BigEndian.PutUint16(ip[4:], id)
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF: the path MTU is respected, never fragmented
		ip[8] = h.ttl
		ip[9] = protoUDP
		ip[10], ip[11] = 0, 0
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^offload.Checksum(ip[:ipv4Len], 0))
		udp = ip[ipv4Len:]
		pseudo = offload.PseudoHeaderIPv4(s4, d4, protoUDP, uint16(ulen))
	} else {
		binary.BigEndian.PutUint16(frame[12:], etherIPv6)
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(h.tos)<<20)
		binary.BigEndian.PutUint16(ip[4:], uint16(ulen))
		ip[6] = protoUDP
		ip[7] = h.ttl
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
		udp = ip[ipv6Len:]
		pseudo = offload.PseudoHeaderIPv6(s16, d16, protoUDP, uint32(ulen))
	}
	binary.BigEndian.PutUint16(udp[0:], h.src.Port())
	binary.BigEndian.PutUint16(udp[2:], h.dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(ulen))
	udp[6], udp[7] = 0, 0
	_, sum := offload.CopyChecksum(udp[udpLen:], payload)
	sum = offload.Combine(offload.Combine(sum, pseudo), offload.Checksum(udp[:udpLen], 0))
	c := ^sum
	if c == 0 {
		c = 0xffff // 0 means "no checksum"
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return ethLen + ipHdr + ulen
}

// writeDatagramPartial is writeDatagram for a checksum offload: the UDP
// checksum field gets the pseudo-header sum (CHECKSUM_PARTIAL), and the
// kernel or the NIC adds the rest.
func writeDatagramPartial(frame []byte, h *txHeader, id uint16, payload []byte) int {
	n := writeDatagram(frame, h, id, payload)
	udp := frame[headerLen(h.dst.Addr())-udpLen:]
	ulen := uint16(udpLen + len(payload))
	var ph uint16
	if h.dst.Addr().Is4() {
		ph = offload.PseudoHeaderIPv4(h.src.Addr().As4(), h.dst.Addr().As4(), protoUDP, ulen)
	} else {
		ph = offload.PseudoHeaderIPv6(h.src.Addr().As16(), h.dst.Addr().As16(), protoUDP, uint32(ulen))
	}
	binary.BigEndian.PutUint16(udp[6:], ph)
	return n
}

func itoa(v int) string {
	var b [20]byte
	i := len(b)
	neg := v < 0
	if neg {
		v = -v
	}
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
