package xdpnet

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/xdpio/xdpio/offload"
)

// Frame layout: Ethernet II without VLAN tags, IPv4 (options allowed on
// receive, none on send) or IPv6 (no extension headers), UDP; the sizes
// and numbers are offload's, which parses and builds the frames.
const (
	ethLen    = offload.EthernetLen
	ipv4Len   = offload.IPv4MinLen
	ipv6Len   = offload.IPv6Len
	udpLen    = offload.UDPLen
	etherIPv4 = offload.EtherTypeIPv4
	etherIPv6 = offload.EtherTypeIPv6
	protoUDP  = offload.ProtoUDP
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
	// causeMartian: a source address no datagram from the conn's network
	// may carry (see martian), which the kernel drops too.
	causeMartian
	numCauses
)

// RXChecksum chooses how received UDP checksums are treated.
type RXChecksum int

const (
	// RXChecksumVerify verifies the IPv4 header and UDP checksums of
	// every datagram and drops (and counts) those that are wrong,
	// including a checksum a sender on this host left unfinished for an
	// offload (veth with TX checksumming on: Stats' PartialChecksum).
	RXChecksumVerify RXChecksum = iota
	// RXChecksumAcceptPartial verifies like RXChecksumVerify but accepts a
	// UDP checksum field that holds just the pseudo-header sum, as the
	// kernel does for packets that never left the host: for peers on the
	// same machine over veth whose TX checksum offload stays on.
	RXChecksumAcceptPartial
	// RXChecksumNone trusts the frames: no checksum is verified.
	RXChecksumNone
)

// String returns "verify", "accept-partial" or "none".
func (m RXChecksum) String() string {
	switch m {
	case RXChecksumVerify:
		return "verify"
	case RXChecksumAcceptPartial:
		return "accept-partial"
	case RXChecksumNone:
		return "none"
	}
	return "RXChecksum(" + itoa(int(m)) + ")"
}

// rxDatagram is a datagram found in a received frame. payload aliases the
// frame; dst has its address only when the parser's wantDst is set (the
// port always).
type rxDatagram struct {
	src, dst netip.AddrPort
	payload  []byte
	ecn      uint8 // the IP header's ECN bits
	// With the parser's deferSum, the UDP checksum is left for the copy
	// to finish: sum is the pseudo-header's and UDP header's part (fold
	// it with the payload's; 0xffff when right), ph the pseudo-header's
	// alone (what a partial checksum field holds), check the field.
	// deferred says whether there is a sum to finish.
	deferred  bool
	sum       uint64
	ph, check uint16
}

// rxParser finds the datagrams for one conn in received frames: untagged
// Ethernet II frames with an IPv4 or IPv6 UDP datagram to a port from
// port to port+ports-1 and to the local address (an unspecified one takes
// any address of its family; of both for IPv6, like a dual-stack socket),
// checksums verified as mode says. What it compares against is
// precomputed, so that parse touches only the frame.
type rxParser struct {
	match   uint8 // matchAny, matchAny4, matchAny46, matchExact4, matchExact6
	local4  [4]byte
	local16 [16]byte
	port    uint16
	ports   int
	mode    RXChecksum
	wantDst bool // fill rxDatagram.dst's address too
	// view, when set, is the conn's view of this host: frames must be to
	// its MAC and (for an unspecified local address) to one of the
	// interface's addresses, and not from one of the namespace's IPv4
	// addresses. Without it only the fixed martian rules apply.
	view *atomic.Pointer[localView]
	// zone is the interface's name, the zone of link-local sources.
	zone string
	// deferSum leaves the UDP checksum of the payload to the caller,
	// which sums it while it copies it (finishSum): one pass instead of
	// two.
	deferSum bool
}

const (
	matchAny = iota
	matchAny4
	matchAny46
	matchExact4
	matchExact6
)

// newRXParser returns the parser for a conn on local (invalid: any
// address) and ports ports from port on.
func newRXParser(local netip.Addr, port uint16, ports int, mode RXChecksum) rxParser {
	p := rxParser{port: port, ports: max(ports, 1), mode: mode}
	switch {
	case !local.IsValid():
		p.match = matchAny
	case local.IsUnspecified() && local.Is4():
		p.match = matchAny4
	case local.IsUnspecified():
		p.match = matchAny46
	case local.Is4():
		p.match, p.local4 = matchExact4, local.As4()
	default:
		p.match, p.local16 = matchExact6, local.As16()
	}
	return p
}

