//go:build linux

package filter

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	xdpPass = 2
	xdpTX   = 3 // the test programs' "match"
)

// loadXDP loads prog, translated, in an XDP program returning XDP_TX on a
// match and XDP_PASS otherwise. The caller closes it; closeXDP paces.
func loadXDP(tb testing.TB, prog []bpf.Instruction) (*ebpf.Program, error) {
	return loadXDPFlags(tb, prog, 0)
}

func loadXDPFlags(tb testing.TB, prog []bpf.Instruction, flags uint32) (*ebpf.Program, error) {
	tb.Helper()
	body, err := XDP(prog, "match", "nomatch")
	if err != nil {
		return nil, err
	}
	in := append(asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}, body...)
	in = append(in,
		asm.Mov.Imm(asm.R0, xdpTX).WithSymbol("match"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("nomatch"),
		asm.Return(),
	)
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, Instructions: in, License: "Dual MIT/GPL", Flags: flags})
}

// closeXDP closes p and waits 2 ms, so a test never loads programs in a
// burst (the kernel's JIT allocator has deadlocked under one).
func closeXDP(p *ebpf.Program) {
	p.Close()
	time.Sleep(2 * time.Millisecond)
}

func runXDP(tb testing.TB, p *ebpf.Program, frame []byte) bool {
	tb.Helper()
	ret, err := p.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		tb.Fatalf("BPF_PROG_RUN on %d bytes: %v", len(frame), err)
	}
	switch ret {
	case xdpTX:
		return true
	case xdpPass:
		return false
	}
	tb.Fatalf("BPF_PROG_RUN returned %d", ret)
	return false
}

func vmVerdict(tb testing.TB, vm *bpf.VM, frame []byte) bool {
	tb.Helper()
	n, err := vm.Run(frame)
	if err != nil {
		tb.Fatalf("bpf.VM: %v", err)
	}
	return n != 0
}

// randomProgram builds a valid classic BPF program (as bpf.NewVM accepts
// it: no NegateA, which the VM lacks) from the bytes of r.
func randomProgram(next func() byte, n int) []bpf.Instruction {
	prog := make([]bpf.Instruction, 0, n)
	sizes := []int{1, 2, 4}
	ops := []bpf.ALUOp{bpf.ALUOpAdd, bpf.ALUOpSub, bpf.ALUOpMul, bpf.ALUOpDiv, bpf.ALUOpOr, bpf.ALUOpAnd,
		bpf.ALUOpShiftLeft, bpf.ALUOpShiftRight, bpf.ALUOpMod, bpf.ALUOpXor}
	val := func() uint32 {
		switch next() % 4 {
		case 0:
			return uint32(next())
		case 1:
			return uint32(next() % 40)
		case 2:
			return binary.BigEndian.Uint32([]byte{next(), next(), next(), next()})
		}
		return uint32(next()) << 8
	}
	for i := 0; i < n-1; i++ {
		left := n - i - 1 // instructions after this one
		skip := func() uint8 { return next() % uint8(min(left, 255)) }
		var ins bpf.Instruction
		switch next() % 16 {
		case 0, 1:
			ins = bpf.LoadAbsolute{Off: uint32(next() % 80), Size: sizes[next()%3]}
		case 2:
			ins = bpf.LoadIndirect{Off: uint32(next() % 64), Size: sizes[next()%3]}
		case 3:
			ins = bpf.LoadMemShift{Off: uint32(next() % 64)}
		case 4:
			ins = bpf.LoadConstant{Dst: bpf.Register(next() % 2), Val: val()}
		case 5:
			ins = bpf.LoadScratch{Dst: bpf.Register(next() % 2), N: int(next() % 16)}
		case 6:
			ins = bpf.StoreScratch{Src: bpf.Register(next() % 2), N: int(next() % 16)}
		case 7:
			ins = bpf.LoadExtension{Num: bpf.ExtLen}
		case 8, 9:
			op := ops[next()%uint8(len(ops))]
			v := val()
			if v == 0 && (op == bpf.ALUOpDiv || op == bpf.ALUOpMod) {
				v = 3
			}
			ins = bpf.ALUOpConstant{Op: op, Val: v}
		case 10:
			ins = bpf.ALUOpX{Op: ops[next()%uint8(len(ops))]}
		case 11:
			if next()%2 == 0 {
				ins = bpf.TAX{}
			} else {
				ins = bpf.TXA{}
			}
		case 12, 13:
			ins = bpf.JumpIf{Cond: bpf.JumpTest(next() % 8), Val: val(), SkipTrue: skip(), SkipFalse: skip()}
		case 14:
			ins = bpf.JumpIfX{Cond: bpf.JumpTest(next() % 8), SkipTrue: skip(), SkipFalse: skip()}
		case 15:
			switch next() % 3 {
			case 0:
				ins = bpf.Jump{Skip: uint32(skip())}
			case 1:
				ins = bpf.RetA{}
			default:
				ins = bpf.RetConstant{Val: uint32(next() % 2)}
			}
		}
		prog = append(prog, ins)
	}
	if next()%2 == 0 {
		return append(prog, bpf.RetA{})
	}
	return append(prog, bpf.RetConstant{Val: uint32(next() % 2)})
}

