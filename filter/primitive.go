package filter

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

func (p *parser) ldb(off uint32) []bpf.Instruction {
	return []bpf.Instruction{bpf.LoadAbsolute{Off: off + p.off, Size: 1}}
}

func (p *parser) ldh(off uint32) []bpf.Instruction {
	return []bpf.Instruction{bpf.LoadAbsolute{Off: off + p.off, Size: 2}}
}

// etherType: the EtherType (after the VLAN tags vlan keywords stepped
// over) equals t.
func (p *parser) etherType(t uint32) node {
	return cmpNode{code: p.ldh(12), cond: bpf.JumpEqual, val: t}
}

func (p *parser) ipProto4(proto uint32) node {
	return cmpNode{code: p.ldb(23), cond: bpf.JumpEqual, val: proto}
}

// ipProto6 is libpcap's test of the IPv6 next header: the fixed header's,
// or the one after a fragment header right behind it.
func (p *parser) ipProto6(proto uint32) node {
	return or(
		cmpNode{code: p.ldb(20), cond: bpf.JumpEqual, val: proto},
		and(cmpNode{code: p.ldb(20), cond: bpf.JumpEqual, val: 44}, cmpNode{code: p.ldb(54), cond: bpf.JumpEqual, val: proto}),
	)
}

// notFrag4: not an IPv4 fragment other than the first.
func (p *parser) notFrag4() node {
	return notNode{cmpNode{code: p.ldh(20), cond: bpf.JumpBitsSet, val: 0x1fff}}
}

// proto4 and proto6 are "ip proto N" and "ip6 proto N".
func (p *parser) proto4(n uint32) node { return and(p.etherType(0x0800), p.ipProto4(n)) }
func (p *parser) proto6(n uint32) node { return and(p.etherType(0x86dd), p.ipProto6(n)) }

func (p *parser) atEnd() bool {
	t := p.peek()
	return t.kind == tEOF || isAnd(t) || isOr(t) || t.s == ")"
}

var protoQuals = map[string]bool{
	"ether": true, "ip": true, "ip6": true, "arp": true, "rarp": true, "tcp": true, "udp": true,
	"sctp": true, "icmp": true, "icmp6": true, "igmp": true, "ah": true, "esp": true,
}

func (p *parser) parsePrimitive() (node, error) {
	t := p.peek()
	if t.kind != tWord {
		if t.kind == tEOF {
			return nil, p.errAt(t, false, "expected a primitive")
		}
		return nil, p.errAt(t, false, "expected a primitive, not or (")
	}
	switch t.s {
	case "vlan":
		return p.parseVLAN()
	case "less", "greater":
		p.next()
		nt := p.next()
		v, err := parseNum(nt.s)
		if err != nil {
			return nil, p.errAt(nt, false, "%s takes a length", t.s)
		}
		cond := bpf.JumpLessOrEqual
		if t.s == "greater" {
			cond = bpf.JumpGreaterOrEqual
		}
		return cmpNode{code: []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtLen}}, cond: cond, val: v}, nil
	case "broadcast":
		p.next()
		return p.etherBroadcast(), nil
	case "multicast":
		p.next()
		return p.etherMulticast(), nil
	case "proto":
		p.next()
		return p.parseProtoNum("")
	}
	if unsupportedWords[t.s] {
		return nil, p.errAt(t, true, "not implemented")
	}

	var q qual
	start := p.i
	if protoQuals[t.s] {
		q.proto = p.next().s
	}
	switch s := p.peek().s; s {
	case "src", "dst":
		p.next()
		q.dir = s
		if nt := p.peek(); (isAnd(nt) || isOr(nt)) && (p.peekAt(1).s == "src" || p.peekAt(1).s == "dst") && p.peekAt(1).s != s {
			if isAnd(nt) {
				q.dir = "src and dst"
			} else {
				q.dir = "src or dst"
			}
			p.i += 2
		}
	}
	switch s := p.peek().s; s {
	case "host", "net", "port", "portrange":
		p.next()
		q.typ = s
	case "proto":
		if q.dir != "" {
			return nil, p.errAt(p.peek(), false, "proto takes no src or dst")
		}
		p.next()
		return p.parseProtoNum(q.proto)
	case "broadcast", "multicast":
		return p.parseCast(q)
	}
	if p.i == start {
		// A bare identifier: the qualifiers of the last one, or host.
		q = p.last
		if q == (qual{}) {
			q.typ = "host"
		}
	} else if q.typ == "" && q.dir == "" && p.atEnd() {
		return p.protoAbbrev(t)
	}
	if q.typ == "" {
		q.typ = "host"
	}
	p.last = q
	id := p.next()
	if id.kind != tWord {
		return nil, p.errAt(id, false, "expected an address, network or port after %s", strings.TrimSpace(q.proto+" "+q.dir+" "+q.typ))
	}
	if unsupportedWords[id.s] {
		return nil, p.errAt(id, true, "not implemented")
	}
	switch q.typ {
	case "host":
		return p.host(q, id)
	case "net":
		return p.net(q, id)
	case "port", "portrange":
		return p.port(q, id)
	}
	return nil, p.errAt(id, false, "unknown qualifier")
}

