package filter

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// Compile compiles a tcpdump (pcap-filter) expression for Ethernet frames
// into classic BPF that returns 262144 for a matching frame and 0 for
// others, as `tcpdump -d` would. An empty expression matches every frame.
// A construct this compiler does not implement is refused with an *Error
// naming it (errors.Is(err, ErrUnsupported)), never compiled into a filter
// that matches something else.
func Compile(expr string) ([]bpf.Instruction, error) {
	if strings.TrimSpace(expr) == "" {
		return []bpf.Instruction{bpf.RetConstant{Val: matchLen}}, nil
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{expr: expr, toks: toks}
	n, err := p.parse()
	if err != nil {
		return nil, err
	}
	prog, err := compileTree(n)
	if err != nil {
		return nil, &Error{Expr: expr, Msg: err.Error(), Unsupported: true}
	}
	return prog, nil
}

type qual struct {
	proto string // "", "ether", "ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp"
	dir   string // "", "src", "dst", "src or dst", "src and dst"
	typ   string // "", "host", "net", "port", "portrange"
}

type parser struct {
	expr string
	toks []token
	i    int
	// off is how far the link-layer payload moved: 4 per vlan keyword
	// parsed so far, as in libpcap, where vlan shifts every later
	// primitive whatever the and/or structure.
	off  uint32
	last qual
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// afterWord reports whether token t comes right after the word w.
func (p *parser) afterWord(t token, w string) bool {
	for i := 1; i < len(p.toks); i++ {
		if p.toks[i].pos == t.pos {
			return p.toks[i-1].s == w
		}
	}
	return false
}

func (p *parser) errAt(t token, unsupported bool, format string, a ...any) *Error {
	return &Error{Expr: p.expr, Pos: t.pos, Construct: t.s, Msg: fmt.Sprintf(format, a...), Unsupported: unsupported}
}

func (p *parser) parse() (node, error) {
	n, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		if k := suggestKeyword(t.s); k == "and" || k == "or" {
			return nil, p.errAt(t, false, "expected and, or or the end of the expression; did you mean %q?", k)
		}
		return nil, p.errAt(t, false, "expected and, or or the end of the expression")
	}
	return n, nil
}

func isAnd(t token) bool { return t.s == "and" || t.s == "&&" }
func isOr(t token) bool  { return t.s == "or" || t.s == "||" }

// parseExpr: and and or have the same precedence and associate left to
// right, as in tcpdump.
func (p *parser) parseExpr() (node, error) {
	n, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case isAnd(t):
			p.next()
			m, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			n = andNode{n, m}
		case isOr(t):
			p.next()
			m, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			if merged, ok := mergePorts(n, m); ok {
				n = merged
			} else {
				n = orNode{n, m}
			}
		default:
			return n, nil
		}
	}
}

var loadProtos = map[string]bool{
	"ether": true, "ip": true, "ip6": true, "arp": true, "rarp": true,
	"tcp": true, "udp": true, "icmp": true, "igmp": true, "sctp": true, "icmp6": true,
	"link": true, "ppp": true, "slip": true, "fddi": true, "tr": true, "wlan": true,
	"pim": true, "vrrp": true, "igrp": true, "carp": true, "ah": true, "esp": true, "radio": true,
}

// mayStartArith reports whether the tokens ahead can start a relation.
func (p *parser) mayStartArith() bool {
	t := p.peek()
	if t.kind == tOp {
		return t.s == "(" || t.s == "-"
	}
	if t.kind != tWord {
		return false
	}
	if t.s == "len" {
		return true
	}
	if loadProtos[t.s] && p.peekAt(1).s == "[" {
		return true
	}
	_, err := parseNum(t.s)
	return err == nil
}

func (p *parser) parseUnary() (node, error) {
	t := p.peek()
	if t.s == "not" || t.s == "!" {
		p.next()
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	}
	if p.mayStartArith() {
		save := p.i
		n, err := p.parseRelation()
		if err == nil {
			return n, nil
		}
		e := err.(*Error)
		p.i = save
		// A word that is a protocol load or len can only be a relation.
		if t.s == "len" || loadProtos[t.s] {
			return nil, e
		}
		relErr := e
		var n2 node
		if t.s == "(" {
			p.next()
			n2, err = p.parseExpr()
			if err == nil {
				if c := p.peek(); c.s != ")" {
					err = p.errAt(c, false, "expected )")
				} else {
					p.next()
				}
			}
		} else {
			n2, err = p.parsePrimitive()
		}
		if err != nil {
			if e2, ok := err.(*Error); ok && e2.Pos < relErr.Pos {
				return nil, relErr
			}
			return nil, err
		}
		return n2, nil
	}
	return p.parsePrimitive()
}

