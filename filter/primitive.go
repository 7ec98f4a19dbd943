package filter

import (
	"encoding/binary"
	"errors"
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
	"pim": true, "vrrp": true, "carp": true, "igrp": true,
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
		p.lastOK = false
		return p.parseVLAN()
	case "less", "greater":
		p.next()
		p.lastOK = false
		nt := p.next()
		v, ok := numToken(nt.s)
		if nt.kind != tWord || !ok {
			return nil, p.errAt(nt, false, "%s takes a length", t.s)
		}
		cond := bpf.JumpLessOrEqual
		if t.s == "greater" {
			cond = bpf.JumpGreaterOrEqual
		}
		return cmpNode{code: []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtLen}}, cond: cond, val: v}, nil
	case "broadcast":
		p.next()
		p.lastOK = false
		return p.etherBroadcast(), nil
	case "multicast":
		p.next()
		p.lastOK = false
		return p.etherMulticast(), nil
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
			p.next()
			p.next()
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
		q.typ = s
	case "broadcast", "multicast":
		p.lastOK = false
		return p.parseCast(q)
	}
	if p.i == start {
		// A bare id: it takes the qualifiers of the primitive before.
		return p.parseID(t)
	}
	if q.typ == "" && q.dir == "" {
		if p.atEnd() {
			p.lastOK = false
			return p.protoAbbrev(t)
		}
		nt := p.peek()
		if unsupportedWords[nt.s] {
			return nil, p.errAt(nt, true, "not implemented")
		}
		if k := suggestKeyword(nt.s); k != "" && nt.kind == tWord {
			return nil, p.errAt(nt, false, "expected host, net, port, portrange, proto, src or dst after %s; did you mean %q?", t.text(), k)
		}
		return nil, p.errAt(nt, false, "expected host, net, port, portrange, proto, src or dst after %s", t.text())
	}
	p.last, p.lastOK = q, true
	id := p.next()
	return p.idWith(q, id)
}

// parseID reads the id at the current token with the qualifiers of the
// last primitive, as libpcap does after and/or ("host A or B").
func (p *parser) parseID(id token) (node, error) {
	if !p.lastOK {
		if k := suggestKeyword(id.s); k != "" && id.kind == tWord {
			return nil, p.errAt(id, false, "unknown word; did you mean %q?", k)
		}
		return nil, p.errAt(id, false, "an address, network or port needs a qualifier (host, net, port, ...) before it, or an and/or after a primitive that has one, as in host A or B")
	}
	p.next()
	p.idDone = true
	return p.idWith(p.last, id)
}

// idWith compiles the id with qualifiers q.
func (p *parser) idWith(q qual, id token) (node, error) {
	if id.kind != tWord {
		return nil, p.errAt(id, false, "expected an address, network or port after %s", strings.TrimSpace(q.proto+" "+q.dir+" "+q.typ))
	}
	if unsupportedWords[id.s] {
		return nil, p.errAt(id, true, "not implemented")
	}
	switch q.typ {
	case "", "host":
		return p.host(q, id)
	case "net":
		return p.net(q, id)
	case "port", "portrange":
		return p.port(q, id)
	case "proto":
		return p.protoID(q.proto, id)
	}
	return nil, p.errAt(id, false, "unknown qualifier")
}

// protoAbbrev: a protocol name alone, as "tcp" or "ip6".
func (p *parser) protoAbbrev(t token) (node, error) {
	switch t.s {
	case "ip", "ip6", "arp", "rarp":
		return p.etherType(etherTypes[t.s]), nil
	case "tcp", "udp", "sctp", "ah", "esp", "pim":
		n := ipProtos[t.s]
		return or(p.proto4(n), p.proto6(n)), nil
	case "icmp", "igmp", "igrp", "vrrp", "carp":
		return p.proto4(ipProtos[t.s]), nil
	case "icmp6":
		return p.proto6(58), nil
	}
	return nil, p.errAt(t, false, "%s needs a qualifier such as host or proto", t.text())
}

// protoNames are IP protocol names as Debian's /etc/protocols spells
// them (libpcap looks them up there): "proto \tcp", "ip proto gre". The
// compiler does not read the file, whose contents vary between hosts;
// other names must be given as numbers.
var protoNames = map[string]uint32{
	"ip": 0, "icmp": 1, "igmp": 2, "ipencap": 4, "tcp": 6, "egp": 8, "udp": 17, "dccp": 33, "ipv6": 41,
	"ipv6-route": 43, "ipv6-frag": 44, "rsvp": 46, "gre": 47, "esp": 50, "ah": 51, "ipv6-icmp": 58,
	"ipv6-nonxt": 59, "ipv6-opts": 60, "eigrp": 88, "ospf": 89, "ipip": 94, "etherip": 97, "pim": 103,
	"ipcomp": 108, "vrrp": 112, "l2tp": 115, "sctp": 132, "udplite": 136, "mpls-in-ip": 137,
}