// protoAbbrev: a protocol name alone, as "tcp" or "ip6".
func (p *parser) protoAbbrev(t token) (node, error) {
	switch t.s {
	case "ip", "ip6", "arp", "rarp":
		return p.etherType(etherTypes[t.s]), nil
	case "tcp", "udp", "sctp", "ah", "esp":
		n := ipProtos[t.s]
		return or(p.proto4(n), p.proto6(n)), nil
	case "icmp", "igmp":
		return p.proto4(ipProtos[t.s]), nil
	case "icmp6":
		return p.proto6(58), nil
	}
	return nil, p.errAt(t, false, "%s needs a qualifier such as host or proto", t.s)
}

func (p *parser) parseProtoNum(qual string) (node, error) {
	t := p.next()
	name := strings.TrimPrefix(t.s, "\\")
	n, err := parseNum(name)
	if err != nil {
		v, ok := ipProtos[name]
		if !ok {
			if qual == "ether" {
				if v, ok := etherTypes[name]; ok {
					return p.etherType(v), nil
				}
			}
			return nil, p.errAt(t, t.kind == tWord, "unknown protocol (give its number)")
		}
		n = v
	}
	switch qual {
	case "":
		if n > 255 {
			return nil, p.errAt(t, false, "IP protocol above 255")
		}
		return or(p.proto4(n), p.proto6(n)), nil
	case "ip":
		return p.proto4(n), nil
	case "ip6":
		return p.proto6(n), nil
	case "ether":
		if n > 0xffff {
			return nil, p.errAt(t, false, "EtherType above 0xffff")
		}
		if n <= 1500 {
			return nil, p.errAt(t, true, "ether proto for 802.3 length values (LLC) is not implemented")
		}
		return p.etherType(n), nil
	}
	return nil, p.errAt(t, true, "%s proto is not implemented", qual)
}

func (p *parser) parseVLAN() (node, error) {
	p.next()
	tagged := or(p.etherType(0x8100), p.etherType(0x88a8), p.etherType(0x9100))
	var n node = tagged
	if t := p.peek(); t.kind == tWord && !isAnd(t) && !isOr(t) {
		id, err := parseNum(t.s)
		if err != nil || id > 4095 {
			return nil, p.errAt(t, false, "VLAN ID must be 0-4095")
		}
		p.next()
		n = and(tagged, cmpNode{code: append(p.ldh(14), bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xfff}), cond: bpf.JumpEqual, val: id})
	}
	p.off += 4
	return n, nil
}

func (p *parser) etherBroadcast() node {
	return and(
		cmpNode{code: []bpf.Instruction{bpf.LoadAbsolute{Off: 2, Size: 4}}, cond: bpf.JumpEqual, val: 0xffffffff},
		cmpNode{code: []bpf.Instruction{bpf.LoadAbsolute{Off: 0, Size: 2}}, cond: bpf.JumpEqual, val: 0xffff},
	)
}

