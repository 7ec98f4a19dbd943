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
// Each frame is checked: an untagged Ethernet frame with IPv4 (not a
// fragment) or IPv6 (no extension headers), UDP to the conn's address and
// port, lengths consistent, checksums right (Config.RxChecksum). What
// fails is never delivered, and is counted by cause in Stats. Datagrams
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
// veth (ethtool -K DEV tx off) or set Config.RxChecksum to
// RxChecksumAcceptPartial. This includes the datagrams a conn sends
// through its kernel socket while a next hop is resolved.
package xdpnet
