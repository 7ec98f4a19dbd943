package nexthop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The netlink groups the Resolver follows, in one ordered stream:
// neighbours, and everything a route lookup depends on (routes, policy
// rules, nexthop objects, addresses, links).
var groups = []uint{
	unix.RTNLGRP_NEIGH,
	unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE,
	unix.RTNLGRP_IPV4_RULE, unix.RTNLGRP_IPV6_RULE,
	unix.RTNLGRP_NEXTHOP,
	unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV6_IFADDR,
	unix.RTNLGRP_LINK,
}

// subscriptionBuffer is the receive buffer asked for the subscription
// socket, so that a burst of notifications does not overrun it (which the
// Resolver survives, but at the cost of its whole cache).
const subscriptionBuffer = 4 << 20

// NUD states a frame can be sent to (the kernel's NUD_VALID).
const nudValid = netlink.NUD_PERMANENT | netlink.NUD_NOARP | netlink.NUD_REACHABLE |
	netlink.NUD_PROBE | netlink.NUD_STALE | netlink.NUD_DELAY

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an attribute type.
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// DEVCONF_MTU6, the index of the IPv6 MTU in IFLA_INET6_CONF.
const devconfMTU6 = 2

// kernelNeigh is a neighbour entry as the kernel reports it.
type kernelNeigh struct {
	addr  netip.Addr
	state uint16
	flags uint32 // ndm_flags | NDA_FLAGS_EXT<<8
	mac   net.HardwareAddr
}

// usable tells whether frames can be sent to n's MAC.
func (n kernelNeigh) usable() bool {
	return n.state&nudValid != 0 && len(n.mac) == 6
}

// managedElsewhere tells whether an entry in this state is kept by someone
// else than the kernel's own resolution: an administrator (PERMANENT,
// NOARP) or a control plane (externally learned or validated, managed).
// An NTF_USE request would change such an entry (it turns PERMANENT into a
// dynamic entry and clears the external flags), so the Resolver never
// sends one for it.
func managedElsewhere(state uint16, flags uint32) bool {
	return state&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 ||
		flags&(unix.NTF_EXT_LEARNED|0xffffff00) != 0
}

// parseNeigh decodes the payload of an RTM_NEWNEIGH or RTM_DELNEIGH.
func parseNeigh(b []byte) (ifindex int, n kernelNeigh, ok bool) {
	const hdr = 12 // struct ndmsg
	if len(b) < hdr {
		return 0, n, false
	}
	family := b[0]
	ifindex = int(int32(binary.NativeEndian.Uint32(b[4:8])))
	n.state = binary.NativeEndian.Uint16(b[8:10])
	n.flags = uint32(b[10])
	if family != unix.AF_INET && family != unix.AF_INET6 || n.flags&unix.NTF_PROXY != 0 {
		return 0, n, false
	}
	attrs, err := nl.ParseRouteAttr(b[hdr:])
	if err != nil {
		return 0, n, false
	}
	for _, a := range attrs {
		switch a.Attr.Type & nlaTypeMask {
		case unix.NDA_DST:
			n.addr, _ = netip.AddrFromSlice(a.Value)
		case unix.NDA_LLADDR:
			n.mac = net.HardwareAddr(a.Value)
		case netlink.NDA_FLAGS_EXT:
			if len(a.Value) >= 4 {
				n.flags |= binary.NativeEndian.Uint32(a.Value) << 8
			}
		}
	}
	if !n.addr.IsValid() || (family == unix.AF_INET) != n.addr.Is4() {
		return 0, n, false
	}
	return ifindex, n, true
}

// linkInfo is what the Resolver needs of an RTM_NEWLINK.
type linkInfo struct {
	index int
	typ   uint16 // ARPHRD_*
	flags uint32 // IFF_*
	name  string
	mtu   int
	mtu6  int // IPv6 MTU, 0 if not reported
	addr  net.HardwareAddr
	brd   net.HardwareAddr
}

// parseLink decodes the payload of an RTM_NEWLINK or RTM_DELLINK.
func parseLink(b []byte) (linkInfo, bool) {
	var li linkInfo
	if len(b) < unix.SizeofIfInfomsg {
		return li, false
	}
	li.typ = binary.NativeEndian.Uint16(b[2:4])
	li.index = int(int32(binary.NativeEndian.Uint32(b[4:8])))
	li.flags = binary.NativeEndian.Uint32(b[8:12])
	attrs, err := nl.ParseRouteAttr(b[unix.SizeofIfInfomsg:])
	if err != nil {
		return li, false
	}
	for _, a := range attrs {
		switch a.Attr.Type & nlaTypeMask {
		case unix.IFLA_IFNAME:
			li.name = unix.ByteSliceToString(a.Value)
		case unix.IFLA_MTU:
			if len(a.Value) >= 4 {
				li.mtu = int(binary.NativeEndian.Uint32(a.Value))
			}
		case unix.IFLA_ADDRESS:
			li.addr = net.HardwareAddr(a.Value)
		case unix.IFLA_BROADCAST:
			li.brd = net.HardwareAddr(a.Value)
		case unix.IFLA_AF_SPEC:
			li.mtu6 = parseMTU6(a.Value)
		}
	}
	return li, true
}

