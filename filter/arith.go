package filter

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Arithmetic of relations, kept as written (nothing folded) until code
// generation, so that the checks libpcap makes on the code it generates
// see the same operands.
type arith interface{ isArith() }

type numA uint32
type lenA struct{}
type binA struct {
	op   bpf.ALUOp
	l, r arith
}
type negA struct{ a arith }
type loadA struct {
	idx   arith
	size  int
	guard node // what must hold for the load to mean anything
	base  uint32
	// transport: the load is relative to the end of the IPv4 header
	// (base + 4*IHL).
	transport bool
}

func (numA) isArith()  {}
func (lenA) isArith()  {}
func (binA) isArith()  {}
func (negA) isArith()  {}
func (loadA) isArith() {}

// guards returns the conditions of the loads in a that libpcap keeps: of
// an arithmetic operation, only those of its left operand (gen_arth
// drops the right operand's protocol check, so "len - ip[0] > 0" tests
// non-IP frames too); of a load, those of its index and its own.
func guards(a arith) []node {
	switch a := a.(type) {
	case binA:
		return guards(a.l)
	case negA:
		return guards(a.a)
	case loadA:
		g := guards(a.idx)
		if a.guard != nil {
			g = append(g, a.guard)
		}
		return g
	}
	return nil
}

// libpcapRefuses returns why libpcap refuses "l op r", or "". Its code
// generator looks at the first instruction of the right operand's code:
// when that loads a number (the operand's leftmost number, as in
// "(40 + len)" or "ip[0]"), a divisor 0 or a shift above 31 is refused.
// Its optimizer, which tcpdump runs, refuses them too where it finds the
// right operand constant (see constVal) and the left one not, and refuses
// a constant division by zero.
func libpcapRefuses(op bpf.ALUOp, l, r arith) string {
	what := func(v uint32) string {
		switch {
		case op == bpf.ALUOpDiv && v == 0:
			return "division by zero"
		case op == bpf.ALUOpMod && v == 0:
			return "modulus by zero"
		case (op == bpf.ALUOpShiftLeft || op == bpf.ALUOpShiftRight) && v > 31:
			return "shift by more than 31 bits"
		}
		return ""
	}
	if v, ok := firstNumber(r); ok {
		if msg := what(v); msg != "" {
			return msg + " (as tcpdump, which looks at the first number of the right operand)"
		}
	}
	rv, rc := constVal(r)
	if !rc {
		return ""
	}
	if _, lc := constVal(l); lc && (op == bpf.ALUOpShiftLeft || op == bpf.ALUOpShiftRight) {
		return "" // folded: all bits shifted out
	}
	if msg := what(rv); msg != "" {
		return msg + " (the right operand is constant, as tcpdump's optimizer finds)"
	}
	return ""
}

// firstNumber returns the number libpcap's code for a loads first, if its
// first instruction loads one: the leftmost leaf, found through the left
// operand of operations, the operand of a negation and the index of a
// load.
func firstNumber(a arith) (uint32, bool) {
	for {
		switch x := a.(type) {
		case numA:
			return uint32(x), true
		case binA:
			a = x.l
		case negA:
			a = x.a
		case loadA:
			a = x.idx
		default:
			return 0, false
		}
	}
}

// constVal returns a's value when libpcap's optimizer finds it constant:
// numbers; operations on two constants; x*0, x&0 (the optimizer turns a
// multiplication or and with the constant 0 into 0) and 0*x, 0/x, 0%x,
// 0&x, 0<<x, 0>>x (an operation on an accumulator that is 0).
func constVal(a arith) (uint32, bool) {
	switch a := a.(type) {
	case numA:
		return uint32(a), true
	case negA:
		v, ok := constVal(a.a)
		return -v, ok
	case binA:
		lv, lc := constVal(a.l)
		rv, rc := constVal(a.r)
		switch {
		case lc && rc:
			return foldOp(a.op, lv, rv), true
		case rc && rv == 0 && (a.op == bpf.ALUOpMul || a.op == bpf.ALUOpAnd):
			return 0, true
		case lc && lv == 0:
			switch a.op {
			case bpf.ALUOpMul, bpf.ALUOpDiv, bpf.ALUOpMod, bpf.ALUOpAnd, bpf.ALUOpShiftLeft, bpf.ALUOpShiftRight:
				return 0, true
			}
		}
	}
	return 0, false
}

// foldOp computes x op y as 32-bit unsigned, like the program would; a
// division by zero (refused before folding) gives 0, and a shift by 32 or
// more shifts every bit out, as libpcap folds it.
func foldOp(op bpf.ALUOp, x, y uint32) uint32 {
	switch op {
	case bpf.ALUOpAdd:
		return x + y
	case bpf.ALUOpSub:
		return x - y
	case bpf.ALUOpMul:
		return x * y
	case bpf.ALUOpDiv:
		if y != 0 {
			return x / y
		}
	case bpf.ALUOpMod:
		if y != 0 {
			return x % y
		}
	case bpf.ALUOpAnd:
		return x & y
	case bpf.ALUOpOr:
		return x | y
	case bpf.ALUOpXor:
		return x ^ y
	case bpf.ALUOpShiftLeft:
		if y < 32 {
			return x << y
		}
	case bpf.ALUOpShiftRight:
		if y < 32 {
			return x >> y
		}
	}
	return 0
}

