//go:build linux

package bench

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
)

// resolveTimeout bounds how long a data plane waits for the kernel to
// resolve a missing neighbour (ARP or neighbour discovery).
const resolveTimeout = 3 * time.Second

// nextHopMAC returns the MAC address that frames to dst carry on the
// interface ifindex, in the calling thread's namespace: the kernel's route
// to dst gives the next hop (dst itself on link, or the gateway), and the
// neighbour table its address. When the table has no usable entry the
// kernel is made to resolve it, as it does for its own traffic, by a
// datagram to the next hop's discard port; then the table is read again
// until the entry appears or timeout passes.
func nextHopMAC(ifindex int, dst netip.Addr, timeout time.Duration) (hop netip.Addr, mac net.HardwareAddr, err error) {
	dst = dst.Unmap()
	routes, err := netlink.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return dst, nil, fmt.Errorf("no route to %v: %v", dst, err)
	}
	r := routes[0]
	if r.LinkIndex != ifindex {
		name := fmt.Sprint(r.LinkIndex)
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		return dst, nil, fmt.Errorf("the route to %v leaves through %s, not the AF_XDP interface", dst, name)
	}
	hop = dst
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && !gw.IsUnspecified() {
		hop = gw.Unmap()
	}
	deadline := time.Now().Add(timeout)
	for try := 0; ; try++ {
		neigh, err := neighbours(ifindex)
		if m, ok := neigh[hop]; ok {
			return hop, m, nil
		}
		if try == 0 {
			if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(hop, 9))); err == nil {
				c.Write([]byte{0})
				c.Close()
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("the kernel got no answer to ARP or neighbour discovery within %v", timeout)
			}
			what := fmt.Sprint(dst)
			if hop != dst {
				what = fmt.Sprintf("%v (gateway to %v)", hop, dst)
			}
			return hop, nil, fmt.Errorf("no neighbour entry for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
