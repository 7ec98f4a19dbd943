//go:build linux

package xsk

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// This file speaks libxdp's multi-program protocol (xdp-tools,
// lib/libxdp/protocol.org), so that xdpio's redirect program can be one
// of several XDP programs on an interface, next to xdp-filter, xdp-loader
// and every other libxdp user:
//
//   - A dispatcher, an XDP program named "xdp_dispatcher", calls up to ten
//     global stub functions prog0..prog9 in turn; each component program
//     replaces one stub (BPF_PROG_TYPE_EXT, freplace). After each call the
//     dispatcher goes on to the next program when the returned action is
//     in that slot's chain-call bitmap, and returns the action otherwise.
//   - Its configuration is the frozen read-only array map it references
//     (its only map): magic 236, version, number of programs, frags, and
//     per slot the chain-call bitmap, the run priority and the program's
//     flags. Slots are sorted by run priority, lower first.
//   - Components and their links are pinned in bpffs under
//     <bpffs>/xdp/dispatch-IFINDEX-DISPATCHERID/prog<N>-{prog,link}, so
//     they outlive the process that loaded them; the xdp directory is
//     flock()ed around every change.
//   - Adding or removing a program builds a new dispatcher with the new
//     set, attaches every component to it as well, pins it, swaps it for
//     the old one on the interface atomically (netlink, XDP_FLAGS_REPLACE
//     with the old program as the expected one), then unpins the old one.
//     A swap that finds another program than expected starts over.
//
// xdpio builds its dispatcher with cilium/ebpf's asm rather than loading
// libxdp's object file: only the stubs in use are generated, and the
// version (2 or 3) is the one already on the interface, or else the one of
// the libxdp installed on the system, so that its tools keep working on
// the interface.

const (
	dispatcherName    = "xdp_dispatcher"
	dispatcherMagic   = 236
	dispatcherRetval  = 31 // the stubs' return value, always in the chain bitmap
	dispatcherSlots   = 10
	dispatcherDefPrio = 50 // libxdp's run priority when a program has none
	dispatcherLatest  = 3
	bpfFSMagic        = 0xcafe4a11
	ifXDPExpectedFD   = 8 // IFLA_XDP_EXPECTED_FD

	// Offsets in the configuration: per slot a u32 in each array.
	confChain    = 4   // chain_call_actions[10]
	confPrio     = 44  // run_prios[10]
	confFlags    = 84  // program_flags[10]
	confDevBound = 124 // is_xdp_devbound (v3)
)

// dispatcherConfigSize is the configuration map's value size per version:
// v2 is magic, version, count and frags bytes and three arrays of ten
// u32; v3 adds a device-bound byte (padded to 128).
func dispatcherConfigSize(version int) int {
	if version >= 3 {
		return 128
	}
	return 124
}

// component is one program of a dispatcher.
type component struct {
	prog   *ebpf.Program // the EXT program
	id     ebpf.ProgramID
	name   string
	chain  uint32 // chain-call actions, without the stub's bit
	prio   uint32
	flags  uint32 // BPF_F_XDP_HAS_FRAGS when the program handles frags
	loaded bool   // already in a dispatcher (sorts before new ones on ties)
}

// dispatcher is a dispatcher attached to an interface, read back from the
// kernel and bpffs.
type dispatcher struct {
	prog    *ebpf.Program
	id      ebpf.ProgramID
	version int
	comps   []component
}

func (d *dispatcher) close() {
	if d == nil {
		return
	}
	d.prog.Close()
	for _, c := range d.comps {
		c.prog.Close()
	}
}

// member is what a Program that joined a dispatcher keeps to leave it.
type member struct {
	ns    netns.NsHandle // the interface's network namespace
	dir   string         // <bpffs>/xdp
	ownID ebpf.ProgramID
	// noFrags names the dispatcher's programs that are not frags-aware
	// (when any is, the dispatcher is not, and multi-buffer frames do not
	// reach the sockets).
	noFrags []string
}

