//go:build linux

package xsk

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/xdpio/xdpio/filter"
	"golang.org/x/sys/unix"
)

// build says how buildInstructions writes the program.
type build struct {
	// kfunc is bpf_xdp_metadata_rx_hash's BTF ID (ProgramConfig.RXHash),
	// or 0.
	kfunc btf.TypeID
	// noSocket is the action when no socket is registered for the
	// frame's queue: XDP_PASS, or XDP_TX for Verdicts.
	noSocket int32
	// buffLen measures frames with bpf_xdp_get_buff_len (every buffer of
	// a multi-buffer frame; Linux 5.18), not by their first buffer.
	buffLen bool
}

// buildInstructions writes the redirect program. Registers: R6 context,
// R2/R3 packet start/end, R7 EtherType, R8 IP protocol (256: none), R9
// destination port (65536: none); a classic BPF filter (cfg.BPF) uses its
// own (see filter.XDP).
func buildInstructions(maps progMaps, cfg ProgramConfig, bld build) (asm.Instructions, error) {
	rules := cfg.Filter
	kfunc, noSocket := bld.kfunc, bld.noSocket
	var in asm.Instructions
	in = append(in, asm.Mov.Reg(asm.R6, asm.R1))

	if kfunc != 0 {
		in = append(in, rxHashInstructions(kfunc)...)
	}

	// A frame that matches a rule goes on to the classic BPF filter, when
	// there is one as well, or straight to the redirect.
	matched := "redirect"
	if cfg.BPF != nil && len(rules) > 0 {
		matched = "expr"
	}
	if len(rules) > 0 {
		ri, err := ruleInstructions(rules, maps, matched)
		if err != nil {
			return nil, err
		}
		in = append(in, ri...)
	}
	if cfg.BPF != nil {
		f, err := filter.XDP(cfg.BPF, "redirect", "pass")
		if err != nil {
			return nil, fmt.Errorf("%w: BPF: %w", ErrInvalidConfig, err)
		}
		in = append(in, asm.Mov.Imm(asm.R0, 0).WithSymbol("expr"))
		in = append(in, f...)
		in = append(in,
			asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
			asm.Return(),
		)
	}

	in = append(in, maxFrameInstructions(cfg.MaxFrame, bld.buffLen)...)
	in = append(in,
		asm.LoadMem(asm.R2, asm.R6, ctxRXQueueIndex, asm.Word),
		asm.LoadMapPtr(asm.R1, maps.xsks.FD()),
		// flags: the action when no socket is registered for the queue.
		asm.Mov.Imm(asm.R3, noSocket),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
	return in, nil
}

// rxHashInstructions store the NIC's RSS hash (kfunc bpf_xdp_metadata_rx_hash,
// BTF ID kfunc) in the metadata in front of the frame (ProgramConfig.RXHash).
// R6 is the context; they end at label "meta_done" with R0 cleared.
func rxHashInstructions(kfunc btf.TypeID) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, -rxMetaLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, "meta_done"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -4),
		asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Src: asm.PseudoKfuncCall, Constant: int64(kfunc)},
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMem(asm.R2, asm.R6, ctxDataMeta, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, ctxData, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, rxMetaLen),
		asm.JGT.Reg(asm.R4, asm.R3, "meta_done"),
		asm.LoadMem(asm.R4, asm.RFP, -8, asm.Word),
		asm.StoreMem(asm.R2, 0, asm.R4, asm.Word),
		asm.LoadMem(asm.R4, asm.RFP, -4, asm.Word),
		asm.StoreMem(asm.R2, 4, asm.R4, asm.Word),
		asm.Mov.Imm(asm.R4, 0),
		asm.JNE.Imm(asm.R7, 0, "meta_store"),
		asm.Mov.Imm(asm.R4, rxMetaHashValid),
		asm.StoreMem(asm.R2, 8, asm.R4, asm.Word).WithSymbol("meta_store"),
		asm.Mov.Imm(asm.R4, 0),
		asm.StoreMem(asm.R2, 12, asm.R4, asm.Word),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("meta_done"),
	}
}

