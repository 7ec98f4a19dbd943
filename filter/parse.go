package filter

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// Limits on an expression. The parser reads each token once (no
// backtracking), so its work grows linearly with the expression's length;
// the limits bound the stack that its recursion needs and the memory of a
// compile.
const (
	// MaxDepth is how deeply parentheses, brackets, not and unary minus
	// may nest. People write a handful of levels; generated filters
	// chain alternatives with or, which does not nest. tcpdump's own
	// parser gives up at just under 10000 (its stack of 10000 entries),
	// and 1000 levels keep the recursive descent within a few megabytes
	// of stack.
	MaxDepth = 1000
	// MaxLength is the longest expression, in bytes: 128 KiB, the longest
	// single argument Linux passes to a program (MAX_ARG_STRLEN), so an
	// expression tcpdump takes as one argument fits. A classic BPF
	// program of 4096 instructions holds far less.
	MaxLength = 128 << 10
)

// Compile compiles a tcpdump (pcap-filter) expression for Ethernet frames
// into classic BPF that returns 262144 for a matching frame and 0 for
// others, as `tcpdump -d` would. An empty expression matches every frame.
// A construct this compiler does not implement is refused with an *Error
// naming it (errors.Is(err, ErrUnsupportedConstruct)), never compiled into a filter
// that matches something else; so is an expression longer than MaxLength
// or nested deeper than MaxDepth.
func Compile(expr string) ([]bpf.Instruction, error) {
	n, err := parse(expr, limits{MaxDepth, MaxLength}, nil)
	if err != nil {
		return nil, err
	}
	prog, err := compileTree(n)
	if err != nil {
		return nil, &Error{Expr: expr, Msg: err.Error(), Unsupported: true}
	}
	return prog, nil
}

// limits are the most nesting levels and bytes parse reads: MaxDepth and
// MaxLength but in tests that measure the parser alone.
type limits struct{ depth, length int }