// attachedXDP is the program attached to an interface, if any.
type attachedXDP struct {
	id       ebpf.ProgramID
	mode     uint32 // XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE
	name     string
	modeName string
}

// attachedProgram reads which XDP program is attached to ifindex in ns.
func attachedProgram(ns netns.NsHandle, ifindex int) (*attachedXDP, string, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, "", err
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return nil, l.Attrs().Name, nil
	}
	a := &attachedXDP{id: ebpf.ProgramID(x.ProgId), name: "?"}
	switch x.AttachMode {
	case 1: // XDP_ATTACHED_DRV
		a.mode, a.modeName = unix.XDP_FLAGS_DRV_MODE, "driver"
	case 2: // XDP_ATTACHED_SKB
		a.mode, a.modeName = unix.XDP_FLAGS_SKB_MODE, "generic"
	case 3:
		a.mode, a.modeName = unix.XDP_FLAGS_HW_MODE, "offload"
	default:
		a.modeName = fmt.Sprintf("attach mode %d", x.AttachMode)
	}
	if prog, err := ebpf.NewProgramFromID(a.id); err == nil {
		if info, err := prog.Info(); err == nil {
			a.name = info.Name
		}
		prog.Close()
	}
	return a, l.Attrs().Name, nil
}

// readDispatcher opens the program with id and, when it is a libxdp
// dispatcher, reads its configuration and its components' pins. It
// returns (nil, nil) for a program that is not a dispatcher.
func readDispatcher(id ebpf.ProgramID, ifindex int, dir string) (_ *dispatcher, err error) {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return nil, fmt.Errorf("open attached program %d: %w", id, err)
	}
	d := &dispatcher{prog: prog, id: id}
	defer func() {
		if err != nil {
			d.close() // the components opened so far too
		}
	}()
	info, err := prog.Info()
	if err != nil {
		return nil, err
	}
	maps, _ := info.MapIDs()
	if _, hasBTF := info.BTFID(); info.Name != dispatcherName || !hasBTF || len(maps) != 1 {
		prog.Close()
		return nil, nil
	}
	m, err := ebpf.NewMapFromID(maps[0])
	if err != nil {
		return nil, fmt.Errorf("open dispatcher %d's configuration: %w", id, err)
	}
	defer m.Close()
	mi, err := m.Info()
	if err != nil {
		return nil, err
	}
	if mi.KeySize != 4 || mi.ValueSize < 2 || mi.MaxEntries != 1 || mi.Flags&unix.BPF_F_RDONLY_PROG == 0 {
		prog.Close()
		return nil, nil
	}
	conf := make([]byte, mi.ValueSize)
	if err := m.Lookup(uint32(0), &conf); err != nil {
		return nil, fmt.Errorf("read dispatcher %d's configuration: %w", id, err)
	}
	if conf[0] != dispatcherMagic {
		return nil, fmt.Errorf("%w: the attached libxdp dispatcher (id %d) is of version 1 (libxdp before 1.2), which xdpio does not join", ErrBusy, id)
	}
	d.version = int(conf[1])
	if d.version < 2 || d.version > dispatcherLatest {
		return nil, fmt.Errorf("%w: the attached libxdp dispatcher (id %d) is of version %d; xdpio joins versions 2 to %d", ErrBusy, id, d.version, dispatcherLatest)
	}
	if len(conf) < dispatcherConfigSize(d.version) {
		return nil, fmt.Errorf("dispatcher %d: configuration of %d bytes, want %d for version %d", id, len(conf), dispatcherConfigSize(d.version), d.version)
	}
	if d.version >= 3 && conf[confDevBound] != 0 {
		return nil, fmt.Errorf("%w: the attached libxdp dispatcher (id %d) is bound to the device (XDP_ATTACH_DEVBIND); xdpio's program cannot join a device-bound dispatcher", ErrNotSupported, id)
	}
	n := int(conf[2])
	if n > dispatcherSlots {
		return nil, fmt.Errorf("dispatcher %d: %d programs enabled, at most %d", id, n, dispatcherSlots)
	}
	pins := pinDir(dir, ifindex, id)
	for i := range n {
		c := component{
			chain:  binary.NativeEndian.Uint32(conf[confChain+4*i:]) &^ (1 << dispatcherRetval),
			prio:   binary.NativeEndian.Uint32(conf[confPrio+4*i:]),
			flags:  binary.NativeEndian.Uint32(conf[confFlags+4*i:]),
			loaded: true,
		}
		c.prog, err = ebpf.LoadPinnedProgram(filepath.Join(pins, fmt.Sprintf("prog%d-prog", i)), nil)
		if err != nil {
			return nil, fmt.Errorf("%w: the libxdp dispatcher (id %d) on the interface has no pinned program %d in %s (pinned in another mount namespace or bpffs?): %w", ErrBusy, id, i, pins, err)
		}
		d.comps = append(d.comps, c)
		if ci, err := c.prog.Info(); err == nil {
			d.comps[i].name = ci.Name
			d.comps[i].id, _ = ci.ID()
		}
	}
	return d, nil
}

