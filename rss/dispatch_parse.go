package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/internal/errs"
)

// ErrNotIP reports a frame that carries neither IPv4 nor IPv6 (ARP, LLDP,
// ...): it has no RSS flow key.
var ErrNotIP = errors.New("not an IP frame")

// ErrMalformed reports a frame whose headers are cut short or inconsistent.
var ErrMalformed = errs.ErrMalformed

// EtherType values the parser knows.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100 // 802.1Q
	etherTypeQinQ  = 0x88a8 // 802.1ad service tag
	etherTypeQinQ1 = 0x9100 // pre-standard double tagging

	protoTCP = 6
	protoUDP = 17

	maxVLANTags  = 2
	maxIPv6Chain = 8 // extension headers followed before giving up on ports
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
// extension headers skipped), then the ports of TCP and UDP.
//
// Like RSS hardware (and Microsoft's hash types), fragments of IPv4 and
// IPv6 datagrams, the first one included, and other protocols hash on the
// addresses alone: Ports is false for them.
//
// Frames without an IP header return an error wrapping ErrNotIP; frames
// whose headers are cut short or inconsistent one wrapping ErrMalformed.
func ParseFlowKey(frame []byte) (FlowKey, error) {
	fi, err := parseFlow(frame)
	if err != nil {
		return FlowKey{}, fmt.Errorf("parse flow key: %w", err)
	}
	return flowKeyOf(frame, fi), nil
}

// parseFlow finds the flow fields of an Ethernet frame. Its errors do not
// name the operation; callers add it.
func parseFlow(b []byte) (flowInfo, error) {
	var fi flowInfo
	if len(b) < 14 {
		return fi, fmt.Errorf("%d bytes, shorter than an Ethernet header: %w", len(b), ErrMalformed)
	}
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	for tags := 0; et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQ1; tags++ {
		if tags == maxVLANTags {
			return fi, fmt.Errorf("more than %d VLAN tags: %w", maxVLANTags, ErrNotIP)
		}
		off += 4
		if len(b) < off+2 {
			return fi, fmt.Errorf("VLAN tag at offset %d cut short at %d bytes: %w", off-4, len(b), ErrMalformed)
		}
		et = binary.BigEndian.Uint16(b[off:])
	}
	off += 2
	fi.l3 = off
	switch et {
	case etherTypeIPv4:
		return parseIPv4(b, fi)
	case etherTypeIPv6:
		return parseIPv6(b, fi)
	}
	return fi, fmt.Errorf("EtherType %#04x: %w", et, ErrNotIP)
}

func parseIPv4(b []byte, fi flowInfo) (flowInfo, error) {
	off := fi.l3
	ip := b[off:]
	if len(ip) < 20 {
		return fi, fmt.Errorf("IPv4 header at offset %d cut short at %d bytes: %w", off, len(ip), ErrMalformed)
	}
	if v := ip[0] >> 4; v != 4 {
		return fi, fmt.Errorf("IPv4 EtherType with IP version %d at offset %d: %w", v, off, ErrMalformed)
	}
	hl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	switch {
	case hl < 20:
		return fi, fmt.Errorf("IPv4 header length %d at offset %d: %w", hl, off, ErrMalformed)
	case total < hl:
		return fi, fmt.Errorf("IPv4 total length %d below header length %d at offset %d: %w", total, hl, off, ErrMalformed)
	case total > len(ip):
		return fi, fmt.Errorf("IPv4 total length %d exceeds the %d bytes left at offset %d: %w", total, len(ip), off, ErrMalformed)
	}
	fi.proto = ip[9]
	frag := binary.BigEndian.Uint16(ip[6:])
	if frag&0x3fff != 0 { // more-fragments flag or an offset: a fragment
		return fi, nil
	}
	return l4Ports(b, fi, off+hl, off+total)
}

func parseIPv6(b []byte, fi flowInfo) (flowInfo, error) {
	off := fi.l3
	ip := b[off:]
	if len(ip) < 40 {
		return fi, fmt.Errorf("IPv6 header at offset %d cut short at %d bytes: %w", off, len(ip), ErrMalformed)
	}
	if v := ip[0] >> 4; v != 6 {
		return fi, fmt.Errorf("IPv6 EtherType with IP version %d at offset %d: %w", v, off, ErrMalformed)
	}
	fi.v6 = true
	end := off + 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if end > len(b) {
		// A payload length of 0 with a jumbo option is not supported here
		// either: both leave the addresses usable but the ports in doubt.
		return fi, fmt.Errorf("IPv6 payload length %d exceeds the %d bytes left at offset %d: %w", end-off-40, len(b)-off-40, off, ErrMalformed)
	}
	next := ip[6]
	l4 := off + 40
	for range maxIPv6Chain {
		switch next {
		case 0, 43, 60, 51: // hop-by-hop, routing, destination options, AH
			if l4+2 > end {
				return fi, fmt.Errorf("IPv6 extension header %d at offset %d cut short: %w", next, l4, ErrMalformed)
			}
			n := (int(b[l4+1]) + 1) * 8
			if next == 51 {
				n = (int(b[l4+1]) + 2) * 4
			}
			if l4+n > end {
				return fi, fmt.Errorf("IPv6 extension header %d of %d bytes at offset %d exceeds the payload: %w", next, n, l4, ErrMalformed)
			}
			next = b[l4]
			l4 += n
			continue
		case 44: // fragment: hash the addresses alone
			if l4+8 > end {
				return fi, fmt.Errorf("IPv6 fragment header at offset %d cut short: %w", l4, ErrMalformed)
			}
			fi.proto = b[l4]
			return fi, nil
		}
		fi.proto = next
		return l4Ports(b, fi, l4, end)
	}
	// A chain longer than this parser follows: addresses only.
	fi.proto = next
	return fi, nil
}

// l4Ports records the ports of a TCP or UDP header at l4 (the IP payload
// ends at end).
func l4Ports(b []byte, fi flowInfo, l4, end int) (flowInfo, error) {
	if fi.proto != protoTCP && fi.proto != protoUDP {
		return fi, nil
	}
	if l4+4 > end {
		return fi, fmt.Errorf("protocol %d header at offset %d cut short at %d bytes: %w", fi.proto, l4, end-l4, ErrMalformed)
	}
	fi.l4 = l4
	fi.ports = true
	return fi, nil
}

// HashFrame returns the hash of an Ethernet frame's flow under
// transformation s, reading the fields in place (no FlowKey is built for
// SymmetricNone): the value a NIC with this key reports for the frame. It
// fails like ParseFlowKey.
func (t *Toeplitz) HashFrame(frame []byte, s Symmetric) (uint32, error) {
	fi, err := parseFlow(frame)
	if err != nil {
		return 0, fmt.Errorf("hash frame: %w", err)
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
