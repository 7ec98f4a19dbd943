// Package nexthop answers, for a user-space UDP stack that builds its own
// Ethernet frames and sends them out of one interface with AF_XDP, the
// questions the kernel answers for its own sockets: which neighbour a
// datagram to a destination goes to, that neighbour's MAC address, the
// source address the kernel would pick and the path MTU.
//
// The answers come from the kernel's own tables, so that user space and
// the kernel agree: the route (RTM_GETROUTE, as `ip route get` shows it)
// gives the next hop, the preferred source and the route MTU; the
// neighbour table (ARP for IPv4, neighbour discovery for IPv6) gives the
// next hop's MAC. When the neighbour table has no usable entry, the
// Resolver asks the kernel to resolve it, the way the kernel does for a
// packet of its own, with an RTM_NEWNEIGH request carrying NTF_USE (`ip
// neigh replace ADDR dev DEV use` in iproute2 terms): no datagram is sent.
//
// Answers are cached, and the cache follows the kernel through one netlink
// subscription in the namespace the Resolver was created in: a neighbour
// whose MAC changes is updated in place, a neighbour that is deleted or
// fails is dropped, and any change of routes, rules, nexthop objects,
// addresses or links drops every cached answer, which the next Resolve
// asks the kernel for again.
//
// Lookup is the hot path, called per datagram or per batch: it reads an
// immutable snapshot, makes no system call and does not allocate. Resolve
// is the slow path, called when Lookup misses:
//
//	hop, ok := r.Lookup(dst)
//	if !ok {
//		if hop, err = r.Resolve(ctx, dst); err != nil {
//			return err // no route, other interface, or no answer
//		}
//	}
//	// build the frame: hop.MAC, hop.Src, at most hop.MTU bytes of IP
//
// The kernel only reconfirms a neighbour's reachability when it sends
// through it itself, which it does not for frames sent with AF_XDP. So the
// Resolver does it: every few seconds, neighbours whose hops were used and
// whose entries went STALE get the same NTF_USE nudge, and the kernel
// probes them as it would for its own traffic (DELAY, PROBE, then
// REACHABLE or FAILED). Cached hops nobody looked up for Options.IdleTimeout
// are dropped.
//
// Limits: the kernel announces no change of a learned path MTU (an ICMP
// "fragmentation needed" or "packet too big" creates a route exception
// without notification), nor of an IPv6 MTU set by sysctl or by a router
// advertisement; a cached hop keeps its MTU until the next flush, while a
// new resolution sees the current one. A notification overrun (ENOBUFS)
// drops the whole cache and re-reads the neighbour table. Linux 4.20 or
// later is needed for single-entry RTM_GETNEIGH; on older kernels the
// Resolver relies on its mirror of the neighbour table alone.
//
// Only Linux is supported; elsewhere New returns an error wrapping
// errors.ErrUnsupported.
package nexthop
