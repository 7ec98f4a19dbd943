// Package netstack runs gVisor's TCP/IP stack (gvisor.dev/gvisor's
// pkg/tcpip) over AF_XDP sockets: a stack.LinkEndpoint with one socket
// per RX queue of an interface, and around it what a good NIC does in
// hardware, done in software by xdpio's other packages:
//
//   - TSO: the stack hands over TCP segments of up to 64 KiB (host GSO) and
//     the endpoint cuts them into MSS-sized frames with offload's
//     segmenter, checksums and all, as enetc's software TSO does;
//   - RX checksum offload: each frame's checksums are verified once
//     (offload.VerifyRX) and the stack is told not to check them again
//     (CapabilityRXChecksumOffload), as ravb's CHECKSUM_COMPLETE does; a
//     frame with a wrong checksum is dropped and counted;
//   - GRO: the in-order TCP segments of a flow that one receive batch
//     holds are merged into one packet of up to 64 KiB (offload.GRO,
//     Linux's rules) before the stack sees them, so that its per-segment
//     work runs once for all of them, as the kernel's GRO does for its
//     stack; it takes only segments whose checksums the endpoint
//     verified, and is flushed at the end of every batch;
//   - TX checksum offload: the stack leaves the transport checksums to the
//     endpoint (CapabilityTXChecksumOffload), which fills them while it
//     builds the frame;
//   - coalescing: the receive loops hand frames over in batches by
//     rx-frames and rx-usecs (package coalesce), as icssg's hrtimer
//     coalescing does (the bigger a batch, the more GRO merges; a sender
//     with TSO already delivers its frames in bursts of up to 44, which
//     one wake-up takes without it);
//   - multi-queue: one socket and one receiving goroutine per RX queue,
//     RSS spreading the flows, as r8169's RSS does.
//
// # Addresses
//
// By default the stack answers for addresses of its own (Config.Addrs),
// which the kernel does not have on the interface: the XDP program takes
// the frames to them (IPv4 and IPv6, and the ARP requests and IPv6
// neighbour solicitations that ask for them) and leaves everything else
// to the kernel. The stack resolves its neighbours itself (ARP, neighbour
// discovery), with the interface's MAC address as its own. The kernel and
// the stack so share the interface without sharing an address, a port or
// a neighbour table.
//
// With Config.Share the stack shares the kernel's addresses instead, and
// takes only some of their traffic: what Share.Expr selects (its
// listeners' ports, "tcp dst port 5201"), and the replies to its own
// connections, whose local ports lie above the kernel's ephemeral range
// (Share.Ports). The kernel keeps answering ARP, neighbour discovery and
// ping, and keeps its sockets on every other port; the stack sends
// through the kernel's route and neighbour tables (package nexthop's view
// of them), and a packet to a next hop the kernel has not resolved yet
// waits for it, as in the kernel. This is how a program serves one port
// from the stack on a host's existing address: xdpio bench's TCP test.
//
// Neither way runs the kernel's firewall (netfilter) for the stack's
// traffic: the XDP program hands the frames over before it.
//
// # Lifecycle
//
// Open binds the sockets, attaches the program and builds the stack;
// Close detaches the program (the addresses' frames go back to the kernel,
// which drops them) and frees everything. If the process dies, the kernel
// detaches the program itself. A device that goes away ends the receive
// loops; Err then returns an error matching ErrNoDevice. Every frame a
// socket took is accounted for in Stats.
package netstack
