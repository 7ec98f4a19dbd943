package filter

import (
	"strings"

	"golang.org/x/net/bpf"
)

// A few service names; others must be given as numbers (the compiler does
// not read /etc/services, whose contents vary between hosts).
var services = map[string]uint32{
	"ftp-data": 20, "ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53, "bootps": 67,
	"bootpc": 68, "tftp": 69, "http": 80, "www": 80, "pop3": 110, "ntp": 123, "imap": 143,
	"snmp": 161, "bgp": 179, "https": 443, "syslog": 514, "isakmp": 500, "ipsec-nat-t": 4500,
}

func (p *parser) portNum(t token, s string) (uint32, error) {
	if v, ok := services[s]; ok {
		return v, nil
	}
	v, err := parseNum(s)
	if err != nil {
		return 0, p.errAt(t, !isDigits(s), "expected a port number (only a few service names are known)")
	}
	if v > 65535 {
		return 0, p.errAt(t, false, "port above 65535")
	}
	return v, nil
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
// qualifier names) over IPv6 (fixed header's next header only) and IPv4
// (not a fragment other than the first).
func (p *parser) port(q qual, id token) (node, error) {
	var lo, hi uint32
	var err error
	if q.typ == "portrange" {
		a, b, ok := strings.Cut(id.s, "-")
		if !ok {
			return nil, p.errAt(id, false, "expected a range such as 1024-2047")
		}
		if lo, err = p.portNum(id, a); err != nil {
			return nil, err
		}
		if hi, err = p.portNum(id, b); err != nil {
			return nil, err
		}
		if lo > hi {
			lo, hi = hi, lo
		}
	} else {
		if lo, err = p.portNum(id, id.s); err != nil {
			return nil, err
		}
		hi = lo
	}
	switch q.proto {
	case "", "tcp", "udp", "sctp":
	default:
		return nil, p.errAt(id, false, "illegal qualifier %s of %s (ports belong to tcp, udp or sctp)", q.proto, q.typ)
	}
	return portNode{proto: q.proto, dir: q.dir, off: p.off, ranges: [][2]uint32{{lo, hi}}}, nil
}

// portNode is a port or portrange primitive, kept whole until code
// generation so that "port 53 or port 80" (or "port 53 or 80") becomes
// one test of a set of ports: one load of each port, as libpcap's
// optimizer makes it. The verdicts then agree with tcpdump's also on
// frames cut inside the transport header.
type portNode struct {
	proto, dir string
	off        uint32
	ranges     [][2]uint32
}

func (portNode) isNode() {}

// mergePorts joins two port primitives that differ only in their ports.
func mergePorts(a, b node) (node, bool) {
	x, ok1 := a.(portNode)
	y, ok2 := b.(portNode)
	if !ok1 || !ok2 || x.proto != y.proto || x.dir != y.dir || x.off != y.off {
		return nil, false
	}
	x.ranges = append(append([][2]uint32(nil), x.ranges...), y.ranges...)
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
		for i, r := range n.ranges {
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
