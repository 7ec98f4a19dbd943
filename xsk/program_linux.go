//go:build linux

package xsk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"github.com/xdpio/xdpio/filter"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Program is an XDP program with its XSKMAP, attached to one interface
// through a bpf_link: when the process exits, or is killed, the kernel
// detaches it.
type Program struct {
	prog    *ebpf.Program
	xsks    *ebpf.Map
	link    link.Link
	ifindex int
	mode    AttachMode
	rxHash  bool
	// borrowed: prog and xsks are the caller's (UserProgram, UserMap),
	// not closed by Close.
	borrowed bool
	// member: prog is one of a libxdp dispatcher's programs.
	member *member
	// local is the Local set of rules with Rule.Local (nil without).
	local *ebpf.Map
	// watch notices that someone else detached the program (Err); socks
	// are the sockets registered by Register, under watch.mu. ns is the
	// interface's network namespace (nil: unknown).
	watch detachWatch
	socks map[int]*Socket
	ns    *netns.NsHandle
}

// NewProgram builds the program for the interface with index ifindex (in
// the caller's network namespace) and attaches it.
func NewProgram(ifindex int, cfg ProgramConfig) (*Program, error) {
	return newProgram(ifindex, cfg, nil)
}

// newProgram is NewProgram that runs before (registering sockets) once the
// XSKMAP exists and before the program is attached: otherwise frames that
// match arrive in between, find no socket and go to the kernel stack
// (a closed port there answers ICMP port unreachable).
func newProgram(ifindex int, cfg ProgramConfig, before func(*Program) error) (_ *Program, err error) {
	defer func() {
		if err != nil {
			err = &OpError{Op: "load XDP program for", Ifindex: ifindex, Queue: -1, Err: err}
		}
	}()
	filterProg, err := checkProgramConfig(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.UserMap != nil {
		p, err := userProgram(ifindex, cfg)
		if err == nil && before != nil {
			if err = before(p); err != nil {
				p.Close()
				return nil, err
			}
		}
		return p, err
	}
	a, ifname, err := attachedProgram(netns.None(), ifindex)
	if err != nil {
		return nil, err
	}
	join := cfg.Share == ShareDispatcher || (cfg.Share == ShareAuto && a != nil && a.name == dispatcherName)
	if a != nil && !join {
		return nil, busyError(ifname, a, cfg.Share)
	}
	if join && cfg.RXHash {
		return nil, fmt.Errorf("RX hash metadata needs a device-bound program, which cannot be one of a libxdp dispatcher's programs (%v); use ShareExclusive on an interface of its own: %w", cfg.Share, ErrNotSupported)
	}
	if cfg.Queues <= 0 {
		n, err := maxQueues(ifindex)
		if err != nil {
			return nil, err
		}
		cfg.Queues = n
	}
	xsks, err := newXSKMap(cfg.Queues)
	if err != nil {
		return nil, err
	}
	p := &Program{xsks: xsks, ifindex: ifindex, mode: cfg.Attach, rxHash: cfg.RXHash}
	if ns, err := netns.Get(); err == nil {
		p.ns = &ns // the interface's namespace, for Err's look at it from any thread
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if hasLocal(cfg.Filter) {
		if p.local, err = newLocalMap(); err != nil {
			return nil, err
		}
	}
	cfg.BPF = filterProg
	if join {
		err = p.join(ifindex, cfg, before)
	} else {
		err = p.load(ifindex, cfg, before)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// join loads the program as an extension and joins the libxdp dispatcher
// with it, once before (registering sockets) ran.
func (p *Program) join(ifindex int, cfg ProgramConfig, before func(*Program) error) (err error) {
	if before != nil {
		if err := before(p); err != nil {
			return err
		}
	}
	p.prog, p.member, p.mode, err = joinDispatcher(ifindex, cfg.Attach, cfg.Priority, func(target *ebpf.Program, slot string) (*ebpf.Program, error) {
		return loadProgram(ifindex, p.maps(), cfg, &extension{target, slot})
	})
	return err
}

// load loads the program and attaches it alone through a bpf_link, once
// before (registering sockets) ran.
func (p *Program) load(ifindex int, cfg ProgramConfig, before func(*Program) error) (err error) {
	p.prog, err = loadProgram(ifindex, p.maps(), cfg, nil)
	if err != nil && cfg.RXHash && errors.Is(err, ErrNotSupported) {
		return fmt.Errorf("RX hash metadata: %w", err)
	}
	if err != nil {
		return err
	}
	if before != nil {
		if err := before(p); err != nil {
			return err
		}
	}
	return p.attach(cfg.Attach)
}

// maps returns the maps the program's instructions refer to.
func (p *Program) maps() progMaps { return progMaps{xsks: p.xsks, local: p.local} }

// progMaps are the maps the redirect program uses: the XSKMAP, and the
// Local set when a rule has Rule.Local.
type progMaps struct {
	xsks, local *ebpf.Map
}

func newXSKMap(queues int) (*ebpf.Map, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "xdpio_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, bpfError("create XSKMAP", err)
	}
	return xsks, nil
}

// checkProgramConfig refuses contradictory options and returns the
// classic BPF filter (compiled from Expr, or BPF), nil without one.
func checkProgramConfig(cfg ProgramConfig) ([]bpf.Instruction, error) {
	for i, r := range cfg.Filter {
		if r.ports() && r.DstPortMin > r.DstPortMax {
			return nil, invalid(fmt.Sprintf("filter rule %d port range", i), fmt.Sprintf("%d-%d", r.DstPortMin, r.DstPortMax), "minimum above maximum")
		}
	}
	var set []string
	if len(cfg.Filter) > 0 {
		set = append(set, "Filter")
	}
	if cfg.Expr != "" {
		set = append(set, "Expr")
	}
	if cfg.BPF != nil {
		set = append(set, "BPF")
	}
	if cfg.Expr != "" && cfg.BPF != nil {
		return nil, invalid("ProgramConfig", strings.Join(set, " and "), "Expr and BPF are alternatives: set one (with Filter or without)")
	}
	if cfg.UserProgram != nil && cfg.UserMap == nil {
		return nil, invalid("ProgramConfig.UserProgram", cfg.UserProgram, "needs UserMap, the XSKMAP the program redirects through")
	}
	if cfg.UserMap != nil {
		if len(set) > 0 || cfg.RXHash {
			return nil, invalid("ProgramConfig.UserMap", cfg.UserMap, "Filter, Expr, BPF and RXHash configure xdpio's own program; with your program (UserProgram/UserMap) leave them unset")
		}
		return nil, nil
	}
	switch {
	case cfg.Expr != "":
		prog, err := filter.Compile(cfg.Expr)
		if err != nil {
			return nil, fmt.Errorf("%w: Expr: %w", ErrInvalidConfig, err)
		}
		return prog, nil
	case cfg.BPF != nil:
		prog := append([]bpf.Instruction(nil), cfg.BPF...)
		if err := filter.Validate(prog); err != nil {
			return nil, fmt.Errorf("%w: BPF: %w", ErrInvalidConfig, err)
		}
		return prog, nil
	}
	return nil, nil
}

// userProgram registers sockets in the caller's XSKMAP and attaches the
// caller's program, if any.
func userProgram(ifindex int, cfg ProgramConfig) (*Program, error) {
	info, err := cfg.UserMap.Info()
	if err != nil {
		return nil, fmt.Errorf("UserMap: %w", err)
	}
	if info.Type != ebpf.XSKMap || info.KeySize != 4 || info.ValueSize != 4 {
		return nil, invalid("ProgramConfig.UserMap", fmt.Sprintf("%v key %d value %d", info.Type, info.KeySize, info.ValueSize), "must be an XSKMAP with 4-byte keys (queue) and values (socket descriptor)")
	}
	p := &Program{xsks: cfg.UserMap, ifindex: ifindex, mode: cfg.Attach, borrowed: true}
	if cfg.UserProgram == nil {
		return p, nil
	}
	if t := cfg.UserProgram.Type(); t != ebpf.XDP {
		return nil, invalid("ProgramConfig.UserProgram", t, "must be an XDP program")
	}
	if err := checkFree(ifindex, ShareExclusive); err != nil {
		return nil, err
	}
	p.prog = cfg.UserProgram
	if err := p.attach(cfg.Attach); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// extension is the dispatcher slot a program replaces.
type extension struct {
	target *ebpf.Program
	slot   string
}

// loadProgram loads xdpio's redirect program: an XDP program, or, with
// ext, an extension replacing ext.slot of a dispatcher.
func loadProgram(ifindex int, maps progMaps, cfg ProgramConfig, ext *extension) (*ebpf.Program, error) {
	var kfunc btf.TypeID
	if cfg.RXHash {
		id, err := kfuncID("bpf_xdp_metadata_rx_hash")
		if err != nil {
			return nil, err
		}
		kfunc = id
	}
	spec := func(frags bool) (*ebpf.ProgramSpec, error) {
		insns, err := buildInstructions(maps, cfg, build{kfunc: kfunc, noSocket: xdpPass, buffLen: frags || ext != nil})
		if err != nil {
			return nil, err
		}
		spec := &ebpf.ProgramSpec{
			Name:         "xdpio_redirect",
			Type:         ebpf.XDP,
			Instructions: insns,
			// The program is our own; the kernel wants a GPL-compatible
			// license string for kfuncs.
			License: "Dual MIT/GPL",
		}
		if frags {
			spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
		}
		if cfg.RXHash {
			spec.Flags |= unix.BPF_F_XDP_DEV_BOUND_ONLY
			spec.Ifindex = uint32(ifindex)
		}
		if ext != nil {
			// The dispatcher carries the frags flag for all its programs; the
			// extension's prototype must match the stub's.
			spec.Type, spec.Flags = ebpf.Extension, 0
			spec.AttachTarget, spec.AttachTo = ext.target, ext.slot
			spec.Instructions[0] = btf.WithFuncMetadata(spec.Instructions[0], &btf.Func{Name: spec.Name, Type: xdpFuncProto(), Linkage: btf.GlobalFunc})
		}
		return spec, nil
	}
	s, err := spec(true)
	if err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgramWithOptions(s, ebpf.ProgramOptions{LogDisabled: false})
	if err != nil && ext == nil && errors.Is(err, unix.EINVAL) {
		// Kernels before 5.18 know neither frags-aware programs nor
		// bpf_xdp_get_buff_len: measure the frame from its pointers.
		if s, err = spec(false); err != nil {
			return nil, err
		}
		prog, err = ebpf.NewProgramWithOptions(s, ebpf.ProgramOptions{})
	}
	if err != nil && ext != nil && errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("load as an extension (freplace) of the libxdp dispatcher's %s: refused (EPERM): it needs CAP_BPF and CAP_PERFMON, "+
			"and some restricted kernels refuse BPF_PROG_TYPE_EXT even to root, in which case no libxdp dispatcher works on this host: %w: %w", ext.slot, ErrNotSupported, err)
	}
	if err != nil {
		return nil, bpfError("load program", err)
	}
	return prog, nil
}

func kfuncID(name string) (btf.TypeID, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, fmt.Errorf("kernel BTF (needed for kfunc %s): %w: %w", name, ErrNotSupported, err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(name, &fn); err != nil {
		return 0, fmt.Errorf("kfunc %s not in this kernel: %w: %w", name, ErrNotSupported, err)
	}
	id, err := spec.TypeID(fn)
	if err != nil {
		return 0, fmt.Errorf("kfunc %s: %w", name, err)
	}
	return id, nil
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

func (p *Program) attach(mode AttachMode) error {
	try := func(flags link.XDPAttachFlags) error {
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: p.ifindex, Flags: flags})
		if err != nil {
			return err
		}
		p.link = l
		return nil
	}
	var err error
	switch mode {
	case AttachDriver:
		err = try(link.XDPDriverMode)
	case AttachGeneric:
		err = try(link.XDPGenericMode)
	default:
		if err = try(link.XDPDriverMode); err == nil {
			p.mode = AttachDriver
			return nil
		}
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
			break
		}
		if err = try(link.XDPGenericMode); err == nil {
			p.mode = AttachGeneric
			return nil
		}
	}
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		if busy := checkFree(p.ifindex, ShareExclusive); busy != nil {
			return fmt.Errorf("%w (attach: %w)", busy, err)
		}
		return fmt.Errorf("attach: another XDP program is attached to the interface (see `ip link show`; detach it or use its socket map): %w: %w", ErrBusy, err)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("attach in %v mode: the driver does not support it: %w: %w", mode, ErrNotSupported, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("attach: %w: %w", ErrPermission, err)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ERANGE):
		return fmt.Errorf("attach in %v mode: the device refused the program (MTU too large for XDP without multi-buffer?): %w", mode, err)
	}
	return fmt.Errorf("attach in %v mode: %w", mode, err)
}

// Mode returns the mode the program was attached in (driver or generic).
func (p *Program) Mode() AttachMode { return p.mode }

// Register makes the program redirect frames of queue to s. From then on
// the RX waits of s also end when the program is detached by someone else
// (ErrDetached, see Err).
func (p *Program) Register(queue int, s *Socket) error {
	if err := p.xsks.Put(uint32(queue), uint32(s.FD())); err != nil {
		return &OpError{Op: "register socket in XSKMAP for", Ifindex: p.ifindex, Queue: queue, Err: err}
	}
	w := &p.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.socks == nil {
		p.socks = map[int]*Socket{}
	}
	if old := p.socks[queue]; old != nil && old != s {
		old.setProgram(nil)
	}
	p.socks[queue] = s
	s.setProgram(p)
	return nil
}

// RegisterFD makes the program redirect frames of queue to the AF_XDP
// socket with file descriptor fd, which need not come from this package
// (another library's socket, or one received from another process): the
// socket must be bound to queue of the program's interface. The map keeps
// its own reference, so the caller may close fd afterwards.
func (p *Program) RegisterFD(queue, fd int) error {
	if fd < 0 || queue < 0 {
		return &OpError{Op: "register socket in XSKMAP for", Ifindex: p.ifindex, Queue: queue, Err: invalid("socket descriptor", fd, "queue and descriptor must not be negative")}
	}
	if err := p.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return &OpError{Op: "register socket in XSKMAP for", Ifindex: p.ifindex, Queue: queue, Err: err}
	}
	return nil
}