// ruleInstructions parse the frame (parseInstructions) and try each rule
// in turn: a frame that matches one jumps to matched, the others pass.
func ruleInstructions(rules []Rule, maps progMaps, matched string) (asm.Instructions, error) {
	in := parseInstructions()
	for i, r := range rules {
		next := "rule_" + strconv.Itoa(i+1)
		first := len(in)
		if r.EtherType != 0 {
			in = append(in, asm.JNE.Imm(asm.R7, int32(r.EtherType), next))
		}
		if r.Protocol != 0 {
			in = append(in, asm.JNE.Imm(asm.R8, int32(r.Protocol), next))
		}
		if r.ports() {
			in = append(in,
				asm.JLT.Imm(asm.R9, int32(r.DstPortMin), next),
				asm.JGT.Imm(asm.R9, int32(r.DstPortMax), next),
			)
		}
		if r.Untagged {
			// R2 moved past each VLAN tag: untagged means it is
			// still where the packet starts.
			in = append(in,
				asm.LoadMem(asm.R4, asm.R6, ctxData, asm.Word),
				asm.JNE.Reg(asm.R4, asm.R2, next),
			)
		}
		if p, ok := r.dst(); ok {
			in = append(in, dstInstructions(p, next)...)
		}
		if r.Local {
			if maps.local == nil {
				return nil, fmt.Errorf("filter rule %d: Rule.Local without the Local set's map", i)
			}
			in = append(in, localInstructions(maps.local.FD(), next, strconv.Itoa(i))...)
		}
		in = append(in, asm.Ja.Label(matched))
		in[first] = in[first].WithSymbol("rule_" + strconv.Itoa(i))
	}
	in = append(in,
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("rule_"+strconv.Itoa(len(rules))),
		asm.Return(),
	)
	return in, nil
}

// maxFrameInstructions begin the redirect (label "redirect"): a frame
// longer than max bytes passes to the kernel. With buffLen it is measured
// with bpf_xdp_get_buff_len (every buffer of a multi-buffer frame), else
// by its one buffer's pointers. R6 is the context; R1-R5 are free.
func maxFrameInstructions(max int, buffLen bool) asm.Instructions {
	if max <= 0 {
		return asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithSymbol("redirect")}
	}
	max = min(max, 0xffff)
	if buffLen {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("redirect"),
			asm.FnXdpGetBuffLen.Call(),
			asm.JGT.Imm(asm.R0, int32(max), "too_long"),
			asm.Ja.Label("fits"),
			asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("too_long"),
			asm.Return(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("fits"),
		}
	}
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, ctxData, asm.Word).WithSymbol("redirect"),
		asm.LoadMem(asm.R3, asm.R6, ctxDataEnd, asm.Word),
		asm.Add.Imm(asm.R2, int32(max)),
		asm.JLE.Reg(asm.R3, asm.R2, "fits"), // end <= start + max
		asm.Mov.Imm(asm.R0, xdpPass),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("fits"),
	}
}

// dstInstructions jump to next unless the frame's destination address lies
// in p. The header bounds are checked again here: the verifier follows
// every path to the rule, some of which never checked them.
func dstInstructions(p netip.Prefix, next string) asm.Instructions {
	const eth = 14
	etherType, hdrLen, off := int32(0x0800), int16(20), int16(16)
	if p.Addr().Is6() {
		etherType, hdrLen, off = 0x86dd, 40, 24
	}
	in := asm.Instructions{
		asm.JNE.Imm(asm.R7, etherType, next),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, int32(eth+hdrLen)),
		asm.JGT.Reg(asm.R4, asm.R3, next),
	}
	addr := p.Addr().AsSlice()
	left := p.Bits()
	// Compare word by word as the bytes lie in memory: a 32-bit load
	// reads them in the host's order, so the constants are read the same
	// way.
	for w := 0; left > 0; w++ {
		bits := min(left, 32)
		left -= bits
		mask := make([]byte, 4)
		for i := 0; i < bits; i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		m := binary.NativeEndian.Uint32(mask)
		want := binary.NativeEndian.Uint32(addr[4*w:]) & m
		in = append(in, asm.LoadMem(asm.R4, asm.R2, eth+off+int16(4*w), asm.Word))
		if bits < 32 {
			in = append(in, asm.And.Imm32(asm.R4, int32(m)))
		}
		in = append(in, asm.JNE.Imm32(asm.R4, int32(want), next))
	}
	return in
}

