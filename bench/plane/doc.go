// Package plane is what xdpio bench asks of a data plane, the part that
// carries a test's UDP datagrams: DataPlane opens endpoints (PacketConn)
// that read and write batches of Messages; an endpoint with a socket per
// RX queue (MultiQueueConn) lets the engine read each queue in place in
// its own goroutine (QueueReader) and reports what each queue took
// (QueueCount). A Placer (package place) gives each stream a client dials a source port
// that the server NIC's RSS puts on a chosen RX queue.
//
// A TCP test's data connections (TCPConn, with their TCP_INFO figures)
// run on the kernel's TCP, or on the stack a TCPPlane opens for the test
// (TCPListener at a server, TCPDialer at a client), which describes itself
// and its counters for the report (TCPStack).
//
// The data planes themselves are packages of their own: kernelplane
// (kernel sockets, and kernel TCP connections as TCPConns), xskplane
// (AF_XDP through package xdpnet) and asavieplane (AF_XDP through
// github.com/asavie/xdp); netstackplane is the TCP plane of package
// netstack.
package plane