// parseRX is the parser of newRXParser(local, port, 1, mode), with the
// destination address filled in: for tests.
func parseRX(f []byte, local netip.Addr, port uint16, mode RXChecksum) (rxDatagram, cause) {
	return parseRXPorts(f, local, port, 1, mode)
}

// parseRXPorts is parseRX for a block of ports.
func parseRXPorts(f []byte, local netip.Addr, port uint16, ports int, mode RXChecksum) (rxDatagram, cause) {
	p := newRXParser(local, port, ports, mode)
	p.wantDst = true
	var d rxDatagram
	c := p.parse(f, &d)
	return d, c
}

// parse looks at a received frame and fills d with its datagram. It never
// writes to f and does not allocate. offload.Parse finds the headers; the
// rules on top are this package's: no VLAN tags, no IPv6 extension
// headers, no IPv4 fragments.
func (p *rxParser) parse(f []byte, d *rxDatagram) cause {
	if len(f) < ethLen {
		return causeMalformed
	}
	if et := offload.Ethernet(f).Type(); et != etherIPv4 && et != etherIPv6 {
		return causeNotIP // VLAN-tagged frames included
	}
	var layout offload.Layout
	lo := &layout
	r := lo.Parse(f)
	switch {
	case lo.IPv6 && lo.ExtHeaders > 0:
		return causeNotUDP
	case r != offload.ReasonNone:
		return causeMalformed
	case lo.Fragment:
		return causeFragment
	case lo.Proto != protoUDP:
		return causeNotUDP
	}
	var v *localView
	if p.view != nil {
		if v = p.view.Load(); v == nil || [6]byte(f[0:6]) != v.mac {
			return causeNotForUs // another host's frame (or no view yet)
		}
	}
	var pseudo uint64 // the pseudo-header's sum but for the length, 0: no UDP checksum to verify
	var why cause
	if !lo.IPv6 {
		pseudo, why = p.parse4(f, lo, v, d)
	} else {
		pseudo, why = p.parse6(f, lo, v, d)
	}
	if why != causeOK {
		return why
	}
	// The UDP header: port, length, and the checksum, verified here or
	// left to the copy (deferSum). (One function with the parse: a call
	// more per datagram cost xdpnet 2 ns of its 3% budget.)
	l4 := f[lo.L4:lo.End]
	dport := binary.BigEndian.Uint16(l4[2:])
	if dport < p.port || int(dport-p.port) >= p.ports {
		return causeNotForUs
	}
	if !p.wantDst {
		d.dst = netip.AddrPortFrom(netip.Addr{}, dport)
	}
	ulen := int(binary.BigEndian.Uint16(l4[4:]))
	if ulen < udpLen || ulen > len(l4) {
		return causeMalformed
	}
	l4 = l4[:ulen]
	d.deferred = false
	if pseudo != 0 {
		ph := offload.Fold(pseudo + uint64(ulen))
		if p.deferSum {
			d.deferred = true
			d.ph, d.check = ph, binary.BigEndian.Uint16(l4[6:])
			d.sum = uint64(ph) + uint64(binary.BigEndian.Uint32(l4[0:])) + uint64(binary.BigEndian.Uint32(l4[4:]))
			d.payload = l4[udpLen:]
			return causeOK
		}
		if offload.Checksum(l4, ph) != 0xffff {
			// A sender that left the sum to an offload wrote the
			// pseudo-header sum into the field and nothing more.
			if binary.BigEndian.Uint16(l4[6:]) != ph {
				return causeBadChecksum
			}
			if p.mode != RXChecksumAcceptPartial {
				return causePartialChecksum
			}
		}
	}
	d.payload = l4[udpLen:]
	return causeOK
}