func pinDir(dir string, ifindex int, id ebpf.ProgramID) string {
	return filepath.Join(dir, fmt.Sprintf("dispatch-%d-%d", ifindex, id))
}

// bpffsDir returns libxdp's state directory, <bpffs>/xdp, creating it:
// $LIBXDP_BPFFS or /sys/fs/bpf must be a mounted bpffs.
func bpffsDir() (string, error) {
	root := os.Getenv("LIBXDP_BPFFS")
	if root == "" {
		root = "/sys/fs/bpf"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || uint32(st.Type) != bpfFSMagic {
		return "", fmt.Errorf("%w: joining a libxdp dispatcher needs a bpffs at %s (mount -t bpf bpf %s, or set LIBXDP_BPFFS as for libxdp)", ErrNotSupported, root, root)
	}
	dir := filepath.Join(root, "xdp")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

// lockDir takes libxdp's lock: flock on the state directory.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Flock(fd, unix.LOCK_UN); unix.Close(fd) }, nil
}

// installedDispatcherVersion is the dispatcher version of the libxdp
// installed on this system (its xdp-dispatcher.o), or the latest xdpio
// knows when none is found.
func installedDispatcherVersion() int {
	dirs := []string{os.Getenv("LIBXDP_OBJECT_PATH")}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i386", "riscv64": "riscv64", "ppc64le": "powerpc64le", "s390x": "s390x"}[runtime.GOARCH]
	for _, lib := range []string{"/usr/lib", "/usr/local/lib", "/usr/lib64"} {
		if arch != "" {
			dirs = append(dirs, filepath.Join(lib, arch+"-linux-gnu", "bpf"))
		}
		dirs = append(dirs, filepath.Join(lib, "bpf"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if v := objectDispatcherVersion(filepath.Join(d, "xdp-dispatcher.o")); v >= 2 && v <= dispatcherLatest {
			return v
		}
	}
	return dispatcherLatest
}

// objectDispatcherVersion reads the dispatcher_version that libxdp's
// object declares in its BTF (section xdp_metadata, encoded as the
// element count of an array pointer), 0 when absent.
func objectDispatcherVersion(path string) int {
	spec, err := btf.LoadSpec(path)
	if err != nil {
		return 0
	}
	var sec *btf.Datasec
	if err := spec.TypeByName("xdp_metadata", &sec); err != nil {
		return 0
	}
	for _, v := range sec.Vars {
		vr, ok := v.Type.(*btf.Var)
		if !ok || vr.Name != "dispatcher_version" {
			continue
		}
		if p, ok := vr.Type.(*btf.Pointer); ok {
			if a, ok := p.Target.(*btf.Array); ok {
				return int(a.Nelems)
			}
		}
	}
	return 0
}

// xdpFuncProto is the C prototype int f(struct xdp_md *ctx) that the
// dispatcher's stubs and their replacements share: the kernel compares the
// two, by the struct's name.
func xdpFuncProto() *btf.FuncProto {
	u32 := &btf.Int{Name: "__u32", Size: 4}
	var members []btf.Member
	for i, n := range []string{"data", "data_end", "data_meta", "ingress_ifindex", "rx_queue_index", "egress_ifindex"} {
		members = append(members, btf.Member{Name: n, Type: u32, Offset: btf.Bits(32 * i)})
	}
	md := &btf.Struct{Name: "xdp_md", Size: 24, Members: members}
	return &btf.FuncProto{
		Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed},
		Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: md}}},
	}
}