// Unregister stops redirection for queue; its frames go to the kernel.
func (p *Program) Unregister(queue int) error {
	if err := p.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return &OpError{Op: "unregister socket from XSKMAP for", Ifindex: p.ifindex, Queue: queue, Err: err}
	}
	w := &p.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := p.socks[queue]; s != nil {
		s.setProgram(nil)
		delete(p.socks, queue)
	}
	return nil
}

// ProgramID returns the kernel's ID of the loaded program.
func (p *Program) ProgramID() (uint32, error) {
	if p.prog == nil {
		return 0, fmt.Errorf("no program: xdpio only fills the caller's XSKMAP (UserMap)")
	}
	info, err := p.prog.Info()
	if err != nil {
		return 0, err
	}
	id, _ := info.ID()
	return uint32(id), nil
}

// Close detaches the program and frees it and its map. A program in a
// libxdp dispatcher leaves it: the dispatcher is rebuilt without it, or
// detached when it was the last one.
func (p *Program) Close() error {
	w := &p.watch
	w.closing.Store(true)
	w.mu.Lock()
	defer w.mu.Unlock()
	var first error
	if p.member != nil {
		if err := p.member.leave(p.ifindex); err != nil {
			first = fmt.Errorf("leave the libxdp dispatcher: %w", err)
		}
		p.member = nil
	}
	if p.link != nil {
		if err := p.link.Close(); err != nil {
			first = fmt.Errorf("detach XDP: %w", err)
		}
		p.link = nil
	}
	if p.prog != nil && !p.borrowed {
		p.prog.Close()
	}
	p.prog = nil
	if p.xsks != nil && !p.borrowed {
		p.xsks.Close()
	}
	p.xsks = nil
	if p.local != nil {
		p.local.Close()
		p.local = nil
	}
	if p.ns != nil {
		p.ns.Close()
		p.ns = nil
	}
	return first
}

