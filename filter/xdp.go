package filter

import (
	"fmt"
	"strconv"

	"github.com/cilium/ebpf/asm"
	"golang.org/x/net/bpf"
)

// Registers of the translation.
const (
	regCtx     = asm.R6 // struct xdp_md *, set by the caller
	regA       = asm.R7
	regX       = asm.R8
	regData    = asm.R9
	regDataEnd = asm.R5
)

// ScratchStack is how many bytes below the frame pointer the translated
// program uses: the scratch memory M[0..15] and a buffer for loads from
// the buffers of a multi-buffer frame after the first.
const ScratchStack = 4*scratchSlots + 8

// loadBuf is where bpf_xdp_load_bytes puts what it reads.
const loadBuf = -ScratchStack

// maxPacketOff bounds every packet offset the translation computes, so
// the verifier can prove its loads stay in the packet.
const maxPacketOff = 0xffff

// Validate checks that prog is classic BPF the XDP translation accepts:
// known instructions, jumps inside the program, no constant division by
// zero, no extension but the packet length, and a return at the end.
// A bpf.RawInstruction (as from tcpdump -ddd) is checked as what it
// disassembles to.
func Validate(prog []bpf.Instruction) error {
	_, err := validate(prog)
	return err
}

// validate returns a copy of prog with raw instructions disassembled.
func validate(prog []bpf.Instruction) ([]bpf.Instruction, error) {
	if len(prog) == 0 {
		return nil, fmt.Errorf("classic BPF: empty program")
	}
	if len(prog) > maxInstructions {
		return nil, fmt.Errorf("classic BPF: %d instructions, more than %d", len(prog), maxInstructions)
	}
	prog = append([]bpf.Instruction(nil), prog...)
	for i, ins := range prog {
		if raw, ok := ins.(bpf.RawInstruction); ok {
			ins = raw.Disassemble()
			prog[i] = ins
		}
		left := len(prog) - i - 1
		bad := func(format string, a ...any) error {
			return fmt.Errorf("classic BPF instruction %d (%v): %s", i, ins, fmt.Sprintf(format, a...))
		}
		switch ins := ins.(type) {
		case bpf.Jump:
			if int64(ins.Skip) >= int64(left) {
				return nil, bad("jumps past the end")
			}
		case bpf.JumpIf:
			if int(ins.SkipTrue) >= left || int(ins.SkipFalse) >= left {
				return nil, bad("jumps past the end")
			}
			if ins.Cond > bpf.JumpBitsNotSet {
				return nil, bad("unknown condition")
			}
		case bpf.JumpIfX:
			if int(ins.SkipTrue) >= left || int(ins.SkipFalse) >= left {
				return nil, bad("jumps past the end")
			}
			if ins.Cond > bpf.JumpBitsNotSet {
				return nil, bad("unknown condition")
			}
		case bpf.ALUOpConstant:
			if ins.Val == 0 && (ins.Op == bpf.ALUOpDiv || ins.Op == bpf.ALUOpMod) {
				return nil, bad("divides by zero")
			}
			if !knownALU(ins.Op) {
				return nil, bad("unknown operation")
			}
		case bpf.ALUOpX:
			if !knownALU(ins.Op) {
				return nil, bad("unknown operation")
			}
		case bpf.LoadExtension:
			if ins.Num != bpf.ExtLen {
				return nil, bad("extension %v is not available to XDP (only the packet length is)", ins.Num)
			}
		case bpf.LoadAbsolute:
			if ins.Size != 1 && ins.Size != 2 && ins.Size != 4 {
				return nil, bad("load size %d", ins.Size)
			}
		case bpf.LoadIndirect:
			if ins.Size != 1 && ins.Size != 2 && ins.Size != 4 {
				return nil, bad("load size %d", ins.Size)
			}
		case bpf.LoadScratch:
			if ins.N < 0 || ins.N >= scratchSlots || (ins.Dst != bpf.RegA && ins.Dst != bpf.RegX) {
				return nil, bad("scratch slot or register out of range")
			}
		case bpf.StoreScratch:
			if ins.N < 0 || ins.N >= scratchSlots || (ins.Src != bpf.RegA && ins.Src != bpf.RegX) {
				return nil, bad("scratch slot or register out of range")
			}
		case bpf.LoadConstant:
			if ins.Dst != bpf.RegA && ins.Dst != bpf.RegX {
				return nil, bad("register out of range")
			}
		case bpf.LoadMemShift, bpf.RetA, bpf.RetConstant, bpf.TAX, bpf.TXA, bpf.NegateA:
		default:
			return nil, bad("not supported")
		}
	}
	switch prog[len(prog)-1].(type) {
	case bpf.RetA, bpf.RetConstant:
	default:
		return nil, fmt.Errorf("classic BPF: the last instruction must be a return")
	}
	return prog, nil
}

