package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/offload"
)

// ErrNotIP reports a frame that carries neither IPv4 nor IPv6 (ARP, LLDP,
// ...): it has no RSS flow key.
var ErrNotIP = errors.New("not an IP frame")

// ErrMalformed reports a frame whose headers are cut short or inconsistent.
var ErrMalformed = errs.ErrMalformed

// Limits of the flow parse on top of offload.Parse's.
const (
	protoTCP = offload.ProtoTCP
	protoUDP = offload.ProtoUDP

	// maxVLANTags: frames with more tags are not hashed as IP (NICs
	// parse at most a double tag).
	maxVLANTags = 2
)

// flowInfo is where a frame's flow fields are: a parse without copies.
type flowInfo struct {
	l3    int  // offset of the IP header
	v6    bool // IPv6 rather than IPv4
	l4    int  // offset of the TCP/UDP header; valid when ports
	ports bool // TCP or UDP, not a fragment: ports take part in the hash
	proto uint8
}

// ParseFlowKey returns the RSS flow key of an Ethernet frame: Ethernet II
// with up to two VLAN tags (802.1Q, 802.1ad), then IPv4 (options skipped)
// or IPv6 (hop-by-hop, routing, destination options, fragment and AH
// extension headers skipped), then the ports of TCP and UDP. The headers
// are found by offload.Parse.
//
// Like RSS hardware (and Microsoft's hash types), fragments of IPv4 and
// IPv6 datagrams, the first one included, and other protocols hash on the
// addresses alone: Ports is false for them, as for a chain of more than
// offload.MaxExtHeaders IPv6 extension headers (Proto is then the header
// where the walk stopped).
//
// Frames without an IP header return an error wrapping ErrNotIP; frames
// whose headers are cut short or inconsistent one wrapping ErrMalformed.
func ParseFlowKey(frame []byte) (FlowKey, error) {
	var lo offload.Layout
	fi, r := parseFlow(frame, &lo)
	if r != flowOK {
		return FlowKey{}, fmt.Errorf("parse flow key: %w", flowErr(frame, &lo, r))
	}
	return flowKeyOf(frame, fi), nil
}

// flowResult is parseFlow's verdict, without an allocated error.
type flowResult uint8

const (
	flowOK flowResult = iota
	flowNotIP
	flowTooManyTags
	flowMalformed
	flowShortPorts
)

// parseFlow finds the flow fields of an Ethernet frame, parsing into lo
// (no Layout is copied on the hot path). It does not allocate; flowErr
// describes a failure.
func parseFlow(b []byte, lo *offload.Layout) (flowInfo, flowResult) {
	var fi flowInfo
	r := lo.ParseIP(b) // the ports are checked against End below

	switch {
	case r == offload.ReasonNotIP:
		return fi, flowNotIP
	case r == offload.ReasonVLANTags || lo.VLANTags > maxVLANTags ||
		lo.VLANTags == maxVLANTags && r == offload.ReasonShortEthernet:
		// A third tag, whole or cut: not hashed as IP.
		return fi, flowTooManyTags
	case r == offload.ReasonExtHeaderChain:
		// A chain longer than the parser follows: addresses only.
	case r != offload.ReasonNone:
		return fi, flowMalformed
	}
	fi.l3, fi.v6, fi.proto = lo.L3, lo.IPv6, lo.Proto
	if r != offload.ReasonNone || lo.Fragment || (fi.proto != protoTCP && fi.proto != protoUDP) {
		return fi, flowOK
	}
	if lo.L4+4 > lo.End {
		return fi, flowShortPorts
	}
	fi.l4 = lo.L4
	fi.ports = true
	return fi, flowOK
}

// flowErr is the error of a parseFlow failure; it does not name the
// operation, callers add it.
func flowErr(b []byte, lo *offload.Layout, r flowResult) error {
	switch r {
	case flowNotIP:
		return fmt.Errorf("EtherType %#04x: %w", lo.EtherType, ErrNotIP)
	case flowTooManyTags:
		return fmt.Errorf("more than %d VLAN tags: %w", maxVLANTags, ErrNotIP)
	case flowShortPorts:
		return fmt.Errorf("protocol %d header at offset %d cut short at %d bytes: %w", lo.Proto, lo.L4, lo.End-lo.L4, ErrMalformed)
	}
	_, why := offload.Parse(b) // again, on the error path only: the reason
	return fmt.Errorf("%s (IP header at offset %d): %w", why, lo.L3, ErrMalformed)
}

// HashFrame returns the hash of an Ethernet frame's flow under
// transformation s, reading the fields in place (no FlowKey is built for
// SymmetricNone): the value a NIC with this key reports for the frame. It
// fails like ParseFlowKey.
func (t *Toeplitz) HashFrame(frame []byte, s Symmetric) (uint32, error) {
	var lo offload.Layout
	fi, r := parseFlow(frame, &lo)
	if r != flowOK {
		return 0, fmt.Errorf("hash frame: %w", flowErr(frame, &lo, r))
	}
	return t.hashFrame(frame, fi, s), nil
}

// hashFrame returns the hash of a parsed frame's flow, read straight from
// the frame bytes (the same value as HashFlow of ParseFlowKey's key).
func (t *Toeplitz) hashFrame(b []byte, fi flowInfo, s Symmetric) uint32 {
	if s != SymmetricNone {
		return t.HashFlow(flowKeyOf(b, fi), s)
	}
	if fi.v6 {
		src, dst := [16]byte(b[fi.l3+8:fi.l3+24]), [16]byte(b[fi.l3+24:fi.l3+40])
		if fi.ports {
			return t.HashIPv6Ports(src, dst, binary.BigEndian.Uint16(b[fi.l4:]), binary.BigEndian.Uint16(b[fi.l4+2:]))
		}
		return t.HashIPv6(src, dst)
	}
	src, dst := [4]byte(b[fi.l3+12:fi.l3+16]), [4]byte(b[fi.l3+16:fi.l3+20])
	if fi.ports {
		return t.HashIPv4Ports(src, dst, binary.BigEndian.Uint16(b[fi.l4:]), binary.BigEndian.Uint16(b[fi.l4+2:]))
	}
	return t.HashIPv4(src, dst)
}

// flowKeyOf builds the FlowKey of a parsed frame.
func flowKeyOf(b []byte, fi flowInfo) FlowKey {
	var k FlowKey
	if fi.v6 {
		k.Src = netip.AddrFrom16([16]byte(b[fi.l3+8 : fi.l3+24]))
		k.Dst = netip.AddrFrom16([16]byte(b[fi.l3+24 : fi.l3+40]))
	} else {
		k.Src = netip.AddrFrom4([4]byte(b[fi.l3+12 : fi.l3+16]))
		k.Dst = netip.AddrFrom4([4]byte(b[fi.l3+16 : fi.l3+20]))
	}
	k.Proto = fi.proto
	if fi.ports {
		k.Ports = true
		k.SrcPort = binary.BigEndian.Uint16(b[fi.l4:])
		k.DstPort = binary.BigEndian.Uint16(b[fi.l4+2:])
	}
	return k
}