// parse turns expr into a tree. When steps is not nil it receives the
// parser's work: tokens read plus parsing functions entered.
func parse(expr string, lim limits, steps *int) (node, error) {
	if len(expr) > lim.length {
		return nil, &Error{Expr: expr, Pos: lim.length, Msg: fmt.Sprintf("the expression is %d bytes long, more than the %d this compiler reads", len(expr), lim.length), Unsupported: true}
	}
	if strings.TrimSpace(expr) == "" {
		return constNode(true), nil
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{expr: expr, toks: toks, maxDepth: lim.depth}
	n, err := p.parse()
	if steps != nil {
		*steps = p.steps
	}
	if err != nil {
		return nil, err
	}
	if v, ok := constValue(n); ok && !v {
		// libpcap refuses a filter its optimizer reduces to "ret #0".
		return nil, &Error{Expr: expr, Msg: "the expression rejects all packets: its comparisons between constants are false, which tcpdump refuses too"}
	}
	return n, nil
}

type qual struct {
	proto string // "", "ether", "ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp", ...
	dir   string // "", "src", "dst", "src or dst", "src and dst"
	typ   string // "", "host", "net", "port", "portrange", "proto"
}

type parser struct {
	expr string
	toks []token
	i    int
	// off is how far the link-layer payload moved: 4 per vlan keyword
	// parsed so far, as in libpcap, where vlan shifts every later
	// primitive whatever the and/or structure.
	off uint32
	// last holds the qualifiers a bare id after and/or takes ("port 53
	// or 80"), when lastOK: as in libpcap, those of the last primitive
	// with qualifiers; a protocol name, a relation and the other
	// keyword primitives leave none, and a parenthesized group leaves
	// those from before it.
	last   qual
	lastOK bool
	// depth is the current nesting, maxDepth its limit.
	depth, maxDepth int
	// idDone is set when a bare id was read.
	idDone bool
	// steps counts tokens read and parsing functions entered: the
	// parser's work, which tests check grows linearly.
	steps int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	p.steps++
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// enter starts a nested level at t (a parenthesis, bracket, not or unary
// minus); leave ends it.
func (p *parser) enter(t token) error {
	p.steps++
	p.depth++
	if p.depth > p.maxDepth {
		return p.errAt(t, true, "the expression nests deeper than %d levels of parentheses, brackets, not and unary minus, the most this compiler reads", p.maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

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
	return &Error{Expr: p.expr, Pos: t.pos, Construct: t.text(), Msg: fmt.Sprintf(format, a...), Unsupported: unsupported}
}

// short cuts a word an error message quotes to a readable length.
func short(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "..."
}

// maxQuoted is the longest word an error message quotes whole.
const maxQuoted = 64

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
func isNot(t token) bool { return t.kind == tWord && t.s == "not" || t.kind == tOp && t.s == "!" }

// parseExpr: and and or have the same precedence and associate left to
// right, as in tcpdump.
func (p *parser) parseExpr() (node, error) {
	n, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	return p.exprRest(n)
}

// exprRest reads the and/or chain that continues after n.
func (p *parser) exprRest(n node) (node, error) {
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

// operand is what a term starts with: a boolean (n), or arithmetic (a)
// that a comparison must follow, unless it is a lone number (num is its
// token's index, else -1), which may also be an id taking the last
// qualifiers: "port 53 or 80", "port 53 or (80)".
type operand struct {
	n   node
	a   arith
	num int
	id  idKind
}

// idKind says whether a boolean is an id without qualifiers, which
// libpcap's grammar treats apart: "port 53 or (80 or 81)" holds only
// ids, and "(80 or 81)" may follow and, or and not but not start a
// group.
type idKind int

const (
	notID      idKind = iota
	simpleID          // 80, not 80, (80)
	compoundID        // (80 or 81)
)

// parseUnary reads a term: not, a parenthesized group, a relation or a
// primitive.
func (p *parser) parseUnary() (node, error) {
	o, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	n, _, err := p.toBool(o)
	return n, err
}

// toBool turns an operand into a boolean: arithmetic without a comparison
// is a lone number standing for an id, or an error.
func (p *parser) toBool(o operand) (node, idKind, error) {
	if o.a == nil {
		return o.n, o.id, nil
	}
	if o.num >= 0 {
		n, err := p.bareID(o.num)
		return n, simpleID, err
	}
	return nil, notID, p.errAt(p.peek(), false, "expected a comparison (>, <, >=, <=, =, !=)")
}

// parseOperand reads one term, deciding between arithmetic and boolean
// without going back: a parenthesized group is read once, as whichever it
// turns out to be, and what follows it says what it was.
func (p *parser) parseOperand() (operand, error) {
	p.steps++
	t := p.peek()
	switch {
	case isNot(t):
		if err := p.enter(t); err != nil {
			return operand{}, err
		}
		p.next()
		o, err := p.parseOperand()
		if err != nil {
			return operand{}, err
		}
		n, kind, err := p.toBool(o)
		if err != nil {
			return operand{}, err
		}
		p.leave()
		if kind != notID {
			kind = simpleID
		}
		return operand{n: notNode{n}, num: -1, id: kind}, nil
	case t.kind == tOp && t.s == "(":
		if err := p.enter(t); err != nil {
			return operand{}, err
		}
		p.next()
		last, lastOK := p.last, p.lastOK
		g, err := p.parseGroup()
		if err != nil {
			return operand{}, err
		}
		if c := p.peek(); c.kind != tOp || c.s != ")" {
			return operand{}, p.errAt(c, false, "expected )")
		}
		p.next()
		p.leave()
		if g.a == nil {
			p.last, p.lastOK = last, lastOK
			return g, nil
		}
		start := p.i
		a, err := p.arithRest(g.a, 0)
		if err != nil {
			return operand{}, err
		}
		if p.i != start {
			g.num = -1
		}
		return p.maybeRelation(a, g.num)
	case p.mayStartArith():
		start := p.i
		a, err := p.parseArith(0)
		if err != nil {
			return operand{}, err
		}
		num := -1
		if p.i == start+1 {
			if _, ok := a.(numA); ok {
				num = start
			}
		}
		return p.maybeRelation(a, num)
	}
	p.idDone = false
	n, err := p.parsePrimitive()
	kind := notID
	if p.idDone {
		kind = simpleID
	}
	return operand{n: n, num: -1, id: kind}, err
}

// parseGroup reads what is inside parentheses: arithmetic, which the
// caller continues, or a boolean expression. A group that starts with a
// bare id ("port 53 or (80 or 81)") holds only ids, as in libpcap.
func (p *parser) parseGroup() (operand, error) {
	first := p.peek()
	o, err := p.parseOperand()
	if err != nil {
		return operand{}, err
	}
	if c := p.peek(); o.a != nil && c.kind == tOp && c.s == ")" {
		return o, nil
	}
	n, kind, err := p.toBool(o)
	if err != nil {
		return operand{}, err
	}
	switch kind {
	case compoundID:
		return operand{}, p.errAt(first, false, "ids in parentheses may follow and, or or not, but not start a group")
	case simpleID:
		return p.idRest(n, kind)
	}
	n, err = p.exprRest(n)
	return operand{n: n, num: -1}, err
}

// idRest reads the and/or chain of ids that continues after n, an id of
// the given kind, inside parentheses.
func (p *parser) idRest(n node, kind idKind) (operand, error) {
	for {
		t := p.peek()
		if !isAnd(t) && !isOr(t) {
			return operand{n: n, num: -1, id: kind}, nil
		}
		p.next()
		m, err := p.parseIDTerm()
		if err != nil {
			return operand{}, err
		}
		kind = compoundID
		if isAnd(t) {
			n = andNode{n, m}
		} else if merged, ok := mergePorts(n, m); ok {
			n = merged
		} else {
			n = orNode{n, m}
		}
	}
}

// parseIDTerm reads an id, not an id, or ids in parentheses.
func (p *parser) parseIDTerm() (node, error) {
	p.steps++
	t := p.peek()
	if isNot(t) || t.kind == tOp && t.s == "(" || t.kind == tWord && !isKeyword(t.s) {
		o, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		n, kind, err := p.toBool(o)
		if err == nil && kind == notID {
			err = p.errAt(t, false, "expected an address, network or port: in parentheses that start with one, only those may follow")
		}
		return n, err
	}
	return nil, p.errAt(t, false, "expected an address, network or port: in parentheses that start with one, only those may follow")
}

// maybeRelation completes a relation when a comparison follows a.
func (p *parser) maybeRelation(a arith, num int) (operand, error) {
	t := p.peek()
	op, ok := relOps[t.s]
	if !ok || t.kind != tOp {
		return operand{a: a, num: num}, nil
	}
	p.next()
	r, err := p.parseArith(0)
	if err != nil {
		return operand{}, err
	}
	n, err := p.relation(a, op, r, t)
	if err != nil {
		return operand{}, err
	}
	p.lastOK = false
	return operand{n: n, num: -1}, nil
}

// bareID reads the number token at index i again, as an id taking the
// last qualifiers.
func (p *parser) bareID(i int) (node, error) {
	save := p.i
	p.i = i
	defer func() { p.i = save }()
	return p.parseID(p.toks[i])
}

var loadProtos = map[string]bool{
	"ether": true, "ip": true, "ip6": true, "arp": true, "rarp": true,
	"tcp": true, "udp": true, "icmp": true, "igmp": true, "sctp": true, "icmp6": true,
	"pim": true, "vrrp": true, "igrp": true, "carp": true, "ah": true, "esp": true, "radio": true,
}

// mayStartArith reports whether the token ahead starts arithmetic (other
// than an opening parenthesis, which may start either).
func (p *parser) mayStartArith() bool {
	t := p.peek()
	if t.kind == tOp {
		return t.s == "-"
	}
	if t.kind != tWord {
		return false
	}
	if t.s == "len" {
		return true
	}
	if loadProtos[t.s] && p.peekAt(1).kind == tOp && p.peekAt(1).s == "[" {
		return true
	}
	_, ok := numToken(t.s)
	return ok
}

// Relations: arithmetic with libpcap's precedence, lowest first:
// | ^, &, << >>, + -, * / %, unary -.
var relOps = map[string]bpf.JumpTest{
	">": bpf.JumpGreaterThan, "<": bpf.JumpLessThan, ">=": bpf.JumpGreaterOrEqual,
	"<=": bpf.JumpLessOrEqual, "=": bpf.JumpEqual, "==": bpf.JumpEqual, "!=": bpf.JumpNotEqual,
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

// parseArith reads arithmetic whose operators bind at least as tightly as
// those of arithLevels[level].
func (p *parser) parseArith(level int) (arith, error) {
	p.steps++
	u, err := p.parseArithUnary()
	if err != nil {
		return nil, err
	}
	return p.arithRest(u, level)
}

// arithRest continues arithmetic whose first operand, l, is read: the
// operators of the tightest level first, then looser ones, each level
// associating left to right.
func (p *parser) arithRest(l arith, level int) (arith, error) {
	for lv := len(arithLevels) - 1; lv >= level; lv-- {
		for {
			t := p.peek()
			// "&&" and "||" are boolean, lexed whole, so never match.
			if t.kind != tOp || !contains(arithLevels[lv], t.s) {
				break
			}
			p.next()
			r, err := p.parseArith(lv + 1)
			if err != nil {
				return nil, err
			}
			op := aluOps[t.s]
			if msg := libpcapRefuses(op, l, r); msg != "" {
				return nil, p.errAt(t, false, "%s", msg)
			}
			l = binA{op, l, r}
		}
	}
	return l, nil
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
	p.steps++
	t := p.next()
	switch {
	case t.s == "-" && t.kind == tOp:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		a, err := p.parseArithUnary()
		p.leave()
		if err != nil {
			return nil, err
		}
		return negA{a}, nil
	case t.s == "(" && t.kind == tOp:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		a, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.s != ")" || c.kind != tOp {
			return nil, p.errAt(c, false, "expected )")
		}
		p.leave()
		return a, nil
	case t.kind != tWord:
		return nil, p.errAt(t, false, "expected a number, len or a protocol load such as ip[0]")
	case t.s == "len":
		return lenA{}, nil
	case loadProtos[t.s] && p.peek().kind == tOp && p.peek().s == "[":
		return p.parseLoad(t)
	}
	if v, ok := numToken(t.s); ok {
		return numA(v), nil
	}
	if _, err := parseNum(t.s); err != nil && isNumberLike(t.s) {
		return nil, p.errAt(t, false, "%s", numError(t.s, err))
	}
	if unsupportedWords[t.s] {
		return nil, p.errAt(t, true, "not implemented")
	}
	return nil, p.errAt(t, false, "expected a number, len, a named constant or a protocol load")
}

func (p *parser) parseLoad(proto token) (arith, error) {
	open := p.next() // [
	if err := p.enter(open); err != nil {
		return nil, err
	}
	idx, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	size := uint32(1)
	if t := p.peek(); t.kind == tOp && t.s == ":" {
		p.next()
		st := p.next()
		v, ok := numToken(st.s)
		if st.kind != tWord || !ok || v != 1 && v != 2 && v != 4 {
			return nil, p.errAt(st, false, "load size must be 1, 2 or 4")
		}
		size = v
	}
	if t := p.next(); t.s != "]" || t.kind != tOp {
		return nil, p.errAt(t, false, "expected ]")
	}
	p.leave()
	ld := loadA{idx: idx, size: int(size)}
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
		return nil, p.errAt(proto, true, "loads relative to %s are not implemented", proto.text())
	}
	return ld, nil
}

var etherTypes = map[string]uint32{"ip": 0x0800, "ip6": 0x86dd, "arp": 0x0806, "rarp": 0x8035}

var ipProtos = map[string]uint32{
	"icmp": 1, "igmp": 2, "igrp": 9, "tcp": 6, "udp": 17, "sctp": 132, "icmp6": 58, "ah": 51, "esp": 50,
	"pim": 103, "vrrp": 112, "carp": 112,
}

// namedConsts are the names libpcap's scanner reads as numbers, anywhere
// a number may stand.
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
	"icmp6-routerrenum": 138, "icmp6-nodeinformationquery": 139, "icmp6-nodeinformationresponse": 140,
	"icmp6-ineighbordiscoverysolicit": 141, "icmp6-ineighbordiscoveryadvert": 142,
	"icmp6-multicastlistenerreportv2": 143, "icmp6-homeagentdiscoveryrequest": 144,
	"icmp6-homeagentdiscoveryreply": 145, "icmp6-mobileprefixsolicit": 146, "icmp6-mobileprefixadvert": 147,
	"icmp6-certpathsolicit": 148, "icmp6-certpathadvert": 149, "icmp6-multicastrouteradvert": 151,
	"icmp6-multicastroutersolicit": 152, "icmp6-multicastrouterterm": 153,
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
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseUint(s, base, 32)
	return uint32(v), err
}

// numToken reads a word that libpcap's scanner takes for a number: a
// number or a named constant such as tcp-syn.
func numToken(s string) (uint32, bool) {
	if v, ok := namedConsts[s]; ok {
		return v, true
	}
	v, err := parseNum(s)
	return v, err == nil
}

// isNumberLike: a word libpcap's scanner reads as a number (digits, or 0x
// and hex digits), whatever its value.
func isNumberLike(s string) bool {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		return len(s) > 2 && isHex(s[2:])
	}
	return isDigits(s)
}

// numError says why a word that looks like a number is not one.
func numError(s string, err error) string {
	s = short(s)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return fmt.Sprintf("number %s does not fit in 32 bits", s)
	}
	if len(s) > 1 && s[0] == '0' && isDigits(s) {
		return fmt.Sprintf("number %s has a leading 0, which makes it octal, and a digit that is not", s)
	}
	return fmt.Sprintf("%s is not a number", s)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// Words of pcap-filter(7) that this compiler refuses by name.
var unsupportedWords = map[string]bool{
	"gateway": true, "protochain": true, "mpls": true, "pppoes": true, "pppoed": true,
	"geneve": true, "vxlan": true, "inbound": true, "outbound": true, "ifname": true, "on": true,
	"ifindex": true, "byte": true,
	"rulenum": true, "reason": true, "rset": true, "ruleset": true, "srnr": true, "subrulenum": true,
	"rnr": true, "action": true, "llc": true, "iso": true, "esis": true, "es-is": true, "isis": true, "is-is": true,
	"clnp": true, "stp": true, "ipx": true, "netbeui": true, "decnet": true, "lat": true, "sca": true,
	"moprc": true, "mopdl": true, "atalk": true, "aarp": true,
	"type": true, "subtype": true, "dir": true, "direction": true, "ra": true, "ta": true, "addr1": true, "addr2": true,
	"addr3": true, "addr4": true, "address1": true, "address2": true, "address3": true, "address4": true,
	"bssid": true, "radio": true,
	"hdlc": true, "lane": true, "metac": true, "bcc": true, "sc": true, "ilmic": true, "oamf4ec": true,
	"oamf4sc": true, "oam": true, "oamf4": true, "connectmsg": true, "metaconnect": true, "vpi": true,
	"vci": true, "l1": true, "l2": true,
	"iih": true, "lsp": true, "snp": true, "csnp": true, "psnp": true, "atm": true, "ip6multicast": true,
	"dst_addr": true, "hostname": true, "ieee802_11": true, "ether6": true,
	"fisu": true, "lssu": true, "lsu": true, "msu": true, "hfisu": true, "hlssu": true, "hmsu": true,
	"sio": true, "opc": true, "dpc": true, "sls": true, "hsio": true, "hopc": true, "hdpc": true, "hsls": true,
}