// ebpfALU maps each classic BPF ALU operation to its eBPF one; an
// operation not in it is unknown (validate refuses it).
var ebpfALU = map[bpf.ALUOp]asm.ALUOp{
	bpf.ALUOpAdd:        asm.Add,
	bpf.ALUOpSub:        asm.Sub,
	bpf.ALUOpMul:        asm.Mul,
	bpf.ALUOpDiv:        asm.Div,
	bpf.ALUOpOr:         asm.Or,
	bpf.ALUOpAnd:        asm.And,
	bpf.ALUOpShiftLeft:  asm.LSh,
	bpf.ALUOpShiftRight: asm.RSh,
	bpf.ALUOpMod:        asm.Mod,
	bpf.ALUOpXor:        asm.Xor,
}

func knownALU(op bpf.ALUOp) bool {
	_, ok := ebpfALU[op]
	return ok
}

// XDP translates the classic BPF program prog into eBPF for an XDP
// program. On entry R6 must hold the context (struct xdp_md *). The code
// jumps to the label match when prog would return a non-zero length and to
// noMatch when it would return 0 — which includes every load beyond the
// packet's end and a division by zero, as in classic BPF. It overwrites R0
// to R5 and R7 to R9 and the ScratchStack bytes below the frame pointer,
// and uses labels starting "cbpf_".
//
// The packet is the whole frame: loads beyond its first buffer (the
// others of a multi-buffer, xdp.frags, frame) go through
// bpf_xdp_load_bytes, and len is bpf_xdp_get_buff_len; both helpers need
// Linux 5.18 or later.
func XDP(prog []bpf.Instruction, match, noMatch string) (asm.Instructions, error) {
	prog, err := validate(prog)
	if err != nil {
		return nil, err
	}
	var prefix string
	lbl := func(i int) string { return prefix + strconv.Itoa(i) }
	in := asm.Instructions{
		asm.LoadMem(regData, regCtx, 0, asm.Word),
		asm.LoadMem(regDataEnd, regCtx, 4, asm.Word),
		asm.Mov.Imm32(regA, 0),
		asm.Mov.Imm32(regX, 0),
		// Never taken (A is 0), but they keep both labels reachable in
		// the verifier's control-flow check, which refuses unreachable
		// code, whatever prog returns.
		asm.JEq.Imm32(regA, 1, match),
		asm.JEq.Imm32(regA, 1, noMatch),
	}
	for _, ins := range prog {
		if _, ok := ins.(bpf.LoadScratch); ok {
			in = append(in, asm.Mov.Imm(asm.R0, 0))
			for off := -4 * scratchSlots; off < 0; off += 8 {
				in = append(in, asm.StoreMem(asm.RFP, int16(off), asm.R0, asm.DWord))
			}
			break
		}
	}
	slot := func(n int) int16 { return int16(-4*scratchSlots + 4*n) }
	reg := func(r bpf.Register) asm.Register {
		if r == bpf.RegX {
			return regX
		}
		return regA
	}
	// load reads size bytes at packet offset R1 (below maxPacketOff) into
	// dst: from the first buffer directly, from beyond it (the other
	// buffers of a multi-buffer frame) with bpf_xdp_load_bytes; past the
	// frame's end it jumps to noMatch. at names the instruction, for
	// labels.
	load := func(at string, dst asm.Register, size int) asm.Instructions {
		sz := map[int]asm.Size{1: asm.Byte, 2: asm.Half, 4: asm.Word}[size]
		slow, done := at+"_frags", at+"_loaded"
		out := asm.Instructions{
			asm.Mov.Reg(asm.R2, regData),
			asm.Add.Reg(asm.R2, asm.R1),
			asm.Mov.Reg(asm.R3, asm.R2),
			asm.Add.Imm(asm.R3, int32(size)),
			asm.JGT.Reg(asm.R3, regDataEnd, slow),
			asm.LoadMem(dst, asm.R2, 0, sz),
			asm.Ja.Label(done),
			asm.Mov.Reg(asm.R2, asm.R1).WithSymbol(slow),
			asm.Mov.Reg(asm.R1, regCtx),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, loadBuf),
			asm.Mov.Imm(asm.R4, int32(size)),
			asm.FnXdpLoadBytes.Call(),
			asm.LoadMem(regDataEnd, regCtx, 4, asm.Word),
			asm.JNE.Imm(asm.R0, 0, noMatch),
			asm.LoadMem(dst, asm.RFP, loadBuf, sz),
		}
		if size > 1 {
			out = append(out, asm.HostTo(asm.BE, dst, sz).WithSymbol(done))
		} else {
			out = append(out, asm.Mov.Reg32(dst, dst).WithSymbol(done))
		}
		return out
	}
	redundant := redundantLoads(prog)
	translate := func(in asm.Instructions, prog []bpf.Instruction, live []bool, fast uint32) asm.Instructions {
		return translateBody(in, prog, live, redundant, fast, match, noMatch, lbl, load, slot, reg)
	}
	live := reachable(prog)
	// The fast path: when the frame holds the bytes of every constant
	// offset load (up to fastMax), those loads need no check of their
	// own; shorter frames take the checked translation.
	var fast uint32
	for i, ins := range prog {
		var end uint64
		switch ins := ins.(type) {
		case bpf.LoadAbsolute:
			end = uint64(ins.Off) + uint64(ins.Size)
		case bpf.LoadMemShift:
			end = uint64(ins.Off) + 1
		}
		if live[i] && end <= fastMax {
			fast = max(fast, uint32(end))
		}
	}
	if fast > 0 {
		in = append(in,
			asm.Mov.Reg(asm.R1, regData),
			asm.Add.Imm(asm.R1, int32(fast)),
			asm.JGT.Reg(asm.R1, regDataEnd, "cbpf_0"),
		)
		prefix = "cbpf_fast_"
		in = translate(in, prog, live, fast)
	}
	prefix = "cbpf_"
	return translate(in, prog, live, 0), nil
}

