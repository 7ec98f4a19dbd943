// Package xdpnet is a UDP socket over AF_XDP for Go programs: a
// net.PacketConn whose datagrams skip the kernel's network stack, with
// batch calls and one lock-free reader per RX queue for the fast path.
//
// The lifecycle:
//
//	ListenUDP  binds a kernel UDP socket to the address (the port is reserved, or
//	           the call fails like net.ListenUDP), an AF_XDP socket to every RX
//	           queue, and an XDP program that takes UDP to that address
//	read       frames → checksums verified, drops counted by cause → datagrams
//	           (ReadFrom, ReadBatch; or Queue.ReadView in place, per queue)
//	write      next hop from the kernel's route and neighbour tables → Ethernet,
//	           IP and UDP headers, checksums → the TX ring of one queue
//	Close      detaches the program (traffic goes back to the kernel), ends blocked
//	           calls (net.ErrClosed) and frees everything once views are released
//
// A conn's AF_XDP sockets and XDP program are the only ones on its
// queues: a second conn on the same interface and queues fails with an
// error matching xsk.ErrBusy (bind it to other queues with Config.Queues).
//
// Only UDP to the conn's address and port is taken from the kernel: ARP,
// neighbour discovery, ICMP and every other port stay with it. If the
// process dies, the kernel detaches the XDP program itself.
//
// # What a conn takes, and what it leaves to the firewall
//
// A conn bypasses the kernel's stack, so it makes the kernel's receive
// checks itself, and takes only what a kernel UDP socket on its address
// would get:
//
//   - Addressed to this host: the XDP program redirects a frame only when
//     its destination MAC is the interface's own and its destination
//     address one of the interface's unicast addresses (kept current from
//     the kernel's address notifications), or the conn's address. Frames
//     to other hosts (a router's transit traffic, what a promiscuous NIC
//     sees), to other MACs, and broadcast and multicast datagrams stay
//     with the kernel, which delivers to the conn's kernel socket what it
//     would deliver to any socket (a broadcast, a group joined on it,
//     another address of the host: Linux's weak host model).
//   - Martian sources, dropped and counted (Drops.MartianSource), as the
//     kernel drops them: for IPv4 0.0.0.0, 127.0.0.0/8, multicast,
//     255.255.255.255 and this host's own addresses (ip_route_input and
//     fib_validate_source with accept_local off); for IPv6 ::1 and
//     multicast (ip6_rcv_core). Linux 6.18 delivers IPv6 datagrams from
//     ::, from IPv4-mapped addresses and from the host's own addresses,
//     and so does a conn (TestKernelReceiveChecks compares the two).
//   - Well formed: untagged Ethernet, IPv4 (not a fragment) or IPv6 (no
//     extension headers), UDP, lengths consistent, checksums right (see
//     Receiving).
//   - Loopback: a conn serves its interface's network. It neither sends
//     to loopback addresses (writes fail with an error matching
//     syscall.ENETUNREACH) nor reads datagrams from them (those that reach
//     its kernel socket are dropped and counted as MartianSource), so no
//     datagram, spoofed or not, can start an exchange with the host's own
//     sockets.
//
// What it does not check: reverse-path filtering (rp_filter), the
// firewall (netfilter: nftables and iptables rules on the port never see
// AF_XDP traffic), and socket filters (SO_ATTACH_FILTER on the kernel
// socket applies to the kernel's datagrams only). To keep a firewall rule,
// narrow what the conn takes with Config.Expr, a tcpdump expression
// compiled into the XDP program ("not src net 203.0.113.0/24", "src net
// 198.18.0.0/15"): the datagrams it turns away go through the kernel's
// stack, where the firewall decides, and the conn reads what the firewall
// lets through from its kernel socket.
//
// A frame longer than a UMEM frame holds (an MTU above about 3800 bytes)
// also goes through the kernel, and the conn reads the datagram from its
// kernel socket; writes of that size go out through it too. Nothing is
// lost to the MTU.
//
// Link-local IPv6 peers carry the conn's interface as their zone
// (fe80::1%eth1) when read, and writes to a link-local address without a
// zone go out of the conn's interface; one with another interface's zone
// fails with an error matching syscall.ENETUNREACH.
//
// # When someone detaches the program
//
// An administrator may detach the conn's XDP program (bpftool link
// detach, ip link set DEV xdp off, xdp-loader unload). The conn notices
// within about half a second and goes on through its kernel socket:
// UDPConn.Detached and Stats().Detached say so, the conn's own reads and
// Group deliver what the kernel delivers to the kernel socket, writes still
// leave through the AF_XDP sockets, and a Queue reader of an AF_XDP queue
// ends with an error matching xsk.ErrDetached (nothing reaches it again;
// the KernelQueue reader goes on).
//
// # Two ways to read
//
// The conn's own methods (ReadFrom, ReadFromUDPAddrPort, ReadBatch) are
// safe for concurrent use and copy each datagram into the caller's
// buffer; concurrent reads are serialised on one lock, as net.UDPConn's
// are. The fast path is Queues: one Queue per RX queue, each read by one
// goroutine with Queue.ReadView, which hands out views of the payloads in
// the UMEM frames without a copy or a lock and gives the frames back in
// one batch at the next call. RSS keeps a flow on one queue, so each
// reader sees its flows in order.
//
// Writes are safe from any goroutine. A conn's writes go out through the
// queue chosen by a hash of the destination, so one flow keeps its order;
// Queue.WriteTo and Queue.WriteBatch send through that queue's own ring,
// which for an echo server is the queue the request came in on.
//
// # Sending
//
// The next hop comes from the kernel: its route to the destination
// (through a gateway, if so) and its neighbour entry for the hop, kept
// current from netlink notifications. A write never waits for it: while
// a destination's hop is not known yet (a new peer, or just after the
// tables changed), its datagrams go out through the conn's kernel socket
// — the same addresses and ports on the wire — and the kernel queues them
// while it resolves the neighbour (ARP or neighbour discovery), as it
// does for its own. Once nobody answered (Config.ResolveTimeout), writes
// to that destination fail at once with an error naming the address and
// matching syscall.EHOSTUNREACH, for a second, before the next try; no
// route fails with syscall.ENETUNREACH. Destinations the kernel does not
// reach through the conn's interface (its own addresses, other
// interfaces) are sent through the kernel socket too. A datagram larger
// than the path MTU fails with an error matching syscall.EMSGSIZE, and
// nothing is sent: the package never fragments (DF is set, on the kernel
// socket too). A Message with SegSize is cut into datagrams of that size,
// like UDP_SEGMENT.
//
// # Receiving
//
// Each frame is checked: an untagged Ethernet frame to the interface's
// MAC, with IPv4 (not a fragment) or IPv6 (no extension headers), UDP to
// the conn's address and port, from a source that is not martian, lengths
// consistent, checksums right (Config.RXChecksum). What fails is never
// delivered, and is counted by cause in Stats, which keeps its counters,
// the kernel's drops included, after Close. Datagrams
// the XDP program leaves to the kernel (IPv4 fragments, which the kernel
// reassembles; queues without a socket) arrive on the kernel socket and
// are read from it too. With Config.GRO, ReadBatch hands consecutive
// datagrams of one flow over as one buffer with a segment size, like
// UDP_GRO.
//
// # Faults
//
// A link that goes down fails writes with an error matching
// syscall.ENETDOWN (and xsk.ErrLinkDown); reads just wait, and resume
// when it is up. A device that goes away ends reads and writes with an
// error matching xsk.ErrNoDevice within a quarter second.
//
// # veth and checksums
//
// A sender on the same host that writes through a veth with TX checksum
// offload on leaves UDP checksums unfinished (CHECKSUM_PARTIAL: the
// field holds only the pseudo-header sum). Such datagrams are dropped and
// counted as PartialChecksum; turn TX checksumming off on the sending
// veth (ethtool -K DEV tx off) or set Config.RXChecksum to
// RXChecksumAcceptPartial. This includes the datagrams a conn sends
// through its kernel socket while a next hop is resolved.
package xdpnet