// parseInstructions loads EtherType, IP protocol and destination port into
// R7, R8, R9, then falls through to the first rule (label rule_0).
func parseInstructions() asm.Instructions {
	const eth = 14
	in := asm.Instructions{
		asm.Mov.Imm(asm.R7, 0),
		asm.Mov.Imm(asm.R8, 256),
		asm.Mov.Imm(asm.R9, 65536),
		asm.LoadMem(asm.R2, asm.R6, ctxData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, ctxDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, eth),
		asm.JGT.Reg(asm.R4, asm.R3, "rule_0"),
		asm.LoadMem(asm.R7, asm.R2, 12, asm.Half),
		asm.HostTo(asm.BE, asm.R7, asm.Half),
	}
	// Up to two VLAN tags: step R2 past each, so that R2+12 is always the
	// EtherType and R2+14 the L3 header.
	for i := 0; i < 2; i++ {
		skip := "vlan_done_" + strconv.Itoa(i)
		in = append(in,
			asm.JEq.Imm(asm.R7, 0x8100, "vlan_"+strconv.Itoa(i)),
			asm.JNE.Imm(asm.R7, 0x88a8, skip),
			asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("vlan_"+strconv.Itoa(i)),
			asm.Add.Imm(asm.R4, eth+4),
			asm.JGT.Reg(asm.R4, asm.R3, "rule_0"),
			asm.LoadMem(asm.R7, asm.R2, 16, asm.Half),
			asm.HostTo(asm.BE, asm.R7, asm.Half),
			asm.Add.Imm(asm.R2, 4),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(skip),
		)
	}
	in = append(in,
		asm.JEq.Imm(asm.R7, 0x0800, "ipv4"),
		asm.JEq.Imm(asm.R7, 0x86dd, "ipv6"),
		asm.Ja.Label("rule_0"),

		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv4"),
		asm.Add.Imm(asm.R4, eth+20),
		asm.JGT.Reg(asm.R4, asm.R3, "rule_0"),
		asm.LoadMem(asm.R8, asm.R2, eth+9, asm.Byte),
		asm.LoadMem(asm.R4, asm.R2, eth+6, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.And.Imm(asm.R4, 0x3fff),
		asm.JNE.Imm(asm.R4, 0, "rule_0"), // a fragment (MF or offset): no ports
		asm.LoadMem(asm.R4, asm.R2, eth, asm.Byte),
		asm.And.Imm(asm.R4, 0x0f),
		asm.LSh.Imm(asm.R4, 2),
		asm.JLT.Imm(asm.R4, 20, "rule_0"),
		asm.Mov.Reg(asm.R5, asm.R2),
		asm.Add.Reg(asm.R5, asm.R4),
		asm.Ja.Label("l4"),

		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv6"),
		asm.Add.Imm(asm.R4, eth+40),
		asm.JGT.Reg(asm.R4, asm.R3, "rule_0"),
		asm.LoadMem(asm.R8, asm.R2, eth+6, asm.Byte),
		asm.Mov.Reg(asm.R5, asm.R2),
		asm.Add.Imm(asm.R5, 40),

		// R5 + eth is the L4 header.
		asm.JEq.Imm(asm.R8, unix.IPPROTO_TCP, "ports").WithSymbol("l4"),
		asm.JEq.Imm(asm.R8, unix.IPPROTO_UDP, "ports"),
		asm.JEq.Imm(asm.R8, unix.IPPROTO_UDPLITE, "ports"),
		asm.JEq.Imm(asm.R8, unix.IPPROTO_SCTP, "ports"),
		asm.Ja.Label("rule_0"),
		asm.Mov.Reg(asm.R4, asm.R5).WithSymbol("ports"),
		asm.Add.Imm(asm.R4, eth+4),
		asm.JGT.Reg(asm.R4, asm.R3, "rule_0"),
		asm.LoadMem(asm.R9, asm.R5, eth+2, asm.Half),
		asm.HostTo(asm.BE, asm.R9, asm.Half),
	)
	return in
}

// XDP context offsets (struct xdp_md).
const (
	ctxData         = 0
	ctxDataEnd      = 4
	ctxDataMeta     = 8
	ctxRXQueueIndex = 16
	xdpPass         = 2
	xdpTX           = 3
)
