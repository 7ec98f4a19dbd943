package filter

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Arithmetic of relations.
type arith interface{ isArith() }

type numA uint32
type lenA struct{}
type binA struct {
	op   bpf.ALUOp
	l, r arith
}
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
func (loadA) isArith() {}

// guards returns the conditions of every load in a, left to right.
func guards(a arith) []node {
	switch a := a.(type) {
	case binA:
		return append(guards(a.l), guards(a.r)...)
	case loadA:
		g := guards(a.idx)
		if a.guard != nil {
			g = append(g, a.guard)
		}
		return g
	}
	return nil
}

const scratchSlots = 16

// genArith returns instructions leaving a's value in A; they may use X and
// scratch slots from depth up.
func genArith(a arith, depth int) ([]bpf.Instruction, error) {
	if depth >= scratchSlots {
		return nil, fmt.Errorf("the arithmetic nests deeper than the %d scratch slots of classic BPF", scratchSlots)
	}
	switch a := a.(type) {
	case numA:
		return []bpf.Instruction{bpf.LoadConstant{Dst: bpf.RegA, Val: uint32(a)}}, nil
	case lenA:
		return []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtLen}}, nil
	case binA:
		if k, ok := a.r.(numA); ok {
			l, err := genArith(a.l, depth)
			if err != nil {
				return nil, err
			}
			return append(l, bpf.ALUOpConstant{Op: a.op, Val: uint32(k)}), nil
		}
		r, err := genArith(a.r, depth)
		if err != nil {
			return nil, err
		}
		l, err := genArith(a.l, depth+1)
		if err != nil {
			return nil, err
		}
		code := append(r, bpf.StoreScratch{Src: bpf.RegA, N: depth})
		code = append(code, l...)
		return append(code, bpf.LoadScratch{Dst: bpf.RegX, N: depth}, bpf.ALUOpX{Op: a.op}), nil
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
func (p *parser) relation(l arith, op bpf.JumpTest, r arith, at token) (node, error) {
	g := append(guards(l), guards(r)...)
	var c cmpNode
	if k, ok := r.(numA); ok {
		code, err := genArith(l, 0)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		c = cmpNode{code: code, cond: op, val: uint32(k)}
	} else {
		rc, err := genArith(r, 0)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		lc, err := genArith(l, 1)
		if err != nil {
			return nil, p.errAt(at, true, "%v", err)
		}
		code := append(rc, bpf.StoreScratch{Src: bpf.RegA, N: 0})
		code = append(code, lc...)
		code = append(code, bpf.LoadScratch{Dst: bpf.RegX, N: 0})
		c = cmpNode{code: code, cond: op, x: true}
	}
	return and(append(g, c)...), nil
}

// fold computes an operation on two constants (as 32-bit unsigned, like
// the program would).
func fold(b binA) arith {
	l, ok1 := b.l.(numA)
	r, ok2 := b.r.(numA)
	if !ok1 || !ok2 {
		return b
	}
	x, y := uint32(l), uint32(r)
	switch b.op {
	case bpf.ALUOpAdd:
		return numA(x + y)
	case bpf.ALUOpSub:
		return numA(x - y)
	case bpf.ALUOpMul:
		return numA(x * y)
	case bpf.ALUOpDiv:
		if y != 0 {
			return numA(x / y)
		}
	case bpf.ALUOpMod:
		if y != 0 {
			return numA(x % y)
		}
	case bpf.ALUOpAnd:
		return numA(x & y)
	case bpf.ALUOpOr:
		return numA(x | y)
	case bpf.ALUOpXor:
		return numA(x ^ y)
	case bpf.ALUOpShiftLeft:
		if y < 32 {
			return numA(x << y)
		}
		return numA(0)
	case bpf.ALUOpShiftRight:
		if y < 32 {
			return numA(x >> y)
		}
		return numA(0)
	}
	return b
}