func bpfError(op string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%s: %w: %w", op, ErrPermission, err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%s: %w: %w", op, ErrNotSupported, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// checkFree returns an error wrapping ErrBusy that names the XDP program
// already attached to the interface, if any that xdpio cannot share it
// with under share: a libxdp dispatcher is no conflict unless share is
// ShareExclusive.
func checkFree(ifindex int, share Share) error {
	a, ifname, err := attachedProgram(netns.None(), ifindex)
	if err != nil || a == nil {
		return err
	}
	if a.name == dispatcherName && share != ShareExclusive {
		return nil
	}
	return busyError(ifname, a, share)
}

// busyError says which program holds the interface and what to do.
func busyError(ifname string, a *attachedXDP, share Share) error {
	if a.name == dispatcherName {
		return fmt.Errorf("%w: another XDP program is attached to %s: id %d name %q in %s mode, libxdp's multi-program dispatcher (xdp-loader, xdp-filter), "+
			"which xdpio joins unless ProgramConfig.Share is ShareExclusive (it is %v); leave Share at ShareAuto to join it, or unload its programs (xdp-loader unload %s --all)",
			ErrBusy, ifname, a.id, a.name, a.modeName, share, ifname)
	}
	owner := fmt.Sprintf("detach it (ip link set dev %s xdp off)", ifname)
	if l, ok := xdpLink(a.id); ok {
		if a.name == "xdpio_redirect" {
			return fmt.Errorf("%w: xdpio's own program (id %d, %s mode) is attached to %s, held by bpf_link %d of another Device, in this process or another: "+
				"it goes when that Device is closed or its process exits; a queue takes one socket, but two Devices can split the queues (Config.Queues) "+
				"when both open with ProgramConfig.Share = ShareDispatcher: each is then one program of a libxdp dispatcher", ErrBusy, a.id, a.modeName, ifname, l)
		}
		owner = fmt.Sprintf("it is held by bpf_link %d, which `ip link set xdp off` cannot detach: it goes when the process that holds the link closes it or exits", l)
	}
	return fmt.Errorf("%w: another XDP program is attached to %s: id %d name %q in %s mode; %s; "+
		"or let it redirect to xdpio's sockets: pass its XSKMAP as ProgramConfig.UserMap and have it call bpf_redirect_map(map, rx_queue_index, XDP_PASS); "+
		"a libxdp dispatcher (xdp-loader) would let both run",
		ErrBusy, ifname, a.id, a.name, a.modeName, owner)
}

// xdpLink returns the ID of the bpf_link that attaches program prog, if
// one does (a program attached over netlink has none).
func xdpLink(prog ebpf.ProgramID) (link.ID, bool) {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err == nil && info.Type == link.XDPType && info.Program == prog {
			return it.ID, true
		}
	}
	return 0, false
}