// fastMax bounds the constant loads the fast path covers: frames shorter
// than the farthest one take the checked path.
const fastMax = 128

func translateBody(in asm.Instructions, prog []bpf.Instruction, live, redundant []bool, fast uint32, match, noMatch string, lbl func(int) string,
	load func(string, asm.Register, int) asm.Instructions, slot func(int) int16, reg func(bpf.Register) asm.Register) asm.Instructions {
	t := translator{fast: fast, match: match, noMatch: noMatch, lbl: lbl, load: load, slot: slot, reg: reg}
	for i, ins := range prog {
		if !live[i] {
			// The verifier refuses unreachable code.
			continue
		}
		start := len(in)
		if redundant[i] {
			// The register holds this load's value on every path here;
			// one instruction carries the jump label.
			in = append(in, asm.Mov.Reg32(regA, regA))
		} else {
			in = t.instruction(in, i, ins)
		}
		in[start] = in[start].WithSymbol(lbl(i))
	}
	return in
}

// translator holds what translating one classic instruction needs: the
// bytes the fast path checked, the match and no-match labels, and the
// label, load, scratch-slot and register mappings.
type translator struct {
	fast           uint32
	match, noMatch string
	lbl            func(int) string
	load           func(string, asm.Register, int) asm.Instructions
	slot           func(int) int16
	reg            func(bpf.Register) asm.Register
}