func (p *parser) etherMulticast() node {
	return cmpNode{code: []bpf.Instruction{bpf.LoadAbsolute{Off: 0, Size: 1}}, cond: bpf.JumpBitsSet, val: 1}
}

func (p *parser) parseCast(q qual) (node, error) {
	t := p.next()
	if q.dir != "" {
		return nil, p.errAt(t, false, "%s takes no src or dst", t.s)
	}
	switch {
	case q.proto == "ether" && t.s == "broadcast":
		return p.etherBroadcast(), nil
	case q.proto == "ether" && t.s == "multicast":
		return p.etherMulticast(), nil
	case q.proto == "ip" && t.s == "multicast":
		return and(p.etherType(0x0800), cmpNode{code: p.ldb(30), cond: bpf.JumpGreaterOrEqual, val: 224}), nil
	case q.proto == "ip6" && t.s == "multicast":
		return and(p.etherType(0x86dd), cmpNode{code: p.ldb(38), cond: bpf.JumpEqual, val: 0xff}), nil
	case q.proto == "ip" && t.s == "broadcast":
		return nil, p.errAt(t, true, "ip broadcast needs the interface's netmask; write ip dst net or ip[16:4] instead")
	}
	return nil, p.errAt(t, false, "%s %s is not a valid combination", q.proto, t.s)
}

// dirs combines a test of the source and one of the destination as the
// direction qualifier says.
func dirs(dir string, src, dst node) node {
	switch dir {
	case "src":
		return src
	case "dst":
		return dst
	case "src and dst":
		return and(src, dst)
	}
	return or(src, dst)
}

// word32 compares the 32-bit word at off, masked, with v.
func word32(off, mask, v uint32) node {
	if mask == 0 {
		// libpcap's optimizer drops the load of a /0 network, which
		// then matches even frames too short to hold the address.
		return constNode(true)
	}
	code := []bpf.Instruction{bpf.LoadAbsolute{Off: off, Size: 4}}
	if mask != 0xffffffff {
		code = append(code, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask})
	}
	return cmpNode{code: code, cond: bpf.JumpEqual, val: v & mask}
}

func (p *parser) host(q qual, id token) (node, error) {
	if q.proto == "ether" {
		mac, err := parseMAC(id.s)
		if err != nil {
			return nil, p.errAt(id, false, "expected a MAC address")
		}
		at := func(off uint32) node {
			return and(
				word32(off+2, 0xffffffff, binary.BigEndian.Uint32(mac[2:])),
				cmpNode{code: []bpf.Instruction{bpf.LoadAbsolute{Off: off, Size: 2}}, cond: bpf.JumpEqual, val: uint32(binary.BigEndian.Uint16(mac[:2]))},
			)
		}
		return dirs(q.dir, at(6), at(0)), nil
	}
	a, err := netip.ParseAddr(id.s)
	if err != nil {
		if _, merr := parseMAC(id.s); merr == nil {
			return nil, p.errAt(id, false, "a MAC address needs the ether qualifier (ether host)")
		}
		if k := suggestKeyword(id.s); k != "" && !p.afterWord(id, "host") { // "host prot" means a host
			return nil, p.errAt(id, true, "unknown word; did you mean %q? (host names need name resolution, which xdpio does not do: give an address)", k)
		}
		return nil, p.errAt(id, true, "host names need name resolution, which the compiler does not do; give an IPv4 or IPv6 address")
	}
	return p.addrMatch(q, id, netip.PrefixFrom(a, a.BitLen()))
}