// Relations: arithmetic with libpcap's precedence, lowest first:
// | ^, &, << >>, + -, * / %, unary -.
var relOps = map[string]bpf.JumpTest{
	">": bpf.JumpGreaterThan, "<": bpf.JumpLessThan, ">=": bpf.JumpGreaterOrEqual,
	"<=": bpf.JumpLessOrEqual, "=": bpf.JumpEqual, "==": bpf.JumpEqual, "!=": bpf.JumpNotEqual,
}

func (p *parser) parseRelation() (node, error) {
	l, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	t := p.peek()
	op, ok := relOps[t.s]
	if !ok || t.kind != tOp {
		return nil, p.errAt(t, false, "expected a comparison (>, <, >=, <=, =, !=)")
	}
	p.next()
	r, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	return p.relation(l, op, r, t)
}

var arithLevels = [][]string{
	{"|", "^"},
	{"&"},
	{"<<", ">>"},
	{"+", "-"},
	{"*", "/", "%"},
}

var aluOps = map[string]bpf.ALUOp{
	"|": bpf.ALUOpOr, "^": bpf.ALUOpXor, "&": bpf.ALUOpAnd, "<<": bpf.ALUOpShiftLeft,
	">>": bpf.ALUOpShiftRight, "+": bpf.ALUOpAdd, "-": bpf.ALUOpSub, "*": bpf.ALUOpMul,
	"/": bpf.ALUOpDiv, "%": bpf.ALUOpMod,
}

