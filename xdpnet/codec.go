package xdpnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/offload"
)

// The frame codec the conn uses, for programs that move frames with
// package xsk (or another AF_XDP library) themselves and want UDP
// datagrams built and checked the same way.

// Header is what WriteFrame puts in front of a UDP payload: Ethernet II,
// IPv4 (20 bytes, DF set) or IPv6 (40 bytes, no extension headers), UDP.
type Header struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.AddrPort
	// TTL is the IPv4 TTL or IPv6 hop limit; 0 is taken as 64.
	TTL uint8
	// TOS is the IPv4 type of service or the IPv6 traffic class.
	TOS uint8
	// ID is the IPv4 identification.
	ID uint16
}

// HeaderLen returns the length of the headers WriteFrame writes for a
// datagram to dst: 42 bytes for IPv4, 62 for IPv6.
func HeaderLen(dst netip.Addr) int { return headerLen(dst.Unmap()) }

// WriteFrame writes the headers of h and payload into frame, with the
// IPv4 header and UDP checksums filled (the payload is summed while it is
// copied), and returns the frame's length: offload.Headers.BuildUDP does
// the work. It fails when the addresses
// are not of one family, a MAC address is not 6 bytes, or frame is too
// short. It does not allocate.
func WriteFrame(frame []byte, h *Header, payload []byte) (int, error) {
	th := offload.Headers{SrcMAC: h.SrcMAC, DstMAC: h.DstMAC, Src: unmapAP(h.Src), Dst: unmapAP(h.Dst), TTL: h.TTL, TOS: h.TOS}
	n, err := th.BuildUDP(frame, h.ID, payload)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return n, nil
}

// Datagram is a UDP datagram ParseFrame found in a frame; Payload aliases
// the frame.
type Datagram struct {
	Src, Dst netip.AddrPort
	Payload  []byte
}

// ErrNotDatagram is wrapped by ParseFrame's errors: the frame carries no
// UDP datagram this package delivers, and the error says why.
var ErrNotDatagram = errors.New("not a UDP datagram")

var causeErrs = [numCauses]error{
	causeNotIP:           fmt.Errorf("%w: neither IPv4 nor IPv6, or VLAN-tagged", ErrNotDatagram),
	causeMalformed:       fmt.Errorf("%w: truncated header or inconsistent lengths", ErrNotDatagram),
	causeFragment:        fmt.Errorf("%w: an IPv4 fragment", ErrNotDatagram),
	causeNotUDP:          fmt.Errorf("%w: another protocol, or IPv6 extension headers", ErrNotDatagram),
	causeNotForUs:        fmt.Errorf("%w: to another address or port", ErrNotDatagram),
	causeBadChecksum:     fmt.Errorf("%w: wrong IPv4 header or UDP checksum", ErrNotDatagram),
	causePartialChecksum: fmt.Errorf("%w: UDP checksum left unfinished for an offload (CHECKSUM_PARTIAL)", ErrNotDatagram),
	causeZeroChecksum6:   fmt.Errorf("%w: UDP over IPv6 without a checksum", ErrNotDatagram),
	causeOtherPeer:       fmt.Errorf("%w: from another peer", ErrNotDatagram),
	causeMartian:         fmt.Errorf("%w: from a martian source (loopback, unspecified, multicast or broadcast)", ErrNotDatagram),
}

// ParseFrame finds the UDP datagram in a received frame: an untagged
// Ethernet II frame with IPv4 (options allowed, not a fragment) or IPv6
// (no extension headers), lengths consistent, checksums verified as mode
// says. It never writes to frame and does not allocate; the error, which
// wraps ErrNotDatagram, says why a frame was refused.
func ParseFrame(frame []byte, mode RXChecksum) (Datagram, error) {
	d, why := parseRXPorts(frame, netip.Addr{}, 0, 65536, mode)
	if why != causeOK {
		return Datagram{}, causeErrs[why]
	}
	return Datagram{Src: d.src, Dst: d.dst, Payload: d.payload}, nil
}

func unmapAP(a netip.AddrPort) netip.AddrPort {
	if !a.IsValid() {
		return a
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
