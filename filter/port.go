package filter

import (
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// service is a port name's number and protocol: "" where
// /etc/services lists it for both TCP and UDP, else the one it lists.
type service struct {
	port  uint32
	proto string
}

// A few service names, with the ports and protocols Debian's
// /etc/services gives them (libpcap restricts "port http" to TCP when the
// file lists http for TCP only); others must be given as numbers: the
// compiler does not read the file, whose contents vary between hosts.
var services = map[string]service{
	"ftp-data": {20, "tcp"}, "ftp": {21, "tcp"}, "ssh": {22, "tcp"}, "telnet": {23, "tcp"},
	"smtp": {25, "tcp"}, "domain": {53, ""}, "bootps": {67, "udp"}, "bootpc": {68, "udp"},
	"tftp": {69, "udp"}, "http": {80, "tcp"}, "www": {80, "tcp"}, "pop3": {110, "tcp"},
	"ntp": {123, "udp"}, "imap": {143, "tcp"}, "snmp": {161, ""}, "bgp": {179, "tcp"},
	"https": {443, ""}, "isakmp": {500, "udp"}, "syslog": {514, "udp"}, "ipsec-nat-t": {4500, "udp"},
}

// portNum reads a port: a number (hex and octal as libpcap reads them)
// or a service name, with the protocol the name belongs to.
func (p *parser) portNum(t token) (uint32, string, error) {
	s := t.s
	if v, ok := numToken(s); ok {
		if v > 65535 {
			return 0, "", p.errAt(t, false, "port above 65535")
		}
		return v, "", nil
	}
	if isNumberLike(s) {
		_, err := parseNum(s)
		return 0, "", p.errAt(t, false, "%s", numError(s, err))
	}
	if sv, ok := services[s]; ok {
		return sv.port, sv.proto, nil
	}
	if looksNumeric(s) || strings.ContainsAny(s, ":/") {
		return 0, "", p.errAt(t, false, "expected a port number or name, not an address")
	}
	return 0, "", p.errAt(t, true, "unknown service name (only a few are known: give the port number)")
}

// rangePart reads one end of a port range as libpcap does: decimal (even
// with leading zeros: 010 is 10), or a service name.
func (p *parser) rangePart(t token, s string) (uint32, string, bool, error) {
	if isDigits(s) {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil || v > 65535 {
			return 0, "", true, p.errAt(t, false, "port above 65535")
		}
		return uint32(v), "", true, nil
	}
	if sv, ok := services[s]; ok {
		return sv.port, sv.proto, false, nil
	}
	if s == "" || isNumberLike(s) || looksNumeric(s) || s[0] == '-' || s[0] == '+' {
		return 0, "", false, p.errAt(t, false, "expected a range of two decimal port numbers or names, such as 1024-2047")
	}
	return 0, "", false, p.errAt(t, true, "unknown service name (only a few are known: give the port number)")
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// port compiles port and portrange: TCP, UDP and SCTP (or the one the
// qualifier or the service name says) over IPv6 (fixed header's next
// header only) and IPv4 (not a fragment other than the first).
func (p *parser) port(q qual, id token) (node, error) {
	switch q.proto {
	case "", "tcp", "udp", "sctp":
	default:
		return nil, p.errAt(id, false, "illegal qualifier %s of %s (ports belong to tcp, udp or sctp)", q.proto, q.typ)
	}
	var lo, hi uint32
	var proto string
	var err error
	if _, ok := numToken(id.s); ok || q.typ == "port" {
		// A number in a portrange is a range of one port.
		if lo, proto, err = p.portNum(id); err != nil {
			return nil, err
		}
		hi = lo
	} else {
		a, b, ok := strings.Cut(id.s, "-")
		if !ok {
			return nil, p.errAt(id, false, "expected a range such as 1024-2047")
		}
		var protoA, protoB string
		var numA, numB bool
		if lo, protoA, numA, err = p.rangePart(id, a); err != nil {
			return nil, err
		}
		if hi, protoB, numB, err = p.rangePart(id, b); err != nil {
			if numA && !isDigits(b) && len(b) > 0 && (b[0] >= '0' && b[0] <= '9' || b[0] == '-' || b[0] == '+') {
				// libpcap's sscanf("%d-%d") stops at the first
				// character after the second number: 1-0x10000 is
				// 0-1 to it.
				return nil, p.errAt(id, true, "a range with more after its second number is not implemented (libpcap reads only the leading numbers of %s); write two decimal numbers", short(id.s))
			}
			return nil, err
		}
		if numA && numB || protoA == protoB {
			proto = protoA
		} // names of different protocols: TCP, UDP and SCTP
		if lo > hi {
			lo, hi = hi, lo
		}
	}
	if proto != "" && q.proto != "" && proto != q.proto {
		return nil, p.errAt(id, false, "port %s is %s, not %s", short(id.s), proto, q.proto)
	}
	if q.proto != "" {
		proto = q.proto
	}
	return portNode{proto: proto, dir: q.dir, off: p.off, ranges: &portRanges{lo: lo, hi: hi}}, nil
}

// portNode is a port or portrange primitive, kept whole until code
// generation so that "port 53 or port 80" (or "port 53 or 80") becomes
// one test of a set of ports: one load of each port, as libpcap's
// optimizer makes it. The verdicts then agree with tcpdump's also on
// frames cut inside the transport header.
type portNode struct {
	proto, dir string
	off        uint32
	ranges     *portRanges
}

// portRanges is a list of port ranges that joins another in constant
// time, however the ors nest: a range (lo-hi), or two lists one after
// the other (a, b).
type portRanges struct {
	lo, hi uint32
	a, b   *portRanges
}

// list returns the ranges in order.
func (r *portRanges) list() [][2]uint32 {
	var out [][2]uint32
	stack := []*portRanges{r}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.a == nil {
			out = append(out, [2]uint32{n.lo, n.hi})
			continue
		}
		stack = append(stack, n.b, n.a)
	}
	return out
}

func (portNode) isNode() {}

// mergePorts joins two port primitives that differ only in their ports.
func mergePorts(a, b node) (node, bool) {
	x, ok1 := a.(portNode)
	y, ok2 := b.(portNode)
	if !ok1 || !ok2 || x.proto != y.proto || x.dir != y.dir || x.off != y.off {
		return nil, false
	}
	x.ranges = &portRanges{a: x.ranges, b: y.ranges}
	return x, true
}

// lower compiles the primitive: TCP, UDP and SCTP (or the one named) over
// IPv6 (the fixed header's next header only) and IPv4 (not a fragment
// other than the first).
func (n portNode) lower() node {
	p := &parser{off: n.off}
	var protos []uint32
	if n.proto == "" {
		protos = []uint32{132, 6, 17}
	} else {
		protos = []uint32{ipProtos[n.proto]}
	}
	test := func(code []bpf.Instruction) node {
		var alts []node
		for i, r := range n.ranges.list() {
			var c []bpf.Instruction
			if i == 0 {
				c = code // A keeps the port for the other comparisons
			}
			if r[0] == r[1] {
				alts = append(alts, cmpNode{code: c, cond: bpf.JumpEqual, val: r[0]})
			} else {
				alts = append(alts, and(cmpNode{code: c, cond: bpf.JumpGreaterOrEqual, val: r[0]}, cmpNode{cond: bpf.JumpLessOrEqual, val: r[1]}))
			}
		}
		return or(alts...)
	}
	var p6, p4 []node
	for i, pr := range protos {
		c6, c4 := p.ldb(20), p.ldb(23)
		if i > 0 {
			c6, c4 = nil, nil // A still holds the protocol
		}
		p6 = append(p6, cmpNode{code: c6, cond: bpf.JumpEqual, val: pr})
		p4 = append(p4, cmpNode{code: c4, cond: bpf.JumpEqual, val: pr})
	}
	v6 := and(p.etherType(0x86dd), or(p6...), dirs(n.dir, test(p.ldh(54)), test(p.ldh(56))))
	ind := func(off uint32) []bpf.Instruction {
		return []bpf.Instruction{bpf.LoadMemShift{Off: 14 + p.off}, bpf.LoadIndirect{Off: off + p.off, Size: 2}}
	}
	v4 := and(p.etherType(0x0800), or(p4...), p.notFrag4(), dirs(n.dir, test(ind(14)), test(ind(16))))
	return or(v6, v4)
}