// simplify folds the operations whose operands are all numbers.
func simplify(a arith) arith {
	switch a := a.(type) {
	case binA:
		l, r := simplify(a.l), simplify(a.r)
		x, ok1 := l.(numA)
		y, ok2 := r.(numA)
		if ok1 && ok2 {
			return numA(foldOp(a.op, uint32(x), uint32(y)))
		}
		return binA{a.op, l, r}
	case negA:
		v := simplify(a.a)
		if x, ok := v.(numA); ok {
			return numA(-uint32(x))
		}
		return negA{v}
	case loadA:
		a.idx = simplify(a.idx)
		return a
	}
	return a
}

// scratchSlots is the size of classic BPF's scratch memory M[], and the
// number of registers libpcap's code generator allocates in it.
const scratchSlots = 16

// libpcapRegisters is how many registers libpcap's code for a uses at
// most, base being in use already: it keeps each value computed and not
// yet used in one (the left operand of an operation while the right one
// is computed), and a load takes one for its result while its index still
// holds one.
func libpcapRegisters(a arith, base int) int {
	switch a := a.(type) {
	case binA:
		return max(libpcapRegisters(a.l, base), libpcapRegisters(a.r, base+1))
	case negA:
		return libpcapRegisters(a.a, base)
	case loadA:
		return max(libpcapRegisters(a.idx, base), base+2)
	}
	return base + 1
}

// genArith returns instructions leaving a's value (simplified) in A; they
// may use X and scratch slots from depth up.
func genArith(a arith, depth int) ([]bpf.Instruction, error) {
	if depth >= scratchSlots {
		return nil, fmt.Errorf("the arithmetic nests deeper than the %d scratch slots of classic BPF", scratchSlots)
	}
	switch a := a.(type) {
	case numA:
		return []bpf.Instruction{bpf.LoadConstant{Dst: bpf.RegA, Val: uint32(a)}}, nil
	case lenA:
		return []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtLen}}, nil
	case negA:
		code, err := genArith(a.a, depth)
		if err != nil {
			return nil, err
		}
		return append(code, bpf.NegateA{}), nil
	case binA:
		l, err := genArith(a.l, depth)
		if err != nil {
			return nil, err
		}
		if k, ok := a.r.(numA); ok {
			return append(l, bpf.ALUOpConstant{Op: a.op, Val: uint32(k)}), nil
		}
		// As libpcap: the left operand first, kept in a scratch slot
		// while the right one is computed with the slots above it, so
		// that a left-deep chain (len + ip[0] + ip[1] + ...) needs two
		// slots however long it is.
		r, err := genArith(a.r, depth+1)
		if err != nil {
			return nil, err
		}
		code := append(l, bpf.StoreScratch{Src: bpf.RegA, N: depth})
		code = append(code, r...)
		return append(code, bpf.TAX{}, bpf.LoadScratch{Dst: bpf.RegA, N: depth}, bpf.ALUOpX{Op: a.op}), nil
	case loadA:
		if k, ok := a.idx.(numA); ok {
			if a.transport {
				return []bpf.Instruction{
					bpf.LoadMemShift{Off: a.base},
					bpf.LoadIndirect{Off: a.base + uint32(k), Size: a.size},
				}, nil
			}
			return []bpf.Instruction{bpf.LoadAbsolute{Off: a.base + uint32(k), Size: a.size}}, nil
		}
		code, err := genArith(a.idx, depth)
		if err != nil {
			return nil, err
		}
		if a.transport {
			code = append(code,
				bpf.StoreScratch{Src: bpf.RegA, N: depth},
				bpf.LoadMemShift{Off: a.base},
				bpf.LoadScratch{Dst: bpf.RegA, N: depth},
				bpf.ALUOpX{Op: bpf.ALUOpAdd},
			)
		}
		return append(code, bpf.TAX{}, bpf.LoadIndirect{Off: a.base, Size: a.size}), nil
	}
	return nil, fmt.Errorf("unknown arithmetic %T", a)
}

// relation compiles "l op r": the loads' conditions, then the comparison.
// A comparison of two numbers is decided here, as libpcap's optimizer
// decides it.
func (p *parser) relation(l arith, op bpf.JumpTest, r arith, at token) (node, error) {
	if n := max(libpcapRegisters(l, 0), libpcapRegisters(r, 1)); n > scratchSlots {
		return nil, p.errAt(at, false, "the comparison needs %d registers in libpcap's code, which has %d (tcpdump refuses it too); nest less to the right", n, scratchSlots)
	}
	g := append(guards(l), guards(r)...)
	l, r = simplify(l), simplify(r)
	if x, ok := l.(numA); ok {
		if y, ok := r.(numA); ok {
			return constNode(compare(op, uint32(x), uint32(y))), nil
		}
	}
	var c cmpNode
	if k, ok := r.(numA); ok {
		code, err := genArith(l, 0)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		c = cmpNode{code: code, cond: op, val: uint32(k)}
	} else {
		lc, err := genArith(l, 0)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		rc, err := genArith(r, 1)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		code := append(lc, bpf.StoreScratch{Src: bpf.RegA, N: 0})
		code = append(code, rc...)
		code = append(code, bpf.TAX{}, bpf.LoadScratch{Dst: bpf.RegA, N: 0})
		c = cmpNode{code: code, cond: op, x: true}
	}
	return and(append(g, c)...), nil
}

// compare evaluates x op y.
func compare(op bpf.JumpTest, x, y uint32) bool {
	switch op {
	case bpf.JumpEqual:
		return x == y
	case bpf.JumpNotEqual:
		return x != y
	case bpf.JumpGreaterThan:
		return x > y
	case bpf.JumpLessThan:
		return x < y
	case bpf.JumpGreaterOrEqual:
		return x >= y
	case bpf.JumpLessOrEqual:
		return x <= y
	}
	return false
}