// parseMTU6 finds DEVCONF_MTU6 in IFLA_AF_SPEC / AF_INET6 / IFLA_INET6_CONF.
func parseMTU6(spec []byte) int {
	afs, err := nl.ParseRouteAttr(spec)
	if err != nil {
		return 0
	}
	for _, af := range afs {
		if af.Attr.Type&nlaTypeMask != unix.AF_INET6 {
			continue
		}
		attrs, err := nl.ParseRouteAttr(af.Value)
		if err != nil {
			return 0
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask == unix.IFLA_INET6_CONF && len(a.Value) >= 4*(devconfMTU6+1) {
				return int(int32(binary.NativeEndian.Uint32(a.Value[4*devconfMTU6:])))
			}
		}
	}
	return 0
}

// execute sends one request on the Resolver's own request socket (in its
// namespace) and returns the payloads of the answers of type resType.
func (r *Resolver) execute(typ uint16, flags int, resType uint16, data ...nl.NetlinkRequestData) ([][]byte, error) {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   unix.SizeofNlMsghdr,
			Type:  typ,
			Flags: unix.NLM_F_REQUEST | uint16(flags),
		},
		Sockets: r.raw,
	}
	for _, d := range data {
		req.AddData(d)
	}
	return req.Execute(unix.NETLINK_ROUTE, resType)
}

// getLink asks the kernel for the link ifindex.
func (r *Resolver) getLink(ifindex int) (linkInfo, error) {
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	msgs, err := r.execute(unix.RTM_GETLINK, 0, unix.RTM_NEWLINK, msg)
	if err != nil {
		return linkInfo{}, err
	}
	for _, m := range msgs {
		if li, ok := parseLink(m); ok && li.index == ifindex {
			return li, nil
		}
	}
	return linkInfo{}, unix.ENODEV
}

// getNeigh asks the kernel for its neighbour entry of a on the Resolver's
// interface (RTM_GETNEIGH for one address, Linux 4.20 and later). found is
// false when there is none.
func (r *Resolver) getNeigh(a netip.Addr) (n kernelNeigh, found bool, err error) {
	r.stats.gets.Add(1)
	msgs, err := r.execute(unix.RTM_GETNEIGH, 0, unix.RTM_NEWNEIGH,
		&netlink.Ndmsg{Family: family(a), Index: uint32(r.ifindex)},
		nl.NewRtAttr(unix.NDA_DST, a.AsSlice()))
	if errors.Is(err, unix.ENOENT) {
		return n, false, nil
	}
	if err != nil {
		return n, false, err
	}
	for _, m := range msgs {
		if idx, kn, ok := parseNeigh(m); ok && idx == r.ifindex && kn.addr == a {
			return kn, true, nil
		}
	}
	return n, false, nil
}

// trigger makes the kernel resolve a as it does before sending a packet of
// its own: RTM_NEWNEIGH with NTF_USE creates the entry if there is none
// and runs neigh_event_send on it, which sends ARP requests or neighbour
// solicitations (or, for a STALE entry, starts reconfirming it). No
// datagram is sent. Never call it for an entry managedElsewhere.
func (r *Resolver) trigger(a netip.Addr) error {
	r.stats.triggers.Add(1)
	return r.h.NeighSet(&netlink.Neigh{
		LinkIndex: r.ifindex,
		Family:    int(family(a)),
		State:     netlink.NUD_NONE, // not PERMANENT: a new entry stays subject to garbage collection
		Flags:     netlink.NTF_USE,
		IP:        a.AsSlice(),
	})
}

// startDump asks, on the subscription socket, for every neighbour entry;
// the answers arrive in the same stream as the notifications. mu held.
func (r *Resolver) startDump() error {
	req := nl.NewNetlinkRequest(unix.RTM_GETNEIGH, unix.NLM_F_DUMP)
	req.AddData(&netlink.Ndmsg{Family: unix.AF_UNSPEC})
	r.dumping = true
	if err := r.sub.Send(req); err != nil {
		r.dumping = false
		return fmt.Errorf("nexthop: ask for the neighbour table: %w", err)
	}
	return nil
}

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}