func (p *parser) parseArith(level int) (arith, error) {
	if level == len(arithLevels) {
		return p.parseArithUnary()
	}
	l, err := p.parseArith(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp || !contains(arithLevels[level], t.s) {
			return l, nil
		}
		// "&&" and "||" are boolean, lexed whole, so never reach here.
		p.next()
		r, err := p.parseArith(level + 1)
		if err != nil {
			return nil, err
		}
		op := aluOps[t.s]
		if n, ok := r.(numA); ok && n == 0 && (op == bpf.ALUOpDiv || op == bpf.ALUOpMod) {
			return nil, p.errAt(t, false, "division by zero")
		}
		l = fold(binA{op, l, r})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) parseArithUnary() (arith, error) {
	t := p.next()
	switch {
	case t.s == "-" && t.kind == tOp:
		a, err := p.parseArithUnary()
		if err != nil {
			return nil, err
		}
		return fold(binA{bpf.ALUOpSub, numA(0), a}), nil
	case t.s == "(" && t.kind == tOp:
		a, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.s != ")" {
			return nil, p.errAt(c, false, "expected )")
		}
		return a, nil
	case t.kind != tWord:
		return nil, p.errAt(t, false, "expected a number, len or a protocol load such as ip[0]")
	case t.s == "len":
		return lenA{}, nil
	case loadProtos[t.s] && p.peek().s == "[":
		return p.parseLoad(t)
	}
	if v, ok := namedConsts[t.s]; ok {
		return numA(v), nil
	}
	v, err := parseNum(t.s)
	if err != nil {
		if unsupportedWords[t.s] {
			return nil, p.errAt(t, true, "not implemented")
		}
		return nil, p.errAt(t, false, "expected a number, len, a named constant or a protocol load")
	}
	return numA(v), nil
}

func (p *parser) parseLoad(proto token) (arith, error) {
	p.next() // [
	idx, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	size := 1
	if t := p.peek(); t.s == ":" {
		p.next()
		st := p.next()
		switch st.s {
		case "1":
		case "2":
			size = 2
		case "4":
			size = 4
		default:
			return nil, p.errAt(st, false, "load size must be 1, 2 or 4")
		}
	}
	if t := p.next(); t.s != "]" {
		return nil, p.errAt(t, false, "expected ]")
	}
	ld := loadA{idx: idx, size: size}
	switch proto.s {
	case "ether":
		ld.base = 0
	case "ip", "ip6", "arp", "rarp":
		ld.guard = p.etherType(etherTypes[proto.s])
		ld.base = 14 + p.off
	case "tcp", "udp", "icmp", "igmp", "sctp":
		ld.guard = and(p.etherType(0x0800), p.ipProto4(ipProtos[proto.s]), p.notFrag4())
		ld.transport = true
		ld.base = 14 + p.off
	case "icmp6":
		ld.guard = and(p.etherType(0x86dd), cmpNode{code: p.ldb(20), cond: bpf.JumpEqual, val: 58})
		ld.base = 54 + p.off
	default:
		return nil, p.errAt(proto, true, "loads relative to %s are not implemented", proto.s)
	}
	return ld, nil
}

var etherTypes = map[string]uint32{"ip": 0x0800, "ip6": 0x86dd, "arp": 0x0806, "rarp": 0x8035}

var ipProtos = map[string]uint32{
	"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "sctp": 132, "icmp6": 58, "ah": 51, "esp": 50, "pim": 103, "vrrp": 112,
}

var namedConsts = map[string]uint32{
	"tcpflags": 13, "tcp-fin": 0x01, "tcp-syn": 0x02, "tcp-rst": 0x04, "tcp-push": 0x08,
	"tcp-ack": 0x10, "tcp-urg": 0x20, "tcp-ece": 0x40, "tcp-cwr": 0x80,
	"icmptype": 0, "icmpcode": 1,
	"icmp-echoreply": 0, "icmp-unreach": 3, "icmp-sourcequench": 4, "icmp-redirect": 5,
	"icmp-echo": 8, "icmp-routeradvert": 9, "icmp-routersolicit": 10, "icmp-timxceed": 11,
	"icmp-paramprob": 12, "icmp-tstamp": 13, "icmp-tstampreply": 14, "icmp-ireq": 15,
	"icmp-ireqreply": 16, "icmp-maskreq": 17, "icmp-maskreply": 18,
	"icmp6type": 0, "icmp6code": 1,
	"icmp6-destinationunreach": 1, "icmp6-packettoobig": 2, "icmp6-timeexceeded": 3,
	"icmp6-parameterproblem": 4, "icmp6-echo": 128, "icmp6-echoreply": 129,
	"icmp6-multicastlistenerquery": 130, "icmp6-multicastlistenerreportv1": 131,
	"icmp6-multicastlistenerdone": 132, "icmp6-routersolicit": 133, "icmp6-routeradvert": 134,
	"icmp6-neighborsolicit": 135, "icmp6-neighboradvert": 136, "icmp6-redirect": 137,
}

// parseNum reads a number as libpcap does: 0x hex, leading-0 octal,
// decimal; it must fit 32 bits.
func parseNum(s string) (uint32, error) {
	base := 10
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	v, err := strconv.ParseUint(s, base, 32)
	return uint32(v), err
}

// Words of pcap-filter(7) that this compiler refuses by name.
var unsupportedWords = map[string]bool{
	"gateway": true, "protochain": true, "mpls": true, "pppoes": true, "pppoed": true,
	"geneve": true, "vxlan": true, "inbound": true, "outbound": true, "ifname": true, "on": true,
	"rulenum": true, "reason": true, "rset": true, "ruleset": true, "srnr": true, "subrulenum": true,
	"action": true, "llc": true, "iso": true, "esis": true, "es-is": true, "isis": true, "is-is": true,
	"clnp": true, "stp": true, "ipx": true, "netbeui": true, "decnet": true, "lat": true, "sca": true,
	"moprc": true, "mopdl": true, "atalk": true, "aarp": true, "fddi": true, "tr": true, "wlan": true,
	"type": true, "subtype": true, "dir": true, "ra": true, "ta": true, "addr1": true, "addr2": true,
	"addr3": true, "addr4": true, "bssid": true, "radio": true, "slip": true, "link": true, "ppp": true,
	"hdlc": true, "lane": true, "metac": true, "bcc": true, "sc": true, "ilmic": true, "oamf4ec": true,
	"oamf4sc": true, "oam": true, "oamf4": true, "connectmsg": true, "metaconnect": true, "vpi": true,
	"vci": true, "carp": true, "igrp": true, "vrrp": true, "pim": true, "l1": true, "l2": true,
	"iih": true, "lsp": true, "snp": true, "csnp": true, "psnp": true, "atm": true, "ip6multicast": true,
	"dst_addr": true, "hostname": true, "ieee802_11": true, "ether6": true,
}
