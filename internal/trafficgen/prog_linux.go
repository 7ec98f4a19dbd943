//go:build linux

package trafficgen

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// XDP actions.
const (
	xdpAborted = 0
	xdpDrop    = 1
	xdpPass    = 2
	xdpTX      = 3
)

// struct xdp_md offsets.
const (
	ctxData    = 0
	ctxDataEnd = 4
)

// genState is the per-CPU value of the generator's state map: frames sent
// on this CPU, and how many it may send.
type genState struct {
	Sent  uint64
	Limit uint64
}

// genInstructions is the generator program:
//
//	st = state[0] (per CPU); if st == nil: return XDP_ABORTED
//	if st.sent >= st.limit: return XDP_DROP
//	st.sent++
//	i = prandom() & (flows-1)
//	udp.src = base+i; payload[0:2] = padBase-i   // checksum-neutral
//	return XDP_TX
func genInstructions(stateFD int, base uint16, flows int) asm.Instructions {
	in := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -4, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, stateFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "abort"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.LoadMem(asm.R2, asm.R0, 8, asm.DWord),
		asm.JGE.Reg(asm.R1, asm.R2, "drop"),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	}
	if flows > 1 {
		in = append(in,
			asm.FnGetPrandomU32.Call(),
			asm.And.Imm(asm.R0, int32(flows-1)),
			asm.Mov.Reg(asm.R7, asm.R0),
			asm.LoadMem(asm.R2, asm.R6, ctxData, asm.Word),
			asm.LoadMem(asm.R3, asm.R6, ctxDataEnd, asm.Word),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, offPad+2),
			asm.JGT.Reg(asm.R4, asm.R3, "tx"),
			asm.Mov.Imm(asm.R4, int32(base)),
			asm.Add.Reg(asm.R4, asm.R7),
			asm.HostTo(asm.BE, asm.R4, asm.Half),
			asm.StoreMem(asm.R2, offSrcPort, asm.R4, asm.Half),
			asm.Mov.Imm(asm.R4, padBase),
			asm.Sub.Reg(asm.R4, asm.R7),
			asm.HostTo(asm.BE, asm.R4, asm.Half),
			asm.StoreMem(asm.R2, offPad, asm.R4, asm.Half),
		)
	}
	in = append(in,
		asm.Mov.Imm(asm.R0, xdpTX).WithSymbol("tx"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpAborted).WithSymbol("abort"),
		asm.Return(),
	)
	return in
}

// counterInstructions counts every frame in a per-CPU u64 and returns
// action.
func counterInstructions(mapFD int, action int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -4, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, action).WithSymbol("out"),
		asm.Return(),
	}
}

func loadXDP(name string, insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.XDP,
		Instructions: insns,
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		return nil, bpfError("load XDP program "+name, err)
	}
	return prog, nil
}

func bpfError(op string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: needs CAP_BPF and CAP_NET_ADMIN (run as root): %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
