package xdpnet

import "net/netip"

// Message is one UDP datagram of a batch (ReadBatch, WriteBatch, and a
// Queue's): like x/net's ipv4.Message, with one buffer and the peer as a
// netip.AddrPort.
type Message struct {
	// Buf holds the payload. On a copying read the datagram is copied
	// into it (and cut at its length: Truncated); on an in-place read
	// (Queue.ReadView) it is set to a view of the received frame. On
	// write, Buf[:N] is sent.
	Buf []byte
	// N is the payload length: read, or to write.
	N int
	// Addr is the peer: the source on read, the destination on write
	// (left zero on a connected conn).
	Addr netip.AddrPort
	// LocalPort is the conn's port the datagram was sent to (read), or
	// the source port to send from (write; 0: the conn's first port).
	// It matters only for a conn with several ports (Config.Ports).
	LocalPort uint16
	// SegSize, on write, cuts Buf[:N] into datagrams of SegSize bytes
	// (the last may be shorter), like UDP_SEGMENT: one call, up to 128
	// datagrams to the same peer. On read with Config.GRO, a SegSize
	// above 0 says Buf[:N] holds consecutive datagrams of one flow,
	// SegSize bytes each but the last, like UDP_GRO.
	SegSize int
	// ECN is the IP header's Explicit Congestion Notification bits (RFC
	// 3168: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE): what the datagram
	// carried (read), or what to mark it with (write; 0 leaves
	// Config.TOS's own).
	ECN uint8
	// Truncated is set on read when the datagram was longer than Buf
	// (MSG_TRUNC): the rest is lost.
	Truncated bool
}
