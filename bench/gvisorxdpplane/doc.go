// Package gvisorxdpplane runs the data connections of xdpio bench's TCP
// tests (iperf3's TCP test) on gVisor's TCP/IP stack over gVisor's own
// AF_XDP link endpoint, gvisor.dev/gvisor/pkg/tcpip/link/xdp (a
// plane.TCPPlane): the peer that package netstack is measured against
// (`xdpio bench server --backend gvisor-xdp`).
//
// The endpoint is used as it is, with the options gVisor's runsc gives it
// by default (RX checksum offload on, TX checksum offload off, the FIFO
// queueing discipline in front of it); only the stack around it is built
// here, with the protocols and TCP options of netstack.Open (SACK, CUBIC,
// receive buffer auto-tuning), so that a comparison with package netstack
// is one of the link endpoints. What the endpoint does, as of the gVisor
// version in go.mod (read from its source, and seen on Linux 6.18 over
// veth, which has copy mode only):
//
//   - one AF_XDP socket, bound to RX queue 0 (it names no other): an
//     interface with more RX queues is refused (see "Queues" below);
//   - a UMEM of 2 MiB: 1024 frames of 2048 bytes without headroom, and
//     512 descriptors in each of the fill, RX, TX and completion rings;
//     an MTU of 1500, a constant, which the interface's must not be below;
//   - no GSO and no GRO (Options.GRO is not read): the stack cuts its
//     segments to the MSS and hands over one packet per frame;
//   - checksums: with RX checksum offload the stack checks none at all
//     (also not those a sender on this host left to its TX offload, which
//     a veth peer does by default); without, it checks all and drops such
//     partial ones. TX checksum offload stays off: the endpoint fills no
//     checksum, so the stack must;
//   - receiving: one goroutine blocks in ppoll on the socket and an
//     eventfd, then, until the RX ring is empty, copies each frame out of
//     the UMEM into a new buffer under the UMEM's lock, returns the
//     frames to the fill ring, and hands the packets to the stack one by
//     one on that goroutine;
//   - sending: each write call takes the UMEM's lock, reclaims the frames
//     the completion ring returned, reserves a TX descriptor and a frame
//     for every packet of the call or else drops them all (counted here
//     as TXDropped), copies the packets in and kicks the kernel with
//     sendmsg whenever the TX ring's need-wakeup flag is set. The socket
//     is bound without XDP_USE_NEED_WAKEUP, yet the kernel sets that flag
//     at bind and in copy mode never clears it: every write call makes a
//     sendmsg. Copy mode sends at most 32 frames a sendmsg (the kernel's
//     default TX budget) and says EAGAIN, which the endpoint ignores: the
//     rest wait on the ring until the next write call's kick. Without a
//     queueing discipline the stack writes one packet a call; behind
//     gVisor's FIFO (Plane.NoQDisc false, runsc's --qdisc fifo) one
//     goroutine per CPU writes batches of up to 47.
//
// # Addresses
//
// The stack shares the kernel's address on the interface, as
// netstackplane's does: xdpio's XDP program (gVisor attaches none) hands
// queue 0's socket a server's TCP to the test port but the control
// connection's, or a client's replies to its own ports, which lie above
// the kernel's ephemeral range; the kernel keeps ARP, neighbour
// discovery, ping and every other port. gVisor's endpoint requires link
// resolution, which the stack would do with its own ARP and neighbour
// discovery, whose answers would go to the kernel: instead the stack gets
// a static neighbour entry for the test's peer, the next hop's MAC
// address as the kernel resolved it when the test began (package
// nexthop), and a route to everything through the interface. Other
// destinations cannot be reached from the stack.
//
// # Queues
//
// The socket is bound to queue 0 and the program redirects queue 0's
// frames only. On an interface with more RX queues, the flows RSS puts
// on other queues would reach the kernel instead of the stack, and the
// kernel does not let an XDP program redirect a frame from one queue into
// a socket bound to another (the redirect fails and the frame is
// dropped): such an interface is refused, with an error that says how
// to give it one queue (ethtool -L, or xdpio channels set). On a veth the
// peer must send on one TX queue too: with this end at one RX queue and
// the peer at two TX queues, a TCP test over the stack lost most of its
// segments on Linux 6.18.
//
// # Closing
//
// gVisor's endpoint cannot be closed: its Close does nothing, removing
// its NIC from the stack deadlocks (Attach(nil) takes a read lock under
// its own write lock), a stopped receive loop spins instead of ending,
// and nothing unmaps the UMEM or the rings, whose mappings keep the
// socket alive, and queue 0 busy, after its descriptor is closed. Closing
// a test's stack here therefore closes the gVisor stack, detaches the
// program, ends the receiving goroutine from outside (the socket's
// descriptor is replaced by a pipe that polls as hung up, and the
// endpoint's eventfd is signalled), and unmaps the UMEM and the rings
// (reached through the endpoint's unexported fields, checked by type),
// which frees the socket: the next test binds queue 0 again. Nor does
// New unmap what it mapped when its bind fails (queue 0 taken), so the
// socket is bound here, right after New, with gVisor's own Bind and the
// flags New would use, where a failure can be cleaned up. If the process
// dies, the kernel frees all of it.
package gvisorxdpplane