func (p *parser) net(q qual, id token) (node, error) {
	s := id.s
	var pfx netip.Prefix
	var err error
	if strings.Contains(s, "/") {
		pfx, err = netip.ParsePrefix(s)
		if err != nil {
			return nil, p.errAt(id, false, "expected a network such as 198.18.0.0/15")
		}
	} else if nt := p.peek(); nt.s == "mask" {
		p.next()
		mt := p.next()
		a, err1 := netip.ParseAddr(s)
		m, err2 := netip.ParseAddr(mt.s)
		if err1 != nil || err2 != nil || !a.Is4() || !m.Is4() {
			return nil, p.errAt(mt, false, "net ... mask takes an IPv4 network and mask")
		}
		ones, bits := net.IPMask(m.AsSlice()).Size()
		if bits == 0 {
			return nil, p.errAt(mt, false, "the mask is not contiguous")
		}
		pfx = netip.PrefixFrom(a, ones)
	} else if a, err := netip.ParseAddr(s); err == nil {
		pfx = netip.PrefixFrom(a, a.BitLen())
	} else {
		// libpcap's abbreviations: "10" is 10/8, "192.168" 192.168/16.
		parts := strings.Split(s, ".")
		if len(parts) > 3 {
			return nil, p.errAt(id, false, "expected a network such as 198.18.0.0/15")
		}
		var b [4]byte
		for i, part := range parts {
			v, err := parseNum(part)
			if err != nil || v > 255 || part == "" {
				return nil, p.errAt(id, strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz"), "expected a network such as 198.18.0.0/15 (network names are not resolved)")
			}
			b[i] = byte(v)
		}
		pfx = netip.PrefixFrom(netip.AddrFrom4(b), 8*len(parts))
	}
	if pfx.Masked() != pfx {
		return nil, p.errAt(id, false, "the address has bits set beyond the prefix length")
	}
	return p.addrMatch(q, id, pfx)
}

// addrMatch tests a host or network: IPv4 ones against IP, ARP and RARP
// (unless a protocol qualifier says which), IPv6 ones against IPv6.
func (p *parser) addrMatch(q qual, id token, pfx netip.Prefix) (node, error) {
	a := pfx.Addr()
	if a.Is4() {
		v := binary.BigEndian.Uint32(a.AsSlice())
		mask := uint32(0)
		if pfx.Bits() > 0 {
			mask = ^uint32(0) << (32 - pfx.Bits())
		}
		ip := and(p.etherType(0x0800), dirs(q.dir, word32(26+p.off, mask, v), word32(30+p.off, mask, v)))
		arp := func(t uint32) node {
			return and(p.etherType(t), dirs(q.dir, word32(28+p.off, mask, v), word32(38+p.off, mask, v)))
		}
		switch q.proto {
		case "":
			return or(ip, and(or(p.etherType(0x0806), p.etherType(0x8035)), dirs(q.dir, word32(28+p.off, mask, v), word32(38+p.off, mask, v)))), nil
		case "ip":
			return ip, nil
		case "arp":
			return arp(0x0806), nil
		case "rarp":
			return arp(0x8035), nil
		}
		return nil, p.errAt(id, true, "%s %s with an IPv4 address is not implemented", q.proto, q.typ)
	}
	if q.proto != "" && q.proto != "ip6" {
		return nil, p.errAt(id, false, "%s %s with an IPv6 address", q.proto, q.typ)
	}
	b := a.AsSlice()
	match := func(off uint32) node {
		var ns []node
		left := pfx.Bits()
		for w := 0; w < 4 && left > 0; w++ {
			bits := min(left, 32)
			left -= bits
			ns = append(ns, word32(off+p.off+uint32(4*w), ^uint32(0)<<(32-bits), binary.BigEndian.Uint32(b[4*w:])))
		}
		return and(ns...)
	}
	return and(p.etherType(0x86dd), dirs(q.dir, match(22), match(38))), nil
}

// parseMAC reads a MAC address as libpcap does: six groups of one or two
// hex digits separated by ':', '-' or '.'.
func parseMAC(s string) ([]byte, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == '-' || r == '.' })
	if len(f) != 6 {
		return nil, errBadMAC
	}
	mac := make([]byte, 6)
	for i, g := range f {
		v, err := strconv.ParseUint(g, 16, 8)
		if err != nil || len(g) > 2 {
			return nil, errBadMAC
		}
		mac[i] = byte(v)
	}
	return mac, nil
}

var errBadMAC = errors.New("bad MAC address")
