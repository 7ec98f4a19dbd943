package nexthop

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Defaults of the zero Options.
const (
	DefaultResolveTimeout = 3 * time.Second
	DefaultFailedHold     = time.Second
	DefaultIdleTimeout    = 5 * time.Minute
)

// Options tune a Resolver. The zero value uses the defaults.
type Options struct {
	// ResolveTimeout bounds how long Resolve waits for the kernel to
	// resolve a neighbour (ARP or neighbour discovery) before it fails with
	// an error wrapping unix.EHOSTUNREACH. Default DefaultResolveTimeout.
	ResolveTimeout time.Duration
	// FailedHold is how long a failed resolution is remembered: Resolve of
	// the same destination, or of any destination through the same
	// neighbour, fails at once during that time instead of waiting
	// ResolveTimeout again. Default DefaultFailedHold.
	FailedHold time.Duration
	// IdleTimeout is how long a cached hop that nobody looks up is kept.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// OnLocal, when set, is called with the Resolver's new view of this
	// host (Resolver.Local) each time it changes after New: an address
	// added or removed, the interface's MAC changed. It runs on the
	// Resolver's reader goroutine and must not block for long.
	OnLocal func(Local)
}

// Local is who "this host" is, as the kernel's receive path decides it
// for frames arriving on the Resolver's interface.
type Local struct {
	// MAC is the interface's Ethernet address.
	MAC net.HardwareAddr
	// Addrs are the interface's usable addresses (IPv6 ones neither
	// tentative nor failed duplicate address detection), sorted.
	Addrs []netip.Addr
	// Host are the addresses of every interface of the namespace, sorted:
	// an IPv4 packet from outside with one of them as its source is a
	// martian, which the kernel drops.
	Host []netip.Addr
}

// IsHost reports whether a is one of the namespace's addresses.
func (l Local) IsHost(a netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(l.Host, a.Unmap().WithZone(""), netip.Addr.Compare)
	return ok
}

func (o Options) withDefaults() Options {
	if o.ResolveTimeout <= 0 {
		o.ResolveTimeout = DefaultResolveTimeout
	}
	if o.FailedHold <= 0 {
		o.FailedHold = DefaultFailedHold
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return o
}

// Hop is where a datagram to Dst goes: the Ethernet destination of the
// frame, the IP source address and the largest IP packet.
type Hop struct {
	// Dst is the destination asked for, IPv4-mapped IPv6 addresses
	// unmapped and without IPv6 zone.
	Dst netip.Addr
	// Via is the neighbour the frame goes to: Dst when it is on link (and
	// for broadcast and multicast destinations), else the gateway, which
	// may be an IPv6 link-local address, also for an IPv4 Dst.
	Via netip.Addr
	// MAC is the Ethernet destination of the frame: Via's link-layer
	// address, or the broadcast or multicast address Dst maps to. It is
	// shared with the Resolver's cache and must not be modified.
	MAC net.HardwareAddr
	// Src is the source address the kernel would pick: the route's
	// preferred source (RTA_PREFSRC), or the interface's first address of
	// Dst's family if the route has none.
	Src netip.Addr
	// MTU is the largest IP packet to Dst: the route's MTU (a configured
	// metric or a learned path MTU) if it has one, else the interface's
	// MTU (for IPv6, its IPv6 MTU).
	MTU int
}

// String formats h like "198.19.5.7 via 198.18.0.2 (02:00:00:00:00:02) src 198.18.0.1 mtu 1500".
func (h Hop) String() string {
	return fmt.Sprintf("%v via %v (%v) src %v mtu %d", h.Dst, h.Via, h.MAC, h.Src, h.MTU)
}

// ErrOtherInterface is wrapped by the errors of Resolve for destinations
// the kernel does not send out of the Resolver's interface: the route
// leaves through another interface (the error names it), or the
// destination is an address of this host. A caller may hand such
// datagrams to a kernel socket instead.
var ErrOtherInterface = errors.New("not reached through this interface")

// normalize returns the form of dst the cache is keyed by: unmapped,
// without zone (a Resolver serves one interface, whose link every
// link-local address is taken to be on).
func normalize(dst netip.Addr) netip.Addr {
	return dst.Unmap().WithZone("")
}
