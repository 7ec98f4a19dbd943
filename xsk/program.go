package xsk

import (
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/cilium/ebpf"
	"golang.org/x/net/bpf"
)

// AttachMode chooses where the XDP program runs.
type AttachMode int

const (
	// AttachAuto tries driver (native) mode and falls back to generic.
	AttachAuto AttachMode = iota
	// AttachDriver runs the program in the driver (XDP_FLAGS_DRV_MODE).
	AttachDriver
	// AttachGeneric runs it on the skb path (XDP_FLAGS_SKB_MODE): every
	// driver has it, slower, copy mode only.
	AttachGeneric
)

// String returns the mode's name as the CLI and the docs spell it.
func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachDriver:
		return "driver"
	case AttachGeneric:
		return "generic"
	}
	return "AttachMode(" + strconv.Itoa(int(m)) + ")"
}

// Share says how xdpio's program shares an interface with other XDP
// programs (ProgramConfig.Share).
type Share int

const (
	// ShareAuto joins libxdp's multi-program dispatcher when one is
	// attached (loaded by xdp-loader, xdp-filter or any libxdp user), as one
	// more program; with nothing attached, xdpio attaches its program alone
	// through a bpf_link; with any other program attached, Open fails with
	// ErrBusy.
	ShareAuto Share = iota
	// ShareExclusive never joins a dispatcher: anything attached is
	// ErrBusy.
	ShareExclusive
	// ShareDispatcher always goes through a libxdp dispatcher: it joins
	// the one attached, or attaches a new one holding xdpio's program
	// alone, so that libxdp users (xdp-loader, xdp-filter) can add theirs
	// next to it later.
	ShareDispatcher
)

// String returns the mode's name as the CLI and the docs spell it.
func (s Share) String() string {
	switch s {
	case ShareAuto:
		return "auto"
	case ShareExclusive:
		return "exclusive"
	case ShareDispatcher:
		return "dispatcher"
	}
	return "Share(" + strconv.Itoa(int(s)) + ")"
}

// Rule selects frames for redirection into the sockets. Zero fields match
// anything; a frame matches a rule when every non-zero field matches.
type Rule struct {
	// EtherType after up to two VLAN tags (802.1Q/802.1ad), e.g. 0x0800.
	EtherType uint16
	// Protocol is the IPv4 protocol or the IPv6 next header of the fixed
	// header (IPv6 extension headers are not walked), e.g. 17 for UDP.
	Protocol uint8
	// DstPortMin..DstPortMax is a destination port range for TCP, UDP,
	// UDP-Lite and SCTP; both zero means any port. IPv4 fragments, the
	// first one included, carry no whole datagram and never match a port
	// range: they reach the kernel, which reassembles them.
	DstPortMin, DstPortMax uint16
	// Dst, when valid, is a destination address prefix (IPv4 or IPv6; an
	// IPv4-mapped IPv6 prefix counts as IPv4): only frames of that family
	// to an address inside it match.
	Dst netip.Prefix
	// Untagged matches only frames without a VLAN tag: those the kernel
	// would deliver on the interface itself rather than on a VLAN
	// interface stacked on it.
	Untagged bool
	// Local matches only IPv4 and IPv6 frames addressed to this host on
	// the interface: the destination MAC is the interface's own and the
	// destination address one of its unicast addresses, as the program's
	// Local set has them (Program.SetLocal). Frames to other hosts (a
	// router's transit traffic, what a promiscuous NIC sees), to other
	// MACs, to broadcast or multicast addresses stay with the kernel,
	// which delivers or drops them as it would without XDP. Until
	// SetLocal is called the set is empty and nothing matches.
	Local bool
}

func (r Rule) ports() bool { return r.DstPortMin != 0 || r.DstPortMax != 0 }

// dst returns the rule's destination prefix with an IPv4-mapped one
// unmapped, and whether it has one.
func (r Rule) dst() (netip.Prefix, bool) {
	if !r.Dst.IsValid() {
		return netip.Prefix{}, false
	}
	p := r.Dst.Masked()
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			bits = 0
		}
		p = netip.PrefixFrom(a.Unmap(), bits).Masked()
	}
	return p, true
}

// UDPPort returns a rule for UDP to one destination port, over IPv4 and
// IPv6.
func UDPPort(port uint16) Rule {
	return Rule{Protocol: 17, DstPortMin: port, DstPortMax: port}
}

