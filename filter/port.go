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
	var protos []uint32
	switch q.proto {
	case "":
		protos = []uint32{132, 6, 17}
	case "tcp", "udp", "sctp":
		protos = []uint32{ipProtos[q.proto]}
	default:
		return nil, p.errAt(id, true, "%s %s is not implemented (ports belong to tcp, udp or sctp)", q.proto, q.typ)
	}
	test := func(code []bpf.Instruction) node {
		if lo == hi {
			return cmpNode{code: code, cond: bpf.JumpEqual, val: lo}
		}
		return and(cmpNode{code: code, cond: bpf.JumpGreaterOrEqual, val: lo}, cmpNode{cond: bpf.JumpLessOrEqual, val: hi})
	}
	var p6, p4 []node
	for _, n := range protos {
		p6 = append(p6, cmpNode{code: p.ldb(20), cond: bpf.JumpEqual, val: n})
		p4 = append(p4, cmpNode{code: p.ldb(23), cond: bpf.JumpEqual, val: n})
	}
	v6 := and(p.etherType(0x86dd), or(p6...), dirs(q.dir, test(p.ldh(54)), test(p.ldh(56))))
	ind := func(off uint32) []bpf.Instruction {
		return []bpf.Instruction{bpf.LoadMemShift{Off: 14 + p.off}, bpf.LoadIndirect{Off: off + p.off, Size: 2}}
	}
	v4 := and(p.etherType(0x0800), or(p4...), p.notFrag4(), dirs(q.dir, test(ind(14)), test(ind(16))))
	return or(v6, v4), nil
}