// checkAgainstVM runs frames through prog in the kernel and in
// golang.org/x/net/bpf's VM, and fails on any disagreement.
func checkAgainstVM(t *testing.T, prog []bpf.Instruction, frames [][]byte) {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v\n%v", err, prog)
	}
	p, err := loadXDP(t, prog)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier refused the translation of\n%v\n%+v", prog, ve)
		}
		t.Fatalf("load translation of %v: %v", prog, err)
	}
	defer closeXDP(p)
	for _, f := range frames {
		if got, want := runXDP(t, p, f), vmVerdict(t, vm, f); got != want {
			t.Fatalf("frame % x: XDP says match=%v, the VM %v; program:\n%v", f, got, want, prog)
		}
	}
}

func randomFrames(r *rand.Rand, n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		f := make([]byte, 14+r.IntN(100))
		for j := range f {
			// Small values make loads and comparisons meet each other.
			if r.IntN(2) == 0 {
				f[j] = byte(r.IntN(8))
			} else {
				f[j] = byte(r.Uint32())
			}
		}
		frames[i] = f
	}
	return frames
}

// TestXDPAgreesWithVM: random classic BPF programs give the same verdict
// over random frames in the kernel (translated, under BPF_PROG_RUN) as in
// the x/net/bpf VM. 30 programs, loaded one at a time.
func TestXDPAgreesWithVM(t *testing.T) {
	netnstest.RequirePriv(t)
	r := rand.New(rand.NewPCG(1, 2))
	next := func() byte { return byte(r.Uint32()) }
	// Edges the random programs rarely reach: offsets near 2^32, X + k
	// past 64 KiB, shifts by 32 or more, division by X = 0.
	for _, prog := range [][]bpf.Instruction{
		{bpf.LoadAbsolute{Off: 0xfffffffe, Size: 4}, bpf.RetConstant{Val: 1}},
		{bpf.LoadMemShift{Off: 0xffffffff}, bpf.RetConstant{Val: 1}},
		{bpf.LoadConstant{Dst: bpf.RegX, Val: 0xfffffff0}, bpf.LoadIndirect{Off: 0x20, Size: 1}, bpf.RetConstant{Val: 1}},
		{bpf.LoadConstant{Dst: bpf.RegX, Val: 0xffff}, bpf.LoadIndirect{Off: 0, Size: 1}, bpf.RetConstant{Val: 1}},
		{bpf.LoadConstant{Dst: bpf.RegA, Val: 7}, bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 32}, bpf.RetA{}},
		{bpf.LoadConstant{Dst: bpf.RegA, Val: 7}, bpf.LoadConstant{Dst: bpf.RegX, Val: 33}, bpf.ALUOpX{Op: bpf.ALUOpShiftRight}, bpf.RetA{}},
		{bpf.LoadConstant{Dst: bpf.RegA, Val: 7}, bpf.LoadConstant{Dst: bpf.RegX, Val: 31}, bpf.ALUOpX{Op: bpf.ALUOpShiftLeft}, bpf.RetA{}},
		{bpf.LoadConstant{Dst: bpf.RegA, Val: 7}, bpf.ALUOpX{Op: bpf.ALUOpDiv}, bpf.RetConstant{Val: 1}},
		{bpf.LoadConstant{Dst: bpf.RegA, Val: 0xffffffff}, bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 1}, bpf.RetA{}},
		{bpf.LoadAbsolute{Off: 12, Size: 2}, bpf.LoadAbsolute{Off: 12, Size: 2}, bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: 0x7fff, SkipTrue: 1}, bpf.RetConstant{}, bpf.RetConstant{Val: 1}},
	} {
		checkAgainstVM(t, prog, randomFrames(r, 16))
	}
	for i := 0; i < 30; i++ {
		prog := randomProgram(next, 2+r.IntN(40))
		checkAgainstVM(t, prog, randomFrames(r, 64))
	}
}