// loadDispatcher loads a dispatcher for comps (sorted) of the given
// version, frags-aware when frags.
func loadDispatcher(version int, comps []component, frags bool) (*ebpf.Program, error) {
	conf := make([]byte, dispatcherConfigSize(version))
	conf[0], conf[1], conf[2] = dispatcherMagic, byte(version), byte(len(comps))
	if frags {
		conf[3] = 1
	}
	for i, c := range comps {
		binary.NativeEndian.PutUint32(conf[confChain+4*i:], c.chain|1<<dispatcherRetval)
		binary.NativeEndian.PutUint32(conf[confPrio+4*i:], c.prio)
		binary.NativeEndian.PutUint32(conf[confFlags+4*i:], c.flags&unix.BPF_F_XDP_HAS_FRAGS)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "xdp_disp_rodata", Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(conf)), MaxEntries: 1,
		Flags: unix.BPF_F_RDONLY_PROG,
	})
	if err != nil {
		return nil, bpfError("create dispatcher configuration", err)
	}
	defer m.Close()
	if err := m.Put(uint32(0), conf); err != nil {
		return nil, fmt.Errorf("write dispatcher configuration: %w", err)
	}
	if err := m.Freeze(); err != nil {
		return nil, fmt.Errorf("freeze dispatcher configuration: %w", err)
	}
	proto := xdpFuncProto()
	fn := func(name string) *btf.Func { return &btf.Func{Name: name, Type: proto, Linkage: btf.GlobalFunc} }
	in := asm.Instructions{
		btf.WithFuncMetadata(asm.Mov.Reg(asm.R6, asm.R1), fn(dispatcherName)),
	}
	for i := range comps {
		in = append(in,
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Call.Label(fmt.Sprintf("prog%d", i)),
			// Go on when (1 << action) is in the slot's chain bitmap.
			asm.Mov.Imm32(asm.R1, 1),
			asm.LSh.Reg32(asm.R1, asm.R0),
			asm.LoadMapValue(asm.R2, m.FD(), uint32(confChain+4*i)),
			asm.LoadMem(asm.R2, asm.R2, 0, asm.Word),
			asm.And.Reg32(asm.R1, asm.R2),
			asm.JEq.Imm(asm.R1, 0, "dispatcher_return"),
		)
	}
	in = append(in,
		asm.Mov.Imm(asm.R0, xdpPass),
		asm.Return().WithSymbol("dispatcher_return"),
	)
	// The stubs call bpf_xdp_adjust_tail(ctx, 0), as libxdp's do: the
	// kernel lets a program that may change packet data replace only a
	// function that may too.
	for i := range comps {
		name := fmt.Sprintf("prog%d", i)
		in = append(in,
			btf.WithFuncMetadata(asm.Mov.Imm(asm.R2, 0).WithSymbol(name), fn(name)),
			asm.FnXdpAdjustTail.Call(),
			asm.Mov.Imm(asm.R0, dispatcherRetval),
			asm.Return(),
		)
	}
	// Expected attach type BPF_XDP, as libbpf loads libxdp's: the kernel
	// lets an extension move only between targets of the same program
	// and attach type, and libxdp moves ours, and we move its programs.
	spec := &ebpf.ProgramSpec{
		Name: dispatcherName, Type: ebpf.XDP, AttachType: ebpf.AttachXDP, Instructions: in, License: "Dual MIT/GPL",
	}
	if frags {
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, bpfError("load dispatcher", err)
	}
	return prog, nil
}