// etherNames are the EtherType names libpcap knows ("ether proto \ip6"),
// but atalk and aarp, which libpcap also matches in 802.2 SNAP frames.
var etherNames = map[string]uint32{
	"arp": 0x0806, "decnet": 0x6003, "ip": 0x0800, "ip6": 0x86dd,
	"lat": 0x6004, "loopback": 0x9000, "mopdl": 0x6001, "moprc": 0x6002, "rarp": 0x8035, "sca": 0x6007,
}

// isKeyword reports whether libpcap's scanner takes w for a keyword: as a
// protocol name they need a backslash (proto \tcp; proto tcp is a syntax
// error).
func isKeyword(w string) bool {
	return protoQuals[w] || loadProtos[w] || unsupportedWords[w] || contains(keywords, w) || w == "link"
}

// protoID compiles "proto N" with the protocol qualifier qual.
func (p *parser) protoID(qual string, t token) (node, error) {
	n, ok := numToken(t.s)
	if !ok {
		if isNumberLike(t.s) {
			_, err := parseNum(t.s)
			return nil, p.errAt(t, false, "%s", numError(t.s, err))
		}
		if isKeyword(t.s) {
			return nil, p.errAt(t, false, "%s is a keyword: write \\%s for the protocol of that name", t.s, t.s)
		}
		name := strings.TrimPrefix(t.s, "\\")
		table, what := protoNames, "IP protocol"
		if qual == "ether" {
			table, what = etherNames, "EtherType"
		}
		v, ok := table[name]
		if !ok {
			return nil, p.errAt(t, true, "unknown %s name (the compiler does not read /etc/protocols: give its number)", what)
		}
		n = v
	}
	switch qual {
	case "":
		// libpcap compares whatever number it is given: one above
		// 255 matches nothing.
		return or(p.proto4(n), p.proto6(n)), nil
	case "ip":
		return p.proto4(n), nil
	case "ip6":
		return p.proto6(n), nil
	case "ether":
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
		id, ok := numToken(t.s)
		if !ok || id > 4095 {
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
	s := id.s
	if q.proto == "ether" {
		mac, err := parseMAC(s)
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
	if strings.Contains(s, "/") {
		return nil, p.errAt(id, false, "a prefix length belongs to net (net %s), not to host", short(s))
	}
	if v, ok := numToken(s); ok {
		return nil, p.errAt(id, true, "a host given as one number is not implemented (libpcap reads host %s as %s): write the address", short(s), dotted(v))
	}
	if v, n, ok := parseDotted(s); ok {
		if n < 4 {
			return nil, p.errAt(id, true, "an abbreviated address is not implemented for host (libpcap reads host %s as the network %s/%d): write net %s/%d or the whole address",
				short(s), dotted(v), 8*n, dotted(v), 8*n)
		}
		return p.addrMatch4(q, id, v, 0xffffffff)
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() && a.Zone() == "" {
		return p.addrMatch6(q, id, netip.PrefixFrom(a, 128))
	}
	if _, err := parseMAC(s); err == nil {
		return nil, p.errAt(id, false, "a MAC address needs the ether qualifier (ether host)")
	}
	if isNumberLike(s) {
		_, err := parseNum(s)
		return nil, p.errAt(id, false, "%s", numError(s, err))
	}
	if looksNumeric(s) {
		return nil, p.errAt(id, false, "invalid address %s", short(s))
	}
	if k := suggestKeyword(s); k != "" && !p.afterWord(id, "host") { // "host prot" means a host
		return nil, p.errAt(id, true, "unknown word; did you mean %q? (host names need name resolution, which xdpio does not do: give an address)", k)
	}
	return nil, p.errAt(id, true, "host names need name resolution, which the compiler does not do; give an IPv4 or IPv6 address")
}

// parseDotted reads an IPv4 address as libpcap does: 2 to 4 decimal
// parts of at most 255, leading zeros allowed (010.1.1.1 is 10.1.1.1),
// the parts given in the high bits (10.1 is 10.1.0.0). It returns the
// address and the number of parts.
func parseDotted(s string) (v uint32, parts int, ok bool) {
	ps := strings.Split(s, ".")
	if len(ps) < 2 || len(ps) > 4 {
		return 0, 0, false
	}
	for _, part := range ps {
		if !isDigits(part) {
			return 0, 0, false
		}
		n := 0
		for i := 0; i < len(part); i++ {
			if n = n*10 + int(part[i]-'0'); n > 255 {
				return 0, 0, false
			}
		}
		v = v<<8 | uint32(n)
	}
	return v << (32 - 8*len(ps)), len(ps), true
}

// dotted formats an IPv4 address.
func dotted(v uint32) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// looksNumeric: digits and dots or colons only, an address gone wrong
// rather than a name.
func looksNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// prefixMask is the IPv4 mask of a prefix length up to 32.
func prefixMask(bits uint32) uint32 {
	if bits == 0 {
		return 0
	}
	return ^uint32(0) << (32 - bits)
}

func (p *parser) net(q qual, id token) (node, error) {
	s := id.s
	addr, bitsText, slash := strings.Cut(s, "/")
	if nt := p.peek(); !slash && nt.kind == tOp && nt.s == "/" { // "10.0.0.0 / 8"
		p.next()
		bitsText, slash = p.next().s, true
	}
	if slash {
		bits, ok := numToken(bitsText)
		if !ok {
			return nil, p.errAt(id, false, "expected a prefix length after /")
		}
		if strings.Contains(addr, ":") {
			a, err := netip.ParseAddr(addr)
			if err != nil || !a.Is6() || a.Zone() != "" {
				return nil, p.errAt(id, false, "expected a network such as 2001:db8::/32")
			}
			if bits > 128 {
				return nil, p.errAt(id, false, "the prefix length %d is above 128", bits)
			}
			pfx := netip.PrefixFrom(a, int(bits))
			if pfx.Masked() != pfx {
				return nil, p.errAt(id, false, "the address has bits set beyond the prefix length")
			}
			return p.addrMatch6(q, id, pfx)
		}
		v, _, ok := parseDotted(addr)
		if !ok {
			return nil, p.errAt(id, false, "expected a network such as 198.18.0.0/15")
		}
		if bits > 32 {
			return nil, p.errAt(id, false, "the prefix length %d is above 32", bits)
		}
		if v&^prefixMask(bits) != 0 {
			return nil, p.errAt(id, false, "the address has bits set beyond the prefix length")
		}
		return p.addrMatch4(q, id, v, prefixMask(bits))
	}
	if nt := p.peek(); nt.kind == tWord && nt.s == "mask" {
		p.next()
		mt := p.next()
		v, _, ok1 := parseDotted(s)
		m, _, ok2 := parseDotted(mt.s)
		if !ok1 || !ok2 {
			return nil, p.errAt(mt, false, "net ... mask takes an IPv4 network and mask")
		}
		if v&^m != 0 {
			return nil, p.errAt(id, false, "the address has bits set outside the mask")
		}
		return p.addrMatch4(q, id, v, m)
	}
	if v, ok := numToken(s); ok {
		// libpcap's network number: 10 is 10/8, 256 is 1.0/16.
		mask := ^uint32(0)
		for v != 0 && v&0xff000000 == 0 {
			v, mask = v<<8, mask<<8
		}
		return p.addrMatch4(q, id, v, mask)
	}
	if v, n, ok := parseDotted(s); ok {
		// libpcap's abbreviations: 198.18 is 198.18/16.
		return p.addrMatch4(q, id, v, prefixMask(uint32(8*n)))
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() && a.Zone() == "" {
		return p.addrMatch6(q, id, netip.PrefixFrom(a, 128))
	}
	if isNumberLike(s) {
		_, err := parseNum(s)
		return nil, p.errAt(id, false, "%s", numError(s, err))
	}
	if looksNumeric(s) {
		return nil, p.errAt(id, false, "expected a network such as 198.18.0.0/15")
	}
	return nil, p.errAt(id, true, "expected a network such as 198.18.0.0/15 (network names are not resolved)")
}

// addrMatch4 tests an IPv4 host or network (v under mask) against IP, ARP
// and RARP, unless a protocol qualifier says which.
func (p *parser) addrMatch4(q qual, id token, v, mask uint32) (node, error) {
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
	typ := q.typ
	if typ == "" {
		typ = "host"
	}
	return nil, p.errAt(id, true, "%s %s with an IPv4 address is not implemented", q.proto, typ)
}

// addrMatch6 tests an IPv6 host or network.
func (p *parser) addrMatch6(q qual, id token, pfx netip.Prefix) (node, error) {
	if q.proto != "" && q.proto != "ip6" {
		typ := q.typ
		if typ == "" {
			typ = "host"
		}
		return nil, p.errAt(id, false, "%s %s with an IPv6 address", q.proto, typ)
	}
	b := pfx.Addr().AsSlice()
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

// parseMAC reads a MAC address in the forms libpcap's scanner takes: six
// groups of one or two hex digits separated by ':', '-' or '.' (one of
// them throughout), three groups of four hex digits separated by '.', or
// twelve hex digits.
func parseMAC(s string) ([]byte, error) {
	var groups []string
	switch {
	case len(s) == 12 && isHex(s):
		for i := 0; i < 12; i += 2 {
			groups = append(groups, s[i:i+2])
		}
	case len(s) == 14 && strings.Count(s, ".") == 2:
		for _, g := range strings.Split(s, ".") {
			if len(g) != 4 || !isHex(g) {
				return nil, errBadMAC
			}
			groups = append(groups, g[:2], g[2:])
		}
	default:
		for _, sep := range []string{":", "-", "."} {
			if strings.Count(s, sep) == 5 {
				groups = strings.Split(s, sep)
				break
			}
		}
	}
	if len(groups) != 6 {
		return nil, errBadMAC
	}
	mac := make([]byte, 6)
	for i, g := range groups {
		v, err := strconv.ParseUint(g, 16, 8)
		if err != nil || len(g) > 2 || !isHex(g) {
			return nil, errBadMAC
		}
		mac[i] = byte(v)
	}
	return mac, nil
}

var errBadMAC = errors.New("bad MAC address")
