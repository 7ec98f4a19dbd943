package xdpnet

import (
	"net"
	"net/netip"
	"slices"
)

// localView is what the frame checks compare with: the interface's MAC
// and addresses, and the namespace's IPv4 addresses (a source the kernel
// calls martian). It is immutable; the conn swaps in a new one when the
// kernel's addresses change.
type localView struct {
	mac   [6]byte
	addr4 [][4]byte  // the interface's IPv4 addresses
	addr6 [][16]byte // its IPv6 addresses, link-local ones included
	host4 [][4]byte  // every IPv4 address of the namespace
}

// newLocalView builds the view of an interface with MAC mac and addresses
// addrs, in a namespace with addresses host.
func newLocalView(mac net.HardwareAddr, addrs, host []netip.Addr) *localView {
	v := &localView{}
	copy(v.mac[:], mac)
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() {
			v.addr4 = append(v.addr4, a.As4())
		} else if a.Is6() {
			v.addr6 = append(v.addr6, a.As16())
		}
	}
	for _, a := range host {
		if a = a.Unmap(); a.Is4() {
			v.host4 = append(v.host4, a.As4())
		}
	}
	return v
}

func (v *localView) has4(a [4]byte) bool   { return slices.Contains(v.addr4, a) }
func (v *localView) has16(a [16]byte) bool { return slices.Contains(v.addr6, a) }

// martian4 reports whether an IPv4 source is one the kernel refuses in
// a unicast packet from a network (ip_route_input's martian sources):
// 0.0.0.0, 127.0.0.0/8 (loopback; route_localnet is not followed),
// multicast, 255.255.255.255, or, with a view, an address of this host's
// own namespace (fib_validate_source with accept_local off). The rest of
// 0.0.0.0/8 and 240.0.0.0/4 the kernel takes, and so does this.
func martian4(src [4]byte, v *localView) bool {
	switch {
	case src == [4]byte{}, src[0] == 127, src[0]&0xf0 == 0xe0, src == [4]byte{255, 255, 255, 255}:
		return true
	}
	return v != nil && slices.Contains(v.host4, src)
}

// martian16 reports whether an IPv6 source is one the kernel refuses
// (ip6_rcv_core): the loopback address ::1, or a multicast address. It
// takes the unspecified address, IPv4-mapped addresses and this host's
// own addresses as sources, and so does this (tested against the kernel:
// TestKernelReceiveChecks).
func martian16(src *[16]byte) bool {
	if src[0] == 0xff {
		return true
	}
	return *src == [16]byte{15: 1}
}