// sortComponents orders programs as libxdp does: by run priority, then
// by name, then those already loaded first.
func sortComponents(c []component) {
	slices.SortStableFunc(c, func(a, b component) int {
		if r := cmp.Compare(a.prio, b.prio); r != 0 {
			return r
		}
		if r := strings.Compare(a.name, b.name); r != 0 {
			return r
		}
		switch {
		case a.loaded && !b.loaded:
			return -1
		case !a.loaded && b.loaded:
			return 1
		}
		return 0
	})
}

// built is a new dispatcher with its components attached and pinned.
type built struct {
	prog *ebpf.Program
	id   ebpf.ProgramID
	pins string
}

func (b *built) discard() {
	if b == nil {
		return
	}
	if b.pins != "" {
		os.RemoveAll(b.pins)
	}
	b.prog.Close()
}

// buildDispatcher loads a dispatcher for comps (sorted), attaches each
// component to its slot and pins programs and links. A component whose
// prog is nil is xdpio's own, loaded here against its slot by own.
func buildDispatcher(dir string, ifindex, version int, comps []component, own func(target *ebpf.Program, slot string) (*ebpf.Program, error)) (_ *built, ownProg *ebpf.Program, err error) {
	frags := true
	for _, c := range comps {
		frags = frags && c.flags&unix.BPF_F_XDP_HAS_FRAGS != 0
	}
	prog, err := loadDispatcher(version, comps, frags)
	if err != nil && frags && errors.Is(err, unix.EINVAL) {
		frags = false // before Linux 5.18
		prog, err = loadDispatcher(version, comps, false)
	}
	if err != nil {
		return nil, nil, err
	}
	b := &built{prog: prog}
	defer func() {
		if err != nil {
			b.discard()
			if ownProg != nil {
				ownProg.Close()
				ownProg = nil
			}
		}
	}()
	info, err := prog.Info()
	if err != nil {
		return nil, nil, err
	}
	b.id, _ = info.ID()
	b.pins = pinDir(dir, ifindex, b.id)
	if err := os.Mkdir(b.pins, 0o700); err != nil {
		b.pins = ""
		return nil, nil, fmt.Errorf("create %s: %w", pinDir(dir, ifindex, b.id), err)
	}
	for i, c := range comps {
		slot := fmt.Sprintf("prog%d", i)
		p := c.prog
		if p == nil {
			if p, err = own(prog, slot); err != nil {
				return nil, nil, err
			}
			ownProg = p
		}
		l, err := link.AttachFreplace(prog, slot, p)
		if err != nil {
			return nil, nil, bpfError(fmt.Sprintf("attach %q to the dispatcher's %s", c.name, slot), err)
		}
		err = p.Pin(filepath.Join(b.pins, slot+"-prog"))
		if err == nil {
			err = l.Pin(filepath.Join(b.pins, slot+"-link"))
		}
		l.Close() // the pin holds the link
		if err != nil {
			return nil, nil, fmt.Errorf("pin %q: %w", c.name, err)
		}
	}
	return b, ownProg, nil
}