// Verdicts runs each frame through the XDP program NewProgram would
// build for cfg, in the kernel's test run (BPF_PROG_RUN; nothing is
// attached), and reports whether the program would redirect it to a
// socket (true) or pass it to the kernel (false). The program is the same
// but for the action when no socket is registered, which is what tells the
// two apart here. Frames must be at least 14 bytes long.
func Verdicts(cfg ProgramConfig, frames [][]byte) ([]bool, error) {
	return verdicts(cfg, nil, frames)
}

// verdicts is Verdicts with the Local set of rules with Rule.Local filled
// from local (nil: left empty).
func verdicts(cfg ProgramConfig, local *Local, frames [][]byte) ([]bool, error) {
	if cfg.UserMap != nil || cfg.UserProgram != nil || cfg.RXHash {
		return nil, invalid("ProgramConfig", "UserMap/UserProgram/RXHash", "Verdicts runs xdpio's own filter only")
	}
	prog, err := checkProgramConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.BPF = prog
	p := &Program{}
	defer p.Close()
	if p.xsks, err = newXSKMap(1); err != nil {
		return nil, err
	}
	if hasLocal(cfg.Filter) {
		if p.local, err = newLocalMap(); err != nil {
			return nil, err
		}
		if local != nil {
			if err := p.SetLocal(*local); err != nil {
				return nil, err
			}
		}
	}
	insns, err := buildInstructions(p.maps(), cfg, build{noSocket: xdpTX})
	if err != nil {
		return nil, err
	}
	run, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xdpio_verdicts",
		Type:         ebpf.XDP,
		Instructions: insns,
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		return nil, bpfError("load program", err)
	}
	defer run.Close()
	out := make([]bool, len(frames))
	for i, f := range frames {
		if len(f) < 14 {
			return nil, invalid(fmt.Sprintf("frame %d", i), len(f), "shorter than an Ethernet header (14 bytes)")
		}
		ret, err := run.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, bpfError("BPF_PROG_RUN", err))
		}
		switch ret {
		case xdpTX:
			out[i] = true
		case xdpPass:
		default:
			return nil, fmt.Errorf("frame %d: the program returned %d", i, ret)
		}
	}
	return out, nil
}