// parse4 checks an IPv4 header (addresses, source, header checksum) and
// fills d's source and ECN; it returns the pseudo-header's sum but for
// the length (0: no UDP checksum to verify).
func (p *rxParser) parse4(f []byte, lo *offload.Layout, v *localView, d *rxDatagram) (uint64, cause) {
	ip := offload.IPv4(f[lo.L3:lo.L4])
	switch p.match {
	case matchExact4:
		if ip.Dst() != p.local4 {
			return 0, causeNotForUs
		}
	case matchExact6:
		return 0, causeNotForUs
	default:
		if v != nil && !v.has4(ip.Dst()) {
			return 0, causeNotForUs
		}
	}
	if martian4(ip.Src(), v) {
		return 0, causeMartian
	}
	verify := p.mode != RXChecksumNone
	if verify {
		// The header's words, end-around: 0xffff when right.
		var s uint64
		for i := 0; i < len(ip); i += 4 {
			s += uint64(binary.BigEndian.Uint32(ip[i:]))
		}
		if offload.Fold(s) != 0xffff {
			return 0, causeBadChecksum
		}
	}
	if lo.Payload == 0 {
		return 0, causeMalformed
	}
	u := offload.UDP(f[lo.L4:lo.End])
	d.src = netip.AddrPortFrom(netip.AddrFrom4(ip.Src()), u.SrcPort())
	d.ecn = ip.TOS() & 3
	if p.wantDst {
		d.dst = netip.AddrPortFrom(netip.AddrFrom4(ip.Dst()), u.DstPort())
	}
	if verify && u.Checksum() != 0 {
		return uint64(binary.BigEndian.Uint32(ip[12:])) + uint64(binary.BigEndian.Uint32(ip[16:])) + protoUDP, causeOK
	}
	return 0, causeOK
}

// parse6 is parse4 for IPv6: a link-local source gets the conn's
// interface as its zone, and a zero UDP checksum is refused.
func (p *rxParser) parse6(f []byte, lo *offload.Layout, v *localView, d *rxDatagram) (uint64, cause) {
	ip := offload.IPv6(f[lo.L3:lo.L4])
	switch p.match {
	case matchExact6:
		if ip.Dst() != p.local16 {
			return 0, causeNotForUs
		}
	case matchExact4, matchAny4:
		return 0, causeNotForUs
	default:
		if v != nil && !v.has16(ip.Dst()) {
			return 0, causeNotForUs
		}
	}
	src := ip.Src()
	if martian16(&src) {
		return 0, causeMartian
	}
	if lo.Payload == 0 {
		return 0, causeMalformed
	}
	u := offload.UDP(f[lo.L4:lo.End])
	sa := netip.AddrFrom16(src)
	if src[0] == 0xfe && src[1]&0xc0 == 0x80 {
		sa = sa.WithZone(p.zone) // link-local: on the conn's interface
	}
	d.src = netip.AddrPortFrom(sa, u.SrcPort())
	d.ecn = ip.TrafficClass() & 3
	if p.wantDst {
		d.dst = netip.AddrPortFrom(netip.AddrFrom16(ip.Dst()), u.DstPort())
	}
	if p.mode == RXChecksumNone {
		return 0, causeOK
	}
	if u.Checksum() == 0 {
		return 0, causeZeroChecksum6
	}
	pseudo := uint64(protoUDP)
	for i := 8; i < 40; i += 4 {
		pseudo += uint64(binary.BigEndian.Uint32(ip[i:]))
	}
	return pseudo, causeOK
}

// finishSum finishes a deferred UDP checksum with the payload's sum
// (folded, as offload.Checksum and CopyChecksum give it) and returns the
// verdict: causeOK, causeBadChecksum or causePartialChecksum.
func (p *rxParser) finishSum(d *rxDatagram, payloadSum uint16) cause {
	if !d.deferred || offload.Fold(d.sum+uint64(payloadSum)) == 0xffff {
		return causeOK
	}
	if d.check != d.ph {
		return causeBadChecksum
	}
	if p.mode != RXChecksumAcceptPartial {
		return causePartialChecksum
	}
	return causeOK
}

// headerLen returns the length of the headers for the family of dst.
func headerLen(dst netip.Addr) int {
	h := offload.Headers{Dst: netip.AddrPortFrom(dst, 0)}
	return h.Len(offload.ProtoUDP)
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

// unmapAP unmaps an IPv4-mapped address, keeping the port.
func unmapAP(a netip.AddrPort) netip.AddrPort {
	if !a.IsValid() {
		return a
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
