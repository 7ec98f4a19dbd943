// Package netstackplane runs the data connections of xdpio bench's TCP
// tests (iperf3's TCP test) on package netstack: gVisor's TCP/IP stack
// over AF_XDP sockets on one interface (a plane.TCPPlane).
//
// Each test opens its own stack and closes it when it ends. The stack
// shares the kernel's address on the interface (netstack.Config.Share):
// a server's takes the TCP to the control port but the control
// connection itself, which stays the kernel's, as do ARP, ping and every
// other port; a client's takes the replies to its own connections, whose
// ports lie above the kernel's ephemeral range. Closing the stack, or the
// process dying, detaches its XDP program: the kernel has the port back.
//
// Checksums a sender on the same host left to its TX offload (a veth
// peer with ethtool's tx on, the default) are accepted while the RX
// checksum offload is on (netstack.Config.AcceptPartialChecksum), as the
// kernel accepts them; with it off the stack checks every checksum
// itself and drops those, so such a peer needs `ethtool -K DEV tx off`.
package netstackplane