// setXDP attaches fd (-1: detaches) to ifindex in ns over netlink,
// replacing the program expected (-1: none may be attached).
func setXDP(ns netns.NsHandle, ifindex, fd int, mode uint32, expected int) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	flags := mode
	x := nl.NewRtAttr(unix.IFLA_XDP|unix.NLA_F_NESTED, nil)
	x.AddRtAttr(nl.IFLA_XDP_FD, u32(uint32(int32(fd))))
	if expected >= 0 {
		flags |= unix.XDP_FLAGS_REPLACE
		x.AddRtAttr(ifXDPExpectedFD, u32(uint32(expected)))
	} else {
		flags |= unix.XDP_FLAGS_UPDATE_IF_NOEXIST
	}
	x.AddRtAttr(nl.IFLA_XDP_FLAGS, u32(flags))
	req.AddData(x)
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer s.Close()
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}
	_, err = req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// errRetry: the interface's program changed while a new dispatcher was
// being built; start over.
var errRetry = errors.New("the attached program changed")

// replaceDispatcher puts b on the interface in place of old (nil: of
// nothing) and unpins old. b == nil detaches old.
func replaceDispatcher(ns netns.NsHandle, ifindex int, mode uint32, old *dispatcher, b *built, dir string) error {
	fd, expected := -1, -1
	if b != nil {
		fd = b.prog.FD()
	}
	if old != nil {
		expected = old.prog.FD()
	}
	if err := setXDP(ns, ifindex, fd, mode, expected); err != nil {
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.EBUSY) {
			return errRetry
		}
		return err
	}
	if old != nil {
		os.RemoveAll(pinDir(dir, ifindex, old.id))
	}
	return nil
}

// joinDispatcher makes xdpio's program one of the libxdp dispatcher's on
// the interface, or, when none is attached (share == ShareDispatcher),
// creates one with xdpio's program alone. load loads xdpio's program as an
// extension of the given slot. It returns the program loaded and what
// Close needs to leave.
func joinDispatcher(ifindex int, mode AttachMode, prio int, load func(target *ebpf.Program, slot string) (*ebpf.Program, error)) (_ *ebpf.Program, _ *member, _ AttachMode, err error) {
	dir, err := bpffsDir()
	if err != nil {
		return nil, nil, 0, err
	}
	ns, err := netns.Get()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("network namespace: %w", err)
	}
	defer func() {
		if err != nil {
			ns.Close()
		}
	}()
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, nil, 0, err
	}
	defer unlock()
	if prio <= 0 {
		prio = dispatcherDefPrio
	}
	own := component{name: "xdpio_redirect", chain: 1 << xdpPass, prio: uint32(prio), flags: unix.BPF_F_XDP_HAS_FRAGS}
	for range 5 {
		prog, got, comps, err := joinOnce(ns, dir, ifindex, mode, own, load)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return nil, nil, 0, err
		}
		info, err := prog.Info()
		if err != nil {
			prog.Close()
			return nil, nil, 0, err
		}
		m := &member{ns: ns, dir: dir}
		m.ownID, _ = info.ID()
		for _, c := range comps {
			if c.flags&unix.BPF_F_XDP_HAS_FRAGS == 0 {
				m.noFrags = append(m.noFrags, c.name)
			}
		}
		return prog, m, got, nil
	}
	return nil, nil, 0, fmt.Errorf("%w: the program on the interface kept changing while xdpio joined its dispatcher", ErrBusy)
}