// FuzzXDP: a program and a frame from the fuzzer's bytes; one program
// load per input. Run with -parallel 1.
func FuzzXDP(f *testing.F) {
	netnstest.RequirePriv(f)
	f.Add([]byte{0, 12, 1, 12, 0, 0, 8, 0, 0, 0}, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x08\x00\x45\x00\x00\x1c"))
	f.Add([]byte{2, 3, 1, 10, 3, 14, 9, 1, 200, 12, 5, 6, 7, 8, 1, 2}, make([]byte, 60))
	f.Fuzz(func(t *testing.T, code, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 || len(code) == 0 {
			return
		}
		i := 0
		next := func() byte {
			b := code[i%len(code)]
			i++
			return b ^ byte(i/len(code))
		}
		prog := randomProgram(next, 1+int(code[0])%48)
		checkAgainstVM(t, prog, [][]byte{frame, frame[:14]})
	})
}

// TestXDPRefuses: what the translation cannot do is an error, not a
// program that passes everything.
func TestXDPRefuses(t *testing.T) {
	for _, prog := range [][]bpf.Instruction{
		nil,
		{bpf.LoadExtension{Num: bpf.ExtProto}, bpf.RetA{}},
		{bpf.Jump{Skip: 1}, bpf.RetA{}},
		{bpf.ALUOpConstant{Op: bpf.ALUOpDiv, Val: 0}, bpf.RetA{}},
		{bpf.LoadAbsolute{Off: 1, Size: 3}, bpf.RetA{}},
		{bpf.RetA{}, bpf.TAX{}},
		{bpf.RawInstruction{Op: 0xff}, bpf.RetA{}},
	} {
		if _, err := XDP(prog, "m", "n"); err == nil {
			t.Errorf("XDP(%v) succeeded", prog)
		}
	}
}

// A multi-buffer frame (the test run splits one larger than a page into
// buffers for a frags-aware program): loads beyond the first buffer and
// len see the whole frame, as tcpdump would.
func TestXDPMultiBuffer(t *testing.T) {
	netnstest.RequirePriv(t)
	frame := make([]byte, 9000)
	for i := range frame {
		frame[i] = byte(i * 7)
	}
	frame[12], frame[13] = 0x08, 0x00
	off := uint32(8000)
	want := binary.BigEndian.Uint32(frame[off:])
	// The frame does not fit the first buffer: the direct loads would not
	// see all of it.
	lin, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "MIT", Flags: unix.BPF_F_XDP_HAS_FRAGS,
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 0, asm.Word),
			asm.LoadMem(asm.R3, asm.R1, 4, asm.Word),
			asm.Add.Imm(asm.R2, 9000),
			asm.Mov.Imm(asm.R0, xdpTX),
			asm.JGT.Reg(asm.R2, asm.R3, "short"),
			asm.Mov.Imm(asm.R0, xdpPass),
			asm.Return().WithSymbol("short"),
		}})
	if err != nil {
		t.Fatal(err)
	}
	short := runXDP(t, lin, frame)
	closeXDP(lin)
	if !short {
		t.Fatal("the test run put all 9000 bytes in the first buffer: the test would not exercise multi-buffer loads")
	}
	for _, tc := range []struct {
		prog  []bpf.Instruction
		match bool
	}{
		{[]bpf.Instruction{bpf.LoadAbsolute{Off: off, Size: 4}, bpf.JumpIf{Cond: bpf.JumpEqual, Val: want, SkipFalse: 1}, bpf.RetConstant{Val: 1}, bpf.RetConstant{}}, true},
		{[]bpf.Instruction{bpf.LoadAbsolute{Off: off, Size: 4}, bpf.JumpIf{Cond: bpf.JumpEqual, Val: want + 1, SkipFalse: 1}, bpf.RetConstant{Val: 1}, bpf.RetConstant{}}, false},
		{[]bpf.Instruction{bpf.LoadConstant{Dst: bpf.RegX, Val: 7000}, bpf.LoadIndirect{Off: 1990, Size: 2}, bpf.RetA{}}, binary.BigEndian.Uint16(frame[8990:]) != 0},
		{[]bpf.Instruction{bpf.LoadAbsolute{Off: 8998, Size: 4}, bpf.RetConstant{Val: 1}}, false},
		{[]bpf.Instruction{bpf.LoadMemShift{Off: 6000}, bpf.TXA{}, bpf.RetA{}}, frame[6000]&0xf != 0},
		{[]bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtLen}, bpf.JumpIf{Cond: bpf.JumpEqual, Val: 9000, SkipFalse: 1}, bpf.RetConstant{Val: 1}, bpf.RetConstant{}}, true},
	} {
		vm, err := bpf.NewVM(tc.prog)
		if err != nil {
			t.Fatal(err)
		}
		if got := vmVerdict(t, vm, frame); got != tc.match {
			t.Fatalf("%v: the VM says %v, the test wants %v", tc.prog, got, tc.match)
		}
		p, err := loadXDPFlags(t, tc.prog, unix.BPF_F_XDP_HAS_FRAGS)
		if err != nil {
			t.Fatalf("%v: %v", tc.prog, err)
		}
		got := runXDP(t, p, frame)
		closeXDP(p)
		if got != tc.match {
			t.Errorf("%v over a 9000-byte multi-buffer frame: match=%v, want %v", tc.prog, got, tc.match)
		}
	}
}
