//go:build linux

package xsk

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

func hasLocal(rules []Rule) bool {
	for _, r := range rules {
		if r.Local {
			return true
		}
	}
	return false
}

// newLocalMap creates the Local set: a one-entry array the program reads
// through a direct pointer to its value (no helper call, so the packet
// registers survive), all zero (no MAC: nothing matches) until SetLocal.
func newLocalMap() (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "xdpio_local",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  localValueSize,
		MaxEntries: 1,
	})
	if err != nil {
		return nil, bpfError("create the Local set's map", err)
	}
	return m, nil
}

// SetLocal replaces the set that rules with Rule.Local compare frames
// with: the interface's MAC address and its unicast addresses (the first
// LocalSlots of each family, in address order; frames to the others go
// to the kernel). Call it again whenever they change; a program without
// such a rule returns an error.
func (p *Program) SetLocal(l Local) error {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock()
	if p.local == nil {
		return &OpError{Op: "set the Local set of", Ifindex: p.ifindex, Queue: -1, Err: invalid("ProgramConfig.Filter", "no rule with Local", "SetLocal is for programs with Rule.Local")}
	}
	if err := p.local.Update(uint32(0), l.encode(), ebpf.UpdateAny); err != nil {
		return &OpError{Op: "set the Local set of", Ifindex: p.ifindex, Queue: -1, Err: err}
	}
	return nil
}

// localInstructions jump to next unless the frame is IPv4 or IPv6 to the
// MAC and one of the addresses of the Local set (map localFD). R2/R3 are
// the packet (moved past VLAN tags) and its end, R6 the context, R7 the
// EtherType; R0, R1, R4 and R5 are free. id makes the labels unique.
func localInstructions(localFD int, next, id string) asm.Instructions {
	const eth = 14
	l6, ok := "local6_"+id, "local_ok_"+id
	in := asm.Instructions{
		asm.JEq.Imm(asm.R7, 0x0800, "local_ip_"+id),
		asm.JNE.Imm(asm.R7, 0x86dd, next),
		asm.LoadMapValue(asm.R0, localFD, 0).WithSymbol("local_ip_" + id),
		asm.LoadMem(asm.R1, asm.R0, localValid, asm.Byte),
		asm.JNE.Imm(asm.R1, 1, next),
		// The destination MAC, at the very start of the frame.
		asm.LoadMem(asm.R4, asm.R6, ctxData, asm.Word),
		asm.Mov.Reg(asm.R5, asm.R4),
		asm.Add.Imm(asm.R5, 6),
		asm.JGT.Reg(asm.R5, asm.R3, next),
		asm.LoadMem(asm.R1, asm.R4, 0, asm.Word),
		asm.LoadMem(asm.R5, asm.R0, 0, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R5, next),
		asm.LoadMem(asm.R1, asm.R4, 4, asm.Half),
		asm.LoadMem(asm.R5, asm.R0, 4, asm.Half),
		asm.JNE.Reg(asm.R1, asm.R5, next),
		asm.JEq.Imm(asm.R7, 0x86dd, l6),
		// IPv4: the destination address against each slot.
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, eth+20),
		asm.JGT.Reg(asm.R4, asm.R3, next),
		asm.LoadMem(asm.R1, asm.R2, eth+16, asm.Word),
		asm.JEq.Imm(asm.R1, 0, next), // 0.0.0.0, which an empty slot holds
	}
	for i := 0; i < LocalSlots; i++ {
		in = append(in,
			asm.LoadMem(asm.R5, asm.R0, int16(localV4+4*i), asm.Word),
			asm.JEq.Reg(asm.R1, asm.R5, ok),
		)
	}
	in = append(in,
		asm.Ja.Label(next),
		// IPv6: the destination address, as two double words.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol(l6),
		asm.Add.Imm(asm.R4, eth+40),
		asm.JGT.Reg(asm.R4, asm.R3, next),
		asm.LoadMem(asm.R1, asm.R2, eth+24, asm.DWord),
		asm.LoadMem(asm.R4, asm.R2, eth+32, asm.DWord),
		asm.Mov.Reg(asm.R5, asm.R1),
		asm.Or.Reg(asm.R5, asm.R4),
		asm.JEq.Imm(asm.R5, 0, next), // ::, which an empty slot holds
	)
	for i := 0; i < LocalSlots; i++ {
		skip := fmt.Sprintf("local6_%s_%d", id, i)
		in = append(in,
			asm.LoadMem(asm.R5, asm.R0, int16(localV6+16*i), asm.DWord),
			asm.JNE.Reg(asm.R1, asm.R5, skip),
			asm.LoadMem(asm.R5, asm.R0, int16(localV6+16*i+8), asm.DWord),
			asm.JEq.Reg(asm.R4, asm.R5, ok),
			asm.Mov.Imm(asm.R5, 0).WithSymbol(skip),
		)
	}
	in = append(in,
		asm.Ja.Label(next),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(ok),
	)
	return in
}