// ProgramConfig configures the XDP program that redirects frames to the
// sockets. The zero value redirects every frame of every queue that has a
// registered socket, and passes frames of the other queues to the kernel.
type ProgramConfig struct {
	// Filter: frames matching any rule are redirected; the rest go to the
	// kernel stack (XDP_PASS), so ARP, SSH and control connections keep
	// working. Empty: redirect everything. With Expr or BPF set too, a
	// frame is redirected when it matches a rule and the expression: the
	// rules pick the traffic, the expression narrows it (a source
	// allow or deny list, say), and what it turns away goes to the kernel,
	// whose firewall sees it.
	Filter []Rule
	// Expr is a tcpdump (pcap-filter) expression, such as "udp dst port
	// 4789 and not src net 198.18.1.0/24": matching frames are
	// redirected, the rest passed to the kernel. Package filter compiles
	// it and documents what it supports; an unsupported construct is an
	// error naming it. At most one of Expr and BPF may be set.
	Expr string
	// BPF is a classic BPF program (compiled with libpcap, tcpdump -dd,
	// or package filter) run on each frame from its Ethernet header: a
	// non-zero return redirects the frame, 0 passes it to the kernel.
	// It sees the whole frame, every buffer of a multi-buffer one; a
	// load beyond its end returns 0, as in classic BPF. Expr and BPF need
	// Linux 5.18 or later (bpf_xdp_load_bytes, bpf_xdp_get_buff_len).
	BPF []bpf.Instruction
	// UserProgram is an XDP program of the caller's own that decides
	// which frames reach the sockets ("bring your own program"): xdpio
	// attaches it instead of building one, and registers the sockets in
	// UserMap, which must then be set. The program must redirect with
	// bpf_redirect_map(&map, ctx->rx_queue_index, XDP_PASS) into that
	// map; see UserMap for its contract. Filter, Expr, BPF and RXHash
	// apply to xdpio's program only and must be unset. For multi-buffer
	// sockets (SocketConfig.MultiBuffer) the program must be loaded
	// frags-aware (BPF_F_XDP_HAS_FRAGS, section "xdp.frags"), or the
	// kernel refuses the attach. xdpio does not close the program or the
	// map; Program.Close detaches the program.
	UserProgram *ebpf.Program
	// UserMap is the caller's XSKMAP that xdpio registers the sockets
	// in. Its contract: type BPF_MAP_TYPE_XSKMAP, key a u32 RX queue
	// index, value a u32 AF_XDP socket file descriptor, max_entries above
	// the highest queue bound; xdpio puts the socket of queue q at key q
	// (Program.Register) and deletes it on Unregister. With UserProgram,
	// xdpio attaches that program; without, xdpio loads and attaches
	// nothing and only fills the map, for a program the caller (or
	// another loader) attached already.
	UserMap *ebpf.Map
	// RXHash stores the NIC's RSS hash (kfunc bpf_xdp_metadata_rx_hash) in
	// the metadata in front of each frame; read it with Batch.RXHash. The
	// program is then bound to the device (BPF_F_XDP_DEV_BOUND_ONLY).
	// A user's program (UserProgram) writes metadata itself: a u32 hash,
	// a u32 hash type, a u32 with bit 0 set when the hash is valid and a
	// reserved u32, ending where the frame starts.
	RXHash bool
	// Queues is the size of the socket map: the highest queue index + 1
	// that can have a socket. Default: the device's queue count.
	Queues int
	// Attach chooses driver or generic mode. When xdpio joins a
	// dispatcher already attached, the dispatcher's mode applies.
	Attach AttachMode
	// Share: how to share the interface with other XDP programs; the
	// default (ShareAuto) joins a libxdp dispatcher that is attached.
	//
	// In a dispatcher, xdpio's program is one of up to ten programs run in
	// turn by run priority (Priority): frames it redirects stop there,
	// frames it passes (XDP_PASS) go on to the next program, and then to
	// the kernel. It follows libxdp's protocol: the programs are pinned in
	// bpffs ($LIBXDP_BPFFS or /sys/fs/bpf, which must be mounted) under
	// xdp/dispatch-IFINDEX-ID/, `xdp-loader status` lists xdpio's as
	// "xdpio_redirect", and libxdp's tools can add and remove their
	// programs while xdpio's sockets run. Close takes xdpio's program out
	// again (and detaches the dispatcher when it was the last program). A
	// process killed before Close leaves its program pinned in the
	// dispatcher: with its sockets gone, it passes every frame on; remove
	// it with `xdp-loader unload DEV -i ID`. RXHash needs a device-bound
	// program and does not work in a dispatcher; UserProgram and UserMap
	// do not join one.
	Share Share
	// Priority is the run priority in a dispatcher: lower runs first. 0
	// means 50, libxdp's default.
	Priority int
	// MaxFrame is the longest frame (Ethernet header to the end of its
	// last buffer) the program redirects: longer frames pass to the
	// kernel's stack instead of being dropped at a socket that cannot
	// hold them (a jumbo frame on a socket without multi-buffer). Left 0,
	// Open sets it to what its sockets hold: a UMEM frame less its
	// headroom, or no limit for multi-buffer sockets. Negative: no limit.
	MaxFrame int
}

// Local is what rules with Rule.Local compare frames with: the
// interface's MAC address and its unicast addresses. The program holds
// up to LocalSlots addresses of each family; frames to the others go to
// the kernel, which delivers them as it would without XDP.
type Local struct {
	MAC   net.HardwareAddr
	Addrs []netip.Addr
}

// LocalSlots is how many IPv4 and how many IPv6 addresses the program's
// Local set holds.
const LocalSlots = 16

// Layout of the Local set's map value: the MAC (6 bytes), a valid flag,
// a pad byte, LocalSlots IPv4 addresses, then LocalSlots IPv6 addresses,
// each as the bytes lie in a frame.
const (
	localValid     = 6
	localV4        = 8
	localV6        = localV4 + 4*LocalSlots
	localValueSize = localV6 + 16*LocalSlots
)

// encode returns the map value of l: the MAC and the first LocalSlots
// unicast addresses of each family (unmapped, zones dropped), sorted so
// that the same set always encodes the same way.
func (l Local) encode() []byte {
	v := make([]byte, localValueSize)
	if len(l.MAC) != 6 {
		return v // no MAC: nothing matches
	}
	copy(v, l.MAC)
	v[localValid] = 1
	addrs := make([]netip.Addr, 0, len(l.Addrs))
	for _, a := range l.Addrs {
		a = a.Unmap().WithZone("")
		if a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	n4, n6 := 0, 0
	for _, a := range addrs {
		switch {
		case a.Is4() && n4 < LocalSlots:
			b := a.As4()
			copy(v[localV4+4*n4:], b[:])
			n4++
		case a.Is6() && n6 < LocalSlots:
			b := a.As16()
			copy(v[localV6+16*n6:], b[:])
			n6++
		}
	}
	return v
}

// Metadata layout written by the program when RXHash is set: hash u32,
// hash type u32, flags u32, reserved u32, ending where the packet starts.
const (
	rxMetaLen       = 16
	rxMetaHashValid = 1
)