// joinOnce is one attempt of joinDispatcher (under the lock): read what is
// attached, build a dispatcher with own added, and swap it in. It returns
// errRetry when the interface's program changed meanwhile, and the
// dispatcher's components (own included) on success.
func joinOnce(ns netns.NsHandle, dir string, ifindex int, mode AttachMode, own component, load func(*ebpf.Program, string) (*ebpf.Program, error)) (*ebpf.Program, AttachMode, []component, error) {
	a, ifname, err := attachedProgram(ns, ifindex)
	if err != nil {
		return nil, 0, nil, err
	}
	comps := []component{own}
	var old *dispatcher
	if a != nil {
		if old, err = readDispatcher(a.id, ifindex, dir); err != nil {
			return nil, 0, nil, err
		}
		if old == nil {
			return nil, 0, nil, busyError(ifname, a, ShareDispatcher)
		}
		defer old.close()
		if len(old.comps) >= dispatcherSlots {
			return nil, 0, nil, fmt.Errorf("%w: the libxdp dispatcher on %s (id %d) has all %d slots taken", ErrBusy, ifname, a.id, dispatcherSlots)
		}
		if a.mode != unix.XDP_FLAGS_DRV_MODE && a.mode != unix.XDP_FLAGS_SKB_MODE {
			return nil, 0, nil, fmt.Errorf("%w: the libxdp dispatcher on %s is attached in %s", ErrNotSupported, ifname, a.modeName)
		}
		comps = append(slices.Clone(old.comps), own)
	}
	sortComponents(comps)
	version := installedDispatcherVersion()
	if old != nil {
		version = old.version
	}
	b, prog, err := buildDispatcher(dir, ifindex, version, comps, load)
	if err != nil {
		return nil, 0, nil, err
	}
	got := AttachDriver
	if old != nil {
		if a.mode == unix.XDP_FLAGS_SKB_MODE {
			got = AttachGeneric
		}
		err = replaceDispatcher(ns, ifindex, a.mode, old, b, dir)
	} else {
		got, err = attachNew(ns, ifindex, mode, b)
	}
	if err != nil {
		b.discard()
		prog.Close()
		return nil, 0, nil, err
	}
	b.prog.Close() // the interface and the pins hold it now
	return prog, got, comps, nil
}

// attachNew attaches a new dispatcher where nothing is attached, in the
// mode asked (auto: driver, then generic).
func attachNew(ns netns.NsHandle, ifindex int, mode AttachMode, b *built) (AttachMode, error) {
	try := func(m AttachMode) error {
		flags := uint32(unix.XDP_FLAGS_DRV_MODE)
		if m == AttachGeneric {
			flags = unix.XDP_FLAGS_SKB_MODE
		}
		return replaceDispatcher(ns, ifindex, flags, nil, b, "")
	}
	switch mode {
	case AttachDriver, AttachGeneric:
		return mode, try(mode)
	}
	err := try(AttachDriver)
	if err == nil || errors.Is(err, errRetry) {
		return AttachDriver, err
	}
	return AttachGeneric, try(AttachGeneric)
}

// leave removes xdpio's program from the dispatcher it joined: a new
// dispatcher without it replaces the one attached now (which may have been
// rebuilt by libxdp since), or, when it was the last program, the
// dispatcher is detached.
func (m *member) leave(ifindex int) error {
	defer m.ns.Close()
	unlock, err := lockDir(m.dir)
	if err != nil {
		return err
	}
	defer unlock()
	for range 5 {
		a, _, err := attachedProgram(m.ns, ifindex)
		if err != nil || a == nil {
			return err
		}
		old, err := readDispatcher(a.id, ifindex, m.dir)
		if err != nil || old == nil {
			return err // someone else's program now: nothing of ours is on the interface
		}
		i := slices.IndexFunc(old.comps, func(c component) bool { return c.id == m.ownID })
		if i < 0 {
			old.close()
			return nil // removed already (xdp-loader unload)
		}
		rest := slices.Delete(slices.Clone(old.comps), i, i+1)
		var b *built
		if len(rest) > 0 {
			if b, _, err = buildDispatcher(m.dir, ifindex, old.version, rest, nil); err != nil {
				old.close()
				return err
			}
		}
		err = replaceDispatcher(m.ns, ifindex, a.mode, old, b, m.dir)
		old.close()
		if errors.Is(err, errRetry) {
			b.discard()
			continue
		}
		if err != nil {
			b.discard()
			return err
		}
		if b != nil {
			b.prog.Close()
		}
		return nil
	}
	return fmt.Errorf("%w: the program on the interface kept changing while xdpio left its dispatcher", ErrBusy)
}
