// Package bench is xdpio's iperf-like benchmark engine. It speaks iperf3's
// protocol (3.12, Debian bookworm's), so either end can be a real iperf3.
//
// The protocol itself (states, messages, the UDP header and the
// receiver's statistics) is package iperf3's; this package runs it.
//
// Server answers iperf3 clients (and Client); Client drives an iperf3
// server (or Server). A test is iperf3's TCP test (its default) or its
// UDP test (Client.UDP, iperf3's -u).
//
// # TCP
//
// A TCP test's data connections, one per stream, each starting with the
// test's cookie, run on the kernel's TCP, as iperf3's (a Server's come to
// its control port, and Serve's listener takes them), or on the stack a
// plane.TCPPlane opens for the test: netstackplane's, gVisor's TCP/IP
// stack over AF_XDP (package netstack) sharing the kernel's address, which
// takes the data connections and leaves the control connection to the
// kernel. The report has iperf3's TCP figures: retransmissions, the
// congestion window and RTT of a sender's intervals (TCP_INFO, or
// netstack.Stack.TCPConnInfo), both ends' congestion control, and which
// stack ran the test with which settings (ReportStart.TCPStack) and what
// it counted (ReportEnd.TCPStackCounters).
//
// The totals agree to the byte with the other end's: a receiving server
// reads, after TEST_END, until it has what the client's results say was
// sent on each stream; a sending client stops writing, waits until the
// server's stack has acknowledged its FIN (everything sent, then) and a
// moment for the server to read it, then sends TEST_END; a receiving
// client reads each stream up to the server's FIN, which iperf3's server
// sends at TEST_END, and a sending Server too, which then waits until
// the client has acknowledged everything before EXCHANGE_RESULTS. Only a
// real iperf3 client receiving (-R) counts less: it stops counting at
// TEST_END, as against its own server.
//
// # UDP
//
// A UDP test's datagrams go through a plane.DataPlane:
//
//   - kernelplane: kernel UDP sockets, recvmmsg/sendmmsg batches (the
//     default).
//   - xskplane: AF_XDP through package xdpnet (a UDP socket over package
//     xsk), one socket per RX queue behind an XDP filter that takes only
//     the test's UDP address and port (the control connection stays with
//     the kernel). A server reads each queue in its own goroutine, in
//     place (plane.MultiQueueConn, plane.QueueReader), optionally batched
//     by package coalesce, and the kernel socket xdpnet holds on the
//     address too; xdpnet checks the frames it receives and builds those
//     it sends in UMEM, to the next hop the kernel's route and neighbour
//     tables give (resolved when missing). A client's streams share one
//     conn on a block of ports.
//   - asavieplane: the same over github.com/asavie/xdp v0.3.3, the Go
//     peer, for side-by-side runs, with xdpnet's frame codec.
//
// A plane.Placer (from the server NIC's RSS key and table, package rss)
// gives each client stream a source port that lands it on a chosen RX
// queue.
// Each end measures CPU (package cpustat) like iperf3 (process time over
// wall time, both ends in the report) and like mpstat -P ALL (per core,
// with the data threads' own time: HostCPU), and an AF_XDP server reports what each RX
// queue took (ReportEnd.RXQueues).
//
// The receiving end computes loss, reordering and jitter as iperf3 does
// (iperf3.RecvStats), and both ends produce a Report close to iperf3's -J output
// with per-interval figures, printable as text with Report.WriteText. A
// receiver's Packets keeps iperf3's meaning, the datagrams its sequence
// numbers say were sent; ReceivedPackets, and the Packets and Pkts/s
// columns of a receiver's text lines, count those that arrived.
//
// Not supported: SCTP, bidirectional tests, omitted seconds (-O), and at
// the client byte or block counts instead of a time.
package bench
