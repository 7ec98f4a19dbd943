package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/gvisorxdpplane"
	"github.com/xdpio/xdpio/bench/plane"
)

// gvisorXDP is the gvisor-xdp backend: TCP tests on gVisor's stack over
// gVisor's own AF_XDP link endpoint (the peer netstack is measured
// against), no UDP. As a data plane it refuses UDP tests; Check checks
// the interface for the TCP plane.
type gvisorXDP struct{ tcp *gvisorxdpplane.Plane }

func (g gvisorXDP) udpErr() error {
	return fmt.Errorf("the gvisor-xdp backend runs TCP tests only (gVisor's AF_XDP endpoint under gVisor's TCP; UDP tests run on the xsk, socket or asavie backend): %w", bench.ErrNotSupported)
}

func (g gvisorXDP) Listen(netip.AddrPort) (plane.PacketConn, error) { return nil, g.udpErr() }
func (g gvisorXDP) Dial(netip.AddrPort) (plane.PacketConn, error)   { return nil, g.udpErr() }

// Check checks that the interface can carry gVisor's endpoint: one RX
// queue, an MTU of at least 1500.
func (g gvisorXDP) Check() error { return g.tcp.Check() }

// gvisorXDPFlags checks the stack flags given with the gvisor-xdp backend:
// --rx-csum is its endpoint's RX checksum offload, --qdisc the queueing
// discipline in front of it, and --queues may name its one queue, 0; the
// others are about xdpio's sockets and netstack.
func gvisorXDPFlags(fs *pflag.FlagSet, ss stackSettings, tp *gvisorxdpplane.Plane) error {
	if fs.Changed("queues") && (len(ss.queues) != 1 || ss.queues[0] != 0) {
		return usagef("--queues %s: gVisor's AF_XDP endpoint has one queue, queue 0 (the interface must have no other)", fs.Lookup("queues").Value)
	}
	if given := changed(fs, "rx-usecs", "rx-frames", "adaptive", "tx-usecs", "tx-frames", "tso", "one-reader"); len(given) > 0 {
		return usagef("%s: about xdpio's AF_XDP queues and netstack, not the gvisor-xdp backend (gVisor's AF_XDP endpoint as it is: no GSO, no coalescing; only --rx-csum applies)", strings.Join(given, ", "))
	}
	tp.NoRXChecksumOffload = ss.noCsum
	switch q := fs.Lookup("qdisc").Value.String(); q {
	case "fifo":
	case "none":
		tp.NoQDisc = true
	default:
		return usagef("--qdisc %q: want fifo or none", q)
	}
	return nil
}

// qdiscFlag refuses --qdisc without the gvisor-xdp backend.
func qdiscFlag(fs *pflag.FlagSet, gx bool) error {
	if fs.Changed("qdisc") && !gx {
		return usagef("--qdisc: about the gvisor-xdp backend's stack (--backend gvisor-xdp -i IFACE)")
	}
	return nil
}