// instruction appends the eBPF of the classic instruction ins at index i.
func (t *translator) instruction(in asm.Instructions, i int, ins bpf.Instruction) asm.Instructions {
	switch ins := ins.(type) {
	case bpf.LoadAbsolute, bpf.LoadIndirect, bpf.LoadMemShift, bpf.LoadExtension:
		return t.packetLoad(in, i, ins)
	case bpf.LoadConstant:
		return append(in, asm.Mov.Imm32(t.reg(ins.Dst), int32(ins.Val)))
	case bpf.LoadScratch:
		return append(in, asm.LoadMem(t.reg(ins.Dst), asm.RFP, t.slot(ins.N), asm.Word))
	case bpf.StoreScratch:
		return append(in, asm.StoreMem(asm.RFP, t.slot(ins.N), t.reg(ins.Src), asm.Word))
	case bpf.TAX:
		return append(in, asm.Mov.Reg32(regX, regA))
	case bpf.TXA:
		return append(in, asm.Mov.Reg32(regA, regX))
	case bpf.NegateA:
		return append(in, asm.Neg.Imm32(regA, 0))
	case bpf.ALUOpConstant, bpf.ALUOpX:
		return t.alu(in, i, ins)
	case bpf.Jump:
		return append(in, asm.Ja.Label(t.lbl(i+1+int(ins.Skip))))
	case bpf.JumpIf:
		return append(in, condJump(ins.Cond, false, ins.Val, t.lbl(i+1+int(ins.SkipTrue)), t.lbl(i+1+int(ins.SkipFalse)))...)
	case bpf.JumpIfX:
		return append(in, condJump(ins.Cond, true, 0, t.lbl(i+1+int(ins.SkipTrue)), t.lbl(i+1+int(ins.SkipFalse)))...)
	case bpf.RetA:
		return append(in, asm.JNE.Imm32(regA, 0, t.match), asm.Ja.Label(t.noMatch))
	case bpf.RetConstant:
		if ins.Val != 0 {
			return append(in, asm.Ja.Label(t.match))
		}
		return append(in, asm.Ja.Label(t.noMatch))
	}
	return in
}

// packetLoad appends a load from the packet (absolute, indirect, the
// IPv4 header length, or the frame's length).
func (t *translator) packetLoad(in asm.Instructions, i int, ins bpf.Instruction) asm.Instructions {
	switch ins := ins.(type) {
	case bpf.LoadAbsolute:
		if uint64(ins.Off)+uint64(ins.Size) > maxPacketOff {
			return append(in, asm.Ja.Label(t.noMatch))
		}
		if uint64(ins.Off)+uint64(ins.Size) <= uint64(t.fast) {
			// Inside the bytes the fast path checked already.
			sz := map[int]asm.Size{1: asm.Byte, 2: asm.Half, 4: asm.Word}[ins.Size]
			in = append(in, asm.LoadMem(regA, regData, int16(ins.Off), sz))
			if ins.Size > 1 {
				in = append(in, asm.HostTo(asm.BE, regA, sz))
			}
			return in
		}
		in = append(in, asm.Mov.Imm(asm.R1, int32(ins.Off)))
		return append(in, t.load(t.lbl(i), regA, ins.Size)...)
	case bpf.LoadIndirect:
		if uint64(ins.Off)+uint64(ins.Size) > maxPacketOff {
			return append(in, asm.Ja.Label(t.noMatch))
		}
		// X + k without wrapping, as the packet offset it is.
		in = append(in,
			asm.Mov.Reg32(asm.R1, regX),
			asm.Add.Imm(asm.R1, int32(ins.Off)),
			asm.JGT.Imm(asm.R1, int32(maxPacketOff-ins.Size), t.noMatch),
		)
		return append(in, t.load(t.lbl(i), regA, ins.Size)...)
	case bpf.LoadMemShift:
		if uint64(ins.Off)+1 > maxPacketOff {
			return append(in, asm.Ja.Label(t.noMatch))
		}
		if uint64(ins.Off)+1 <= uint64(t.fast) {
			return append(in,
				asm.LoadMem(regX, regData, int16(ins.Off), asm.Byte),
				asm.And.Imm32(regX, 0xf),
				asm.LSh.Imm32(regX, 2),
			)
		}
		in = append(in, asm.Mov.Imm(asm.R1, int32(ins.Off)))
		in = append(in, t.load(t.lbl(i), regX, 1)...)
		return append(in,
			asm.And.Imm32(regX, 0xf),
			asm.LSh.Imm32(regX, 2),
		)
	}
	// LoadExtension, ExtLen (checked above): the whole frame's length,
	// all buffers of a multi-buffer one included, as tcpdump's len is the
	// length on the wire.
	return append(in,
		asm.Mov.Reg(asm.R1, regCtx),
		asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Reg32(regA, asm.R0),
		asm.LoadMem(regDataEnd, regCtx, 4, asm.Word),
	)
}

