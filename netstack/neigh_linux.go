//go:build linux

package netstack

import (
	"context"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/xdpio/xdpio/internal/nexthop"
)

// Bounds on the packets a shared stack holds while the kernel resolves
// their next hops, as the kernel's own neighbour queue bounds them
// (unres_qlen): per destination, and destinations at once.
const (
	heldPerDst = 16
	heldDsts   = 64
)

// noMAC marks a frame whose next hop is not resolved yet.
const noMAC = tcpip.LinkAddress("\x00\x00\x00\x00\x00\x00")

// neighbours gives a stack that shares the kernel's addresses the MAC
// addresses of its next hops, from the kernel's route and neighbour
// tables, and holds the packets to a next hop the kernel has not resolved
// yet until it has (or fails: they are dropped and counted).
type neighbours struct {
	e    *Endpoint
	hops *nexthop.Resolver
	mu   sync.Mutex
	held map[netip.Addr][]*stack.PacketBuffer
}

func newNeighbours(e *Endpoint, ifindex int) (*neighbours, error) {
	hops, err := nexthop.New(ifindex, nexthop.Options{})
	if err != nil {
		return nil, err
	}
	return &neighbours{e: e, hops: hops, held: map[netip.Addr][]*stack.PacketBuffer{}}, nil
}

// mac returns the MAC address the kernel's tables give the next hop to
// dst, or noMAC until the kernel has resolved it.
func (n *neighbours) mac(dst tcpip.Address) tcpip.LinkAddress {
	a, _ := netip.AddrFromSlice(dst.AsSlice())
	if h, ok := n.hops.Lookup(a); ok {
		return tcpip.LinkAddress(h.MAC)
	}
	return noMAC
}

// hold keeps pkt, whose link header has no destination yet, until the
// kernel resolves its next hop; then it goes out through send. It reports
// false, and keeps nothing, when too many packets wait already.
func (n *neighbours) hold(pkt *stack.PacketBuffer, send func(*stack.PacketBuffer)) bool {
	a, _ := netip.AddrFromSlice(pkt.EgressRoute.RemoteAddress.AsSlice())
	n.mu.Lock()
	defer n.mu.Unlock()
	list, waiting := n.held[a]
	if len(list) >= heldPerDst || !waiting && len(n.held) >= heldDsts {
		return false
	}
	n.held[a] = append(list, pkt.IncRef())
	if !waiting {
		go n.resolve(a, send)
	}
	return true
}

// resolve waits for the kernel to resolve a's next hop, then sends what
// waits for it, or drops it.
func (n *neighbours) resolve(a netip.Addr, send func(*stack.PacketBuffer)) {
	ctx, cancel := context.WithTimeout(n.e.ctx, nexthop.DefaultResolveTimeout)
	h, err := n.hops.Resolve(ctx, a)
	cancel()
	n.mu.Lock()
	list := n.held[a]
	delete(n.held, a)
	n.mu.Unlock()
	for _, pkt := range list {
		if err == nil {
			copy(pkt.LinkHeader().Slice()[:header.EthernetAddressSize], h.MAC)
			send(pkt)
		} else {
			n.e.ctr.txPackets.Add(1)
			n.e.ctr.txNoNeighbour.Add(1)
		}
		pkt.DecRef()
	}
}

// resolveSYN has the kernel resolve the sender of a connection request
// (a TCP SYN from src) it has no neighbour entry for, while the stack
// builds its answer.
func (n *neighbours) resolveSYN(src netip.Addr) {
	if _, ok := n.hops.Lookup(src); !ok {
		n.hops.Start(src)
	}
}

// close drops what still waits and closes the resolver.
func (n *neighbours) close() {
	n.hops.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, list := range n.held {
		for _, pkt := range list {
			n.e.ctr.txPackets.Add(1)
			n.e.ctr.txNoNeighbour.Add(1)
			pkt.DecRef()
		}
		delete(n.held, a)
	}
}
