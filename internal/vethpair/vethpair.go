// Package vethpair builds throwaway hosts for programs that need a real
// kernel network and own it for a while: two fresh network namespaces
// joined by a veth pair with N queues, addressed on 198.18.0.0/24 and
// 2001:db8::/64, with static neighbour entries both ways and loopback up.
// The demo (`xdpio bench demo`), xskbench and the examples' -demo modes
// use it; tests use internal/netnstest, a testing.TB wrapper around it.
//
// Namespace names carry the process ID and start with Prefix, so parallel
// programs never collide, and namespaces left behind by a process that was
// killed are swept by the next NewPair. It needs root; on other systems
// than Linux NewPair returns ErrNotSupported.
package vethpair

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"

	"github.com/vishvananda/netns"
)

// ErrNotPrivileged is returned by NewPair when the process is not root.
var ErrNotPrivileged = errors.New("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN and CAP_BPF) to create namespaces and attach XDP")

// Prefix starts the name of every namespace this package creates.
const Prefix = "xdpiot-"

// Config describes a test network. The zero value is one queue, MTU 1500.
type Config struct {
	// Queues is the number of TX and RX queues of each veth end (default 1).
	Queues int
	// MTU of both veth ends (default 1500).
	MTU int
}

// Host is one end of the pair: a namespace holding one veth interface.
type Host struct {
	// NS is the namespace's name, usable with `ip netns exec`.
	NS string
	// Link is the veth interface name inside the namespace.
	Link string
	// Ifindex of Link inside the namespace.
	Ifindex int
	// MAC address of Link.
	MAC net.HardwareAddr
	// IPv4 and IPv6 addresses of Link (prefix lengths 24 and 64).
	IPv4, IPv6 netip.Addr

	handle netns.NsHandle
}

// Pair is two hosts joined by a veth pair.
type Pair struct {
	A, B   *Host
	Queues int
	MTU    int
}

// Command returns a command that runs name with args inside h's namespace
// (through `ip netns exec`).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Peer returns the other host of the pair.
func (p *Pair) Peer(h *Host) *Host {
	if h == p.A {
		return p.B
	}
	return p.A
}
