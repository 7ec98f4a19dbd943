package xdpnet

import (
	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// Drops counts received frames that were not delivered, by cause. Every
// frame a queue's socket took is either delivered or counted here.
type Drops struct {
	// NotIP: neither IPv4 nor IPv6, or VLAN-tagged.
	NotIP uint64 `json:"not_ip"`
	// Malformed: a truncated header, or inconsistent lengths.
	Malformed uint64 `json:"malformed"`
	// Fragment: an IPv4 fragment (they are left to the kernel, which
	// reassembles them; one here came past the filter).
	Fragment uint64 `json:"fragment"`
	// NotUDP: another transport protocol, or IPv6 extension headers.
	NotUDP uint64 `json:"not_udp"`
	// NotForUs: to another address or port.
	NotForUs uint64 `json:"not_for_us"`
	// BadChecksum: a wrong IPv4 header or UDP checksum.
	BadChecksum uint64 `json:"bad_checksum"`
	// PartialChecksum: the UDP checksum a sender on this host left for an
	// offload that never ran (veth with TX checksumming on): turn TX
	// checksumming off on the sending veth (ethtool -K DEV tx off), or
	// accept them with Config.RXChecksum = RXChecksumAcceptPartial.
	PartialChecksum uint64 `json:"partial_checksum"`
	// ZeroChecksum6: UDP over IPv6 without a checksum.
	ZeroChecksum6 uint64 `json:"zero_checksum6"`
	// OtherPeer: a connected conn got a datagram from another peer.
	OtherPeer uint64 `json:"other_peer"`
	// MartianSource: a source address no datagram from the conn's
	// network may carry, which the kernel drops too (package
	// documentation, "What a conn takes"): loopback, unspecified,
	// multicast or broadcast, or one of this host's own IPv4 addresses
	// (spoofed). On the kernel socket (KernelQueue): a loopback source,
	// which the conn does not answer.
	MartianSource uint64 `json:"martian_source"`
}

// Total is the sum of the drops.
func (d Drops) Total() uint64 {
	return d.NotIP + d.Malformed + d.Fragment + d.NotUDP + d.NotForUs + d.BadChecksum + d.PartialChecksum + d.ZeroChecksum6 + d.OtherPeer + d.MartianSource
}

// QueueStats are one queue's counters.
type QueueStats struct {
	// Queue is the RX queue, or KernelQueue for the kernel's socket.
	Queue int `json:"queue"`
	// Datagrams and Bytes (payload) were delivered to the application.
	Datagrams uint64 `json:"datagrams"`
	Bytes     uint64 `json:"bytes"`
	// Truncated datagrams did not fit the reader's buffer.
	Truncated uint64 `json:"truncated"`
	// Drops are the frames not delivered, by cause.
	Drops Drops `json:"drops"`
	// Sent and SentBytes (payload) count datagrams handed to the kernel
	// for sending: put on the TX ring (Socket.TXFrames counts those the
	// kernel completed), or written to the kernel's socket.
	Sent      uint64 `json:"sent"`
	SentBytes uint64 `json:"sent_bytes"`
	// Socket is the AF_XDP socket's own counters: what the kernel could
	// not deliver to it (RXDropped, RXRingFull) and where its frames are
	// (zero for KernelQueue).
	Socket xsk.Stats `json:"socket"`
	// Coalesce is the queue reader's software coalescing (Config.Coalesce):
	// batches, frames per batch, wake-ups, the delay frames waited. Nil
	// without coalescing; a Group's is Group.CoalesceStats.
	Coalesce *coalesce.RXStats `json:"coalesce,omitempty"`
}

// Stats are a conn's counters, per queue (the kernel's socket last).
type Stats struct {
	Queues []QueueStats `json:"queues"`
	// Detached is set once someone else detached the conn's XDP program
	// (UDPConn.Detached): datagrams reach the conn through its kernel
	// socket only.
	Detached bool `json:"detached"`
}

// Total adds up the queues.
func (s Stats) Total() QueueStats {
	t := QueueStats{Queue: -2}
	for _, q := range s.Queues {
		t.Datagrams += q.Datagrams
		t.Bytes += q.Bytes
		t.Truncated += q.Truncated
		t.Sent += q.Sent
		t.SentBytes += q.SentBytes
		d := &t.Drops
		d.NotIP += q.Drops.NotIP
		d.Malformed += q.Drops.Malformed
		d.Fragment += q.Drops.Fragment
		d.NotUDP += q.Drops.NotUDP
		d.NotForUs += q.Drops.NotForUs
		d.BadChecksum += q.Drops.BadChecksum
		d.PartialChecksum += q.Drops.PartialChecksum
		d.ZeroChecksum6 += q.Drops.ZeroChecksum6
		d.OtherPeer += q.Drops.OtherPeer
		d.MartianSource += q.Drops.MartianSource
		t.Socket.RXDropped += q.Socket.RXDropped
		t.Socket.RXRingFull += q.Socket.RXRingFull
		t.Socket.RXFrames += q.Socket.RXFrames
		t.Socket.TXFrames += q.Socket.TXFrames
	}
	return t
}

// KernelQueue is the Queue ID of the reader of the kernel's UDP socket
// that every conn holds on its address: datagrams that reach the kernel
// instead of an AF_XDP socket (IPv4 fragments, which the kernel
// reassembles; datagrams on queues without a socket; those that came
// before the filter was attached) are read from it.
const KernelQueue = -1

// dropsOf turns per-cause counts into Drops.
func dropsOf(c *[numCauses]uint64) Drops {
	return Drops{
		NotIP: c[causeNotIP], Malformed: c[causeMalformed], Fragment: c[causeFragment],
		NotUDP: c[causeNotUDP], NotForUs: c[causeNotForUs], BadChecksum: c[causeBadChecksum],
		PartialChecksum: c[causePartialChecksum], ZeroChecksum6: c[causeZeroChecksum6], OtherPeer: c[causeOtherPeer],
		MartianSource: c[causeMartian],
	}
}

// Info says how a conn is bound (UDPConn.Info): its interface, queues,
// zero-copy or copy mode, and where its XDP program runs.
type Info = xsk.Info
