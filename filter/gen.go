package filter

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// The compiled program returns this for a match, like tcpdump's (the
// snapshot length), and 0 otherwise.
const matchLen = 262144

// maxInstructions is the kernel's limit for classic BPF (BPF_MAXINSNS).
const maxInstructions = 4096

// Boolean tree: leaves are comparisons, each with the instructions that
// put the value to compare in A (and X for a register comparison).
type node interface{ isNode() }

type andNode struct{ a, b node }
type orNode struct{ a, b node }
type notNode struct{ a node }
type constNode bool
type cmpNode struct {
	code []bpf.Instruction
	cond bpf.JumpTest
	val  uint32
	x    bool // compare A with X, not with val
}

func (andNode) isNode()   {}
func (orNode) isNode()    {}
func (notNode) isNode()   {}
func (constNode) isNode() {}
func (cmpNode) isNode()   {}

func and(ns ...node) node {
	var r node
	for _, n := range ns {
		if n == nil {
			continue
		}
		if r == nil {
			r = n
		} else {
			r = andNode{r, n}
		}
	}
	if r == nil {
		return constNode(true)
	}
	return r
}

func or(ns ...node) node {
	var r node
	for _, n := range ns {
		if r == nil {
			r = n
		} else {
			r = orNode{r, n}
		}
	}
	if r == nil {
		return constNode(false)
	}
	return r
}

// constValue returns n's value when it is the same for every frame:
// comparisons of numbers decided by the parser, combined with and, or
// and not (a constant false on one side of and decides it, as a constant
// true does or).
func constValue(n node) (value, known bool) {
	switch n := n.(type) {
	case constNode:
		return bool(n), true
	case notNode:
		v, ok := constValue(n.a)
		return !v, ok
	case andNode:
		a, aok := constValue(n.a)
		b, bok := constValue(n.b)
		if aok && !a || bok && !b {
			return false, true
		}
		return true, aok && bok
	case orNode:
		a, aok := constValue(n.a)
		b, bok := constValue(n.b)
		if aok && a || bok && b {
			return true, true
		}
		return false, aok && bok
	}
	return false, false
}

type label int

// item is one instruction being laid out: either a plain one or a jump to
// labels, resolved once every label has its place.
type item struct {
	ins  bpf.Instruction
	kind int // 0 plain, 1 conditional, 2 ja
	cond bpf.JumpTest
	val  uint32
	x    bool
	t, f label
}

type builder struct {
	items  []item
	labels []int
}

func (b *builder) newLabel() label {
	b.labels = append(b.labels, -1)
	return label(len(b.labels) - 1)
}

func (b *builder) place(l label) { b.labels[l] = len(b.items) }

func (b *builder) emit(ins ...bpf.Instruction) {
	for _, in := range ins {
		b.items = append(b.items, item{ins: in})
	}
}

// gen lays out n so that control reaches t when it holds and f when not.
func (b *builder) gen(n node, t, f label) {
	switch n := n.(type) {
	case constNode:
		if n {
			b.items = append(b.items, item{kind: 2, t: t})
		} else {
			b.items = append(b.items, item{kind: 2, t: f})
		}
	case cmpNode:
		b.emit(n.code...)
		b.items = append(b.items, item{kind: 1, cond: n.cond, val: n.val, x: n.x, t: t, f: f})
	case portNode:
		b.gen(n.lower(), t, f)
	case notNode:
		b.gen(n.a, f, t)
	case andNode:
		m := b.newLabel()
		b.gen(n.a, m, f)
		b.place(m)
		b.gen(n.b, t, f)
	case orNode:
		m := b.newLabel()
		b.gen(n.a, t, m)
		b.place(m)
		b.gen(n.b, t, f)
	default:
		panic(fmt.Sprintf("filter: unknown node %T", n))
	}
}

// assemble resolves the labels into skips. A conditional jump reaches at
// most 255 instructions ahead; a farther one goes through two
// unconditional jumps inserted right after it.
func (b *builder) assemble() ([]bpf.Instruction, error) {
	for {
		far := -1
		for i, it := range b.items {
			if it.kind == 1 && (b.labels[it.t]-i-1 > 255 || b.labels[it.f]-i-1 > 255) {
				far = i
				break
			}
		}
		if far < 0 {
			break
		}
		for l, pos := range b.labels {
			if pos > far {
				b.labels[l] = pos + 2
			}
		}
		it := b.items[far]
		lf, lt := b.newLabel(), b.newLabel()
		b.labels[lf], b.labels[lt] = far+1, far+2
		ins := []item{{kind: 2, t: it.f}, {kind: 2, t: it.t}}
		b.items[far].t, b.items[far].f = lt, lf
		b.items = append(b.items[:far+1], append(ins, b.items[far+1:]...)...)
		if len(b.items) > maxInstructions {
			break
		}
	}
	if len(b.items) > maxInstructions {
		return nil, fmt.Errorf("the program needs %d instructions; classic BPF allows %d", len(b.items), maxInstructions)
	}
	out := make([]bpf.Instruction, len(b.items))
	for i, it := range b.items {
		switch it.kind {
		case 0:
			out[i] = it.ins
		case 2:
			out[i] = bpf.Jump{Skip: uint32(b.labels[it.t] - i - 1)}
		case 1:
			st, sf := uint8(b.labels[it.t]-i-1), uint8(b.labels[it.f]-i-1)
			if it.x {
				out[i] = bpf.JumpIfX{Cond: it.cond, SkipTrue: st, SkipFalse: sf}
			} else {
				out[i] = bpf.JumpIf{Cond: it.cond, Val: it.val, SkipTrue: st, SkipFalse: sf}
			}
		}
	}
	return out, nil
}

// compileTree lays out a whole filter: match returns matchLen, no match 0.
func compileTree(n node) ([]bpf.Instruction, error) {
	b := &builder{}
	t, f := b.newLabel(), b.newLabel()
	b.gen(n, t, f)
	b.place(t)
	b.emit(bpf.RetConstant{Val: matchLen})
	b.place(f)
	b.emit(bpf.RetConstant{Val: 0})
	return b.assemble()
}
