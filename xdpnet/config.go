package xdpnet

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// TXChecksum chooses who computes the UDP checksum of sent datagrams.
type TXChecksum int

const (
	// TXChecksumSoftware computes it in this package, summing the payload
	// while it is copied into the frame (one pass). Works everywhere.
	TXChecksumSoftware TXChecksum = iota
	// TXChecksumOffload leaves it to the kernel or the NIC through AF_XDP
	// TX metadata (Linux 6.8 for zero-copy drivers that offer it; copy
	// mode asks the kernel to compute it in software, Linux 6.11). The
	// IPv4 header checksum is still computed here.
	TXChecksumOffload
)

// String returns "software" or "offload".
func (m TXChecksum) String() string {
	switch m {
	case TXChecksumSoftware:
		return "software"
	case TXChecksumOffload:
		return "offload"
	}
	return "TXChecksum(" + itoa(int(m)) + ")"
}

// Config tunes a UDPConn. The zero value binds every RX queue of the
// interface, verifies checksums, sends with TTL 64 and resolves next hops
// within 3 s.
type Config struct {
	// Queues lists the RX queues to bind AF_XDP sockets to; nil means
	// every queue. Datagrams that arrive on other queues reach the
	// kernel's socket the conn holds, and are read from it too.
	Queues []int
	// FramesPerQueue is the UMEM frames of each queue's socket; 0 is
	// package xsk's default (4096, or what fits RLIMIT_MEMLOCK without
	// CAP_IPC_LOCK). A quarter of them are set apart for sending. The fill
	// and RX rings hold half of them (up to 16384): what the kernel can
	// deliver while the reading goroutine waits for a CPU. A busy Go
	// process can keep it waiting a whole 10 ms scheduler slice, which
	// the default 2048 last only up to 200k packets/s per queue; raise
	// FramesPerQueue for more (16384 frames of 4 KiB: 64 MiB per queue).
	FramesPerQueue int
	// Bind chooses copy or zero-copy (xsk.BindAuto by default).
	Bind xsk.BindMode
	// Attach chooses driver or generic XDP (xsk.AttachAuto by default).
	Attach xsk.AttachMode
	// Share says whether the conn's XDP program joins libxdp's
	// multi-program dispatcher (xdp-loader, xdp-filter) when one is on
	// the interface (xsk.ShareAuto, the default), starts one
	// (xsk.ShareDispatcher), or must be alone (xsk.ShareExclusive); see
	// package xsk, "Sharing the interface with other XDP programs".
	Share xsk.Share
	// RXNap is the longest nap of a reader that found its queues empty
	// (0: xsk.DefaultNap; negative: never nap, always wait in poll).
	// Readers nap NAPI style, as xsk's runner does (xsk.Napper): only
	// while datagrams arrive fast enough that a nap gathers a batch, so
	// one wake-up serves many datagrams under load, while at low rates a
	// reader waits in poll and wakes for each datagram at once.
	RXNap time.Duration
	// BatchSize is how many descriptors a ring operation moves at most
	// (default 64, at most 1024).
	BatchSize int
	// TTL is the IPv4 TTL or IPv6 hop limit of sent datagrams (1 to 255,
	// default 64).
	TTL int
	// TOS is the IPv4 type of service or IPv6 traffic class (0 to 255,
	// default 0).
	TOS int
	// RXChecksum chooses how received checksums are verified.
	RXChecksum RXChecksum
	// TXChecksum chooses who computes the checksums of sent datagrams.
	TXChecksum TXChecksum
	// GRO hands consecutive datagrams of one flow to ReadBatch (and
	// Queue.ReadBatch) as one buffer with Message.SegSize set, like
	// UDP_GRO, when the buffer has room.
	GRO bool
	// Ports is how many consecutive local ports the conn takes, from
	// the port of its address on (default 1, at most 1024): one conn
	// serving several ports, each reserved with a kernel socket of its
	// own. Message.LocalPort tells a read datagram's port and chooses a
	// written one's source port. With port 0 and Ports above 1, ListenUDP
	// picks a free block of ports below the kernel's ephemeral range
	// (20000-32767). A connected conn (DialUDP) has one port.
	Ports int
	// Coalesce, when set, batches each queue's receive in software, the
	// way NIC interrupt coalescing does (rx-frames, rx-usecs, adaptive;
	// package coalesce): Queue.ReadView and Group.ReadView hand datagrams
	// over when a batch is full or its first datagram waited rx-usecs,
	// which takes fewer wake-ups than one per arrival. The conn's own
	// reads are not coalesced.
	Coalesce *coalesce.Params
	// Expr narrows what the conn takes through AF_XDP to the datagrams
	// that also match a tcpdump (pcap-filter) expression, compiled into
	// its XDP program by package filter: "src net 198.18.0.0/15" (an
	// allow list), "not src host 198.18.0.66" (a deny list). The others go
	// to the kernel's stack as if there were no conn, where the firewall
	// (nftables, iptables), which never sees AF_XDP traffic, applies its
	// rules before the conn's kernel socket gets what they let through.
	// Empty: every datagram to the conn's address and port. An expression
	// package filter cannot compile fails ListenUDP with ErrInvalidConfig.
	Expr string
	// ResolveTimeout is how long the conn waits for the kernel to
	// resolve a next hop's link-layer address (ARP or neighbour
	// discovery) before writes to it fail with EHOSTUNREACH; default 3 s.
	// Writes do not wait meanwhile (see the package documentation).
	ResolveTimeout time.Duration
}

const (
	defaultBatch = 64
	maxBatch     = 1024
	defaultTTL   = 64
	// maxSegments is the most datagrams one GSO write is cut into, as
	// Linux's UDP_MAX_SEGMENTS.
	maxSegments = 128
)

func (c *Config) setDefaults() {
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatch
	}
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if c.Ports == 0 {
		c.Ports = 1
	}
	if c.ResolveTimeout == 0 {
		c.ResolveTimeout = 3 * time.Second
	}
}

func (c *Config) validate() error {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: %s %v: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case c.BatchSize < 1 || c.BatchSize > maxBatch:
		return bad("BatchSize", c.BatchSize, "must be between 1 and 1024")
	case c.TTL < 1 || c.TTL > 255:
		return bad("TTL", c.TTL, "must be between 1 and 255")
	case c.TOS < 0 || c.TOS > 255:
		return bad("TOS", c.TOS, "must be between 0 and 255")
	case c.RXChecksum < RXChecksumVerify || c.RXChecksum > RXChecksumNone:
		return bad("RXChecksum", int(c.RXChecksum), "unknown mode")
	case c.TXChecksum < TXChecksumSoftware || c.TXChecksum > TXChecksumOffload:
		return bad("TXChecksum", int(c.TXChecksum), "unknown mode")
	case c.Ports < 1 || c.Ports > 1024:
		return bad("Ports", c.Ports, "must be between 1 and 1024")
	case c.ResolveTimeout < 0:
		return bad("ResolveTimeout", c.ResolveTimeout, "must not be negative")
	case c.FramesPerQueue < 0:
		return bad("FramesPerQueue", c.FramesPerQueue, "must not be negative")
	case c.FramesPerQueue > 0 && c.FramesPerQueue < 4*c.BatchSize:
		return bad("FramesPerQueue", c.FramesPerQueue, fmt.Sprintf("must be at least 4 batches (%d)", 4*c.BatchSize))
	}
	return nil
}
