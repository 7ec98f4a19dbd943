//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
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