// alu appends an ALU instruction: with a constant, or with X (a division
// or modulus by zero X ends in no match; a shift by 32 or more leaves 0,
// as in classic BPF's interpreters, where eBPF would shift by X modulo 32).
func (t *translator) alu(in asm.Instructions, i int, ins bpf.Instruction) asm.Instructions {
	if c, ok := ins.(bpf.ALUOpConstant); ok {
		if (c.Op == bpf.ALUOpShiftLeft || c.Op == bpf.ALUOpShiftRight) && c.Val >= 32 {
			// Shifting a 32-bit A by 32 or more leaves 0.
			return append(in, asm.Mov.Imm32(regA, 0))
		}
		return append(in, aluOp(c.Op).Imm32(regA, int32(c.Val)))
	}
	x := ins.(bpf.ALUOpX)
	op := aluOp(x.Op)
	switch x.Op {
	case bpf.ALUOpDiv, bpf.ALUOpMod:
		return append(in, asm.JEq.Imm32(regX, 0, t.noMatch), op.Reg32(regA, regX))
	case bpf.ALUOpShiftLeft, bpf.ALUOpShiftRight:
		done := t.lbl(i) + "_shifted"
		return append(in,
			asm.Mov.Reg32(asm.R0, regA),
			asm.Mov.Imm32(regA, 0),
			asm.JGE.Imm32(regX, 32, done),
			asm.Mov.Reg32(regA, asm.R0),
			op.Reg32(regA, regX),
			asm.Mov.Reg32(regA, regA).WithSymbol(done),
		)
	}
	return append(in, op.Reg32(regA, regX))
}

// aluOp returns the eBPF operation of a validated program's ALU op.
func aluOp(op bpf.ALUOp) asm.ALUOp {
	o, ok := ebpfALU[op]
	if !ok {
		panic("filter: unknown ALU op") // validate refused it
	}
	return o
}

// ebpfJump maps each classic BPF comparison to its eBPF jump.
var ebpfJump = map[bpf.JumpTest]asm.JumpOp{
	bpf.JumpEqual:          asm.JEq,
	bpf.JumpNotEqual:       asm.JNE,
	bpf.JumpGreaterThan:    asm.JGT,
	bpf.JumpLessThan:       asm.JLT,
	bpf.JumpGreaterOrEqual: asm.JGE,
	bpf.JumpLessOrEqual:    asm.JLE,
	bpf.JumpBitsSet:        asm.JSet,
	bpf.JumpBitsNotSet:     asm.JSet,
}

// condJump compares A (32-bit, unsigned) with k or X and jumps to t or f.
func condJump(c bpf.JumpTest, x bool, k uint32, t, f string) asm.Instructions {
	op := ebpfJump[c]
	if c == bpf.JumpBitsNotSet {
		t, f = f, t // JSet with the targets swapped
	}
	var j asm.Instruction
	if x {
		j = op.Reg32(regA, regX, t)
	} else {
		j = op.Imm32(regA, int32(k), t)
	}
	return asm.Instructions{j, asm.Ja.Label(f)}
}

// reachable marks the instructions control can reach from the first; a
// load that can only fail ends its path, as a return does.
func reachable(prog []bpf.Instruction) []bool {
	live := make([]bool, len(prog))
	live[0] = true
	for i, ins := range prog {
		if !live[i] {
			continue
		}
		mark := func(j int) {
			if j < len(live) {
				live[j] = true
			}
		}
		switch ins := ins.(type) {
		case bpf.RetA, bpf.RetConstant:
		case bpf.Jump:
			mark(i + 1 + int(ins.Skip))
		case bpf.JumpIf:
			mark(i + 1 + int(ins.SkipTrue))
			mark(i + 1 + int(ins.SkipFalse))
		case bpf.JumpIfX:
			mark(i + 1 + int(ins.SkipTrue))
			mark(i + 1 + int(ins.SkipFalse))
		case bpf.LoadAbsolute:
			if uint64(ins.Off)+uint64(ins.Size) <= maxPacketOff {
				mark(i + 1)
			}
		case bpf.LoadIndirect:
			if uint64(ins.Off)+uint64(ins.Size) <= maxPacketOff {
				mark(i + 1)
			}
		case bpf.LoadMemShift:
			if uint64(ins.Off)+1 <= maxPacketOff {
				mark(i + 1)
			}
		default:
			mark(i + 1)
		}
	}
	return live
}

// redundantLoads marks the packet loads (ld [k], ldx 4*([k]&0xf)) whose
// register already holds the same load's value on every path reaching
// them, as compilers of tcpdump expressions emit (ldh [12] before each
// protocol test). Jumps go forward only, so one pass in order sees every
// predecessor of an instruction before the instruction.
func redundantLoads(prog []bpf.Instruction) []bool {
	type state struct {
		a, x    bpf.Instruction // the load A and X hold, nil if unknown
		reached bool
	}
	in := make([]state, len(prog)+1)
	in[0].reached = true
	meet := func(j int, s state) {
		if j >= len(in) {
			return
		}
		if !in[j].reached {
			in[j] = s
			return
		}
		if in[j].a != s.a {
			in[j].a = nil
		}
		if in[j].x != s.x {
			in[j].x = nil
		}
	}
	out := make([]bool, len(prog))
	for i, ins := range prog {
		s := in[i]
		if !s.reached {
			continue
		}
		switch ins := ins.(type) {
		case bpf.LoadAbsolute:
			out[i] = s.a == bpf.Instruction(ins)
			s.a = ins
		case bpf.LoadMemShift:
			out[i] = s.x == bpf.Instruction(ins)
			s.x = ins
		case bpf.LoadIndirect, bpf.LoadExtension, bpf.ALUOpConstant, bpf.ALUOpX, bpf.NegateA, bpf.TXA:
			s.a = nil
		case bpf.TAX:
			s.x = nil
		case bpf.LoadConstant:
			if ins.Dst == bpf.RegX {
				s.x = nil
			} else {
				s.a = nil
			}
		case bpf.LoadScratch:
			if ins.Dst == bpf.RegX {
				s.x = nil
			} else {
				s.a = nil
			}
		case bpf.Jump:
			meet(i+1+int(ins.Skip), s)
			continue
		case bpf.JumpIf:
			meet(i+1+int(ins.SkipTrue), s)
			meet(i+1+int(ins.SkipFalse), s)
			continue
		case bpf.JumpIfX:
			meet(i+1+int(ins.SkipTrue), s)
			meet(i+1+int(ins.SkipFalse), s)
			continue
		case bpf.RetA, bpf.RetConstant:
			continue
		}
		meet(i+1, s)
	}
	return out
}
