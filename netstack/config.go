package netstack

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/xsk"
)

var (
	// ErrInvalidConfig is wrapped by errors about a Config field.
	ErrInvalidConfig = errs.ErrInvalidConfig
	// ErrNotSupported: the platform or the kernel lacks what the stack
	// needs.
	ErrNotSupported = errs.ErrNotSupported
	// ErrNoDevice: the interface is gone.
	ErrNoDevice = errs.ErrNoDevice
	// ErrClosed: the stack was closed.
	ErrClosed = errs.ErrClosed
)

// Config describes a stack on an interface. Addrs is required; the zero
// value of every other field is a good default: every RX queue, TSO and
// checksum offload on, no coalescing.
type Config struct {
	// Addrs are the stack's addresses with their prefix lengths
	// (198.18.0.3/24, 2001:db8::3/64): it reaches the prefixes' networks
	// on the interface directly. Without Share they are the stack's own,
	// which the kernel must not have on the interface, and the stack
	// answers ARP and neighbour discovery for them; with Share they are
	// the kernel's, shared.
	Addrs []netip.Prefix
	// Share, when set, has the stack share the kernel's addresses on the
	// interface instead of having its own: the kernel keeps answering for
	// them (ARP, neighbour discovery, ICMP, its own sockets), its
	// neighbour table gives the stack's frames their destination, and the
	// stack takes only the frames Share selects. See "Addresses" in the
	// package documentation.
	Share *Share
	// Gateway4 and Gateway6, when valid, are the default routes' next
	// hops, on one of Addrs' networks. Not with Share: the kernel's
	// routes then pick the next hop of every frame.
	Gateway4, Gateway6 netip.Addr
	// Queues lists the RX queues to take frames from; nil means every
	// queue.
	Queues []int
	// FramesPerQueue is each queue's socket's UMEM frames (0: package
	// xsk's default). A third of them are set apart for sending.
	FramesPerQueue int
	// Bind and Attach choose zero-copy or copy mode, and driver or generic
	// XDP (package xsk's defaults: auto).
	Bind   xsk.BindMode
	Attach xsk.AttachMode
	// MTU is the largest IP packet (0: the interface's).
	MTU int
	// NoTSO makes the stack cut its TCP segments to the MSS itself, as it
	// does for a NIC without segmentation offload, instead of handing the
	// endpoint segments of up to 64 KiB to cut (host GSO). TSO pays on a
	// clean path (4.6× one stream's rate over veth); on a lossy one it
	// costs: gVisor's loss recovery works in the stack's segments, so a
	// frame lost from one often waits for the retransmission timer (over
	// veth with 1% of the frames dropped, 9-13 timeouts in 2 s and 6-17
	// MB sent with TSO, none and 36 MB without). Set NoTSO on paths that
	// lose frames.
	NoTSO bool
	// NoRXChecksumOffload makes the stack verify every received checksum
	// itself; by default the endpoint verifies them once and tells it so.
	NoRXChecksumOffload bool
	// NoGRO hands the stack every TCP segment as it came. By default the
	// endpoint merges the in-order segments of a flow that one receive
	// batch holds into one packet of up to 64 KiB (offload.GRO, Linux's
	// rules), so that the stack's per-segment work runs once for them,
	// as a kernel's GRO does for its stack: the more a batch holds (see
	// Coalesce), the more it merges. GRO takes only segments whose
	// checksums the endpoint verified: with NoRXChecksumOffload it merges
	// nothing.
	NoGRO bool
	// AcceptPartialChecksum accepts TCP and UDP checksums a sender on
	// this host left to a TX offload (only the pseudo-header sum in the
	// field, offload.PartialChecksum), which are otherwise dropped and
	// counted as RXPartialChecksum: for a peer on the same machine over
	// veth with its TX checksum offload on (veth's default). The data of
	// such frames is checked by nothing. It needs the RX checksum offload.
	AcceptPartialChecksum bool
	// Coalesce, when set, batches each queue's receive (rx-frames,
	// rx-usecs, adaptive; package coalesce): frames go to the stack when a
	// batch is full or its first frame waited rx-usecs.
	Coalesce *coalesce.Params
	// TXCoalesce, when set, batches each queue's transmit (tx-frames,
	// tx-usecs): the kernel is kicked once per batch.
	TXCoalesce *coalesce.TXParams
}

// Share is how a stack shares the kernel's addresses (Config.Share): the
// ports it takes from the kernel.
type Share struct {
	// Expr selects, in tcpdump's syntax, the frames to the stack's
	// addresses that the stack takes, such as "tcp dst port 5201" for a
	// listener on port 5201 (package filter's subset: the XDP program
	// runs it). Required. The kernel must not use what it selects: a
	// kernel socket on the same port receives nothing more.
	Expr string
	// Ports is the range of local ports of the stack's own connections
	// (DialTCP), whose TCP and UDP frames the stack takes too. It must lie
	// outside the kernel's ephemeral range (net.ipv4.ip_local_port_range),
	// so that no kernel connection's replies reach the stack. The zero
	// value is from the end of the kernel's range, plus one, to 65535.
	Ports [2]uint16
}

func (c *Config) validate() error {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: %s %v: %s", ErrInvalidConfig, field, v, rule)
	}
	if len(c.Addrs) == 0 {
		return bad("Addrs", c.Addrs, "the stack needs an address of its own")
	}
	for _, p := range c.Addrs {
		a := p.Addr()
		if !p.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a.Is4In6() {
			return bad("Addrs", p, "must be a unicast address with a prefix length")
		}
	}
	for _, g := range []netip.Addr{c.Gateway4, c.Gateway6} {
		if g.IsValid() && !c.onLink(g) {
			return bad("gateway", g, "is on none of Addrs' networks")
		}
	}
	if c.Gateway4.IsValid() && !c.Gateway4.Is4() || c.Gateway6.IsValid() && !c.Gateway6.Is6() {
		return bad("gateway", fmt.Sprint(c.Gateway4, " ", c.Gateway6), "Gateway4 must be IPv4 and Gateway6 IPv6")
	}
	if c.MTU < 0 || c.MTU > 65535 || (c.MTU > 0 && c.MTU < 1280) {
		return bad("MTU", c.MTU, "must be 0 or between 1280 and 65535")
	}
	if c.Share != nil && (c.Gateway4.IsValid() || c.Gateway6.IsValid()) {
		return bad("gateway", fmt.Sprint(c.Gateway4, " ", c.Gateway6), "a shared stack sends through the kernel's routes: no gateways of its own")
	}
	if c.Share != nil && c.Share.Expr == "" {
		return bad("Share.Expr", `""`, "a shared stack needs the frames it takes, such as \"tcp dst port 5201\"")
	}
	if c.AcceptPartialChecksum && c.NoRXChecksumOffload {
		return bad("AcceptPartialChecksum", true, "needs the RX checksum offload (NoRXChecksumOffload false): the stack's own check refuses them")
	}
	if c.FramesPerQueue < 0 {
		return bad("FramesPerQueue", c.FramesPerQueue, "must not be negative")
	}
	return nil
}

// onLink reports whether a lies in one of the stack's networks.
func (c *Config) onLink(a netip.Addr) bool {
	for _, p := range c.Addrs {
		if p.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// Stats are an endpoint's counters. Every frame a socket took is a frame
// handed to the stack or a drop.
type Stats struct {
	// RXFrames were handed to the stack; RXBytes their bytes. RXPackets
	// are the packets the stack received: fewer than RXFrames when GRO
	// merged segments (RXFrames ÷ RXPackets is the frames a packet held
	// on average).
	RXFrames, RXBytes, RXPackets uint64
	// RXBatches are the batches the queues' receive loops took from
	// their sockets, each at one wake-up: RXFrames ÷ RXBatches is what
	// a wake-up took on average, which coalescing (Config.Coalesce)
	// raises.
	RXBatches uint64
	// RXBadChecksum were dropped for a wrong IPv4 header or transport
	// checksum (offload.VerifyRX; with NoRXChecksumOffload the stack
	// checks and counts them itself, in its own statistics).
	RXBadChecksum uint64
	// RXPartialChecksum are frames whose transport checksum a sender on
	// this host left unfinished for an offload: dropped, or with
	// Config.AcceptPartialChecksum handed to the stack (and counted in
	// RXFrames too).
	RXPartialChecksum uint64
	// RXMalformed were dropped as not parseable; RXNotForUs as not to
	// the stack's MAC (a broadcast or multicast frame is for it).
	RXMalformed, RXNotForUs uint64
	// TXPackets the stack wrote, TXFrames the frames they became (more,
	// with TSO: TXSegmented counts the packets that were cut), TXBytes
	// the frames' bytes.
	TXPackets, TXFrames, TXSegmented, TXBytes uint64
	// TXDropped could not be sent: no frame free, or a packet the
	// endpoint could not build (TXErrors).
	TXDropped, TXErrors uint64
	// TXNoNeighbour were dropped, with Config.Share, because the kernel
	// could not resolve their next hop (a packet waits up to 3 s for it,
	// at most 16 per destination and 64 destinations at once, as the
	// kernel's own neighbour queue holds them).
	TXNoNeighbour uint64
	// Sockets are the AF_XDP sockets' own counters, by queue: what the
	// kernel dropped before them (RXDropped, RXRingFull) among them.
	Sockets []xsk.Stats
	// RXCoalesce and TXCoalesce are the queues' coalescing counters, by
	// queue, with Config.Coalesce and Config.TXCoalesce: how many batches
	// and kicks the frames took, and why each was handed over.
	RXCoalesce []coalesce.RXStats
	TXCoalesce []coalesce.TXStats
}

// TCPStats are the stack's TCP counters (Stack.TCPStats), gVisor's own,
// named as the kernel's SNMP counters are where one exists (nstat's
// TcpActiveOpens, TcpRetransSegs, ...).
type TCPStats struct {
	// ActiveOpens and PassiveOpens are connections dialed and accepted
	// (TcpActiveOpens, TcpPassiveOpens); CurrEstab those established now.
	ActiveOpens, PassiveOpens, CurrEstab uint64
	// AttemptFails are dials that failed (TcpAttemptFails); EstabResets
	// established connections reset (TcpEstabResets).
	AttemptFails, EstabResets uint64
	// InSegs and OutSegs are segments received and sent (TcpInSegs,
	// TcpOutSegs; a segment the endpoint cut with TSO counts once, as the
	// stack built it: Stats.TXFrames counts what went out). Unlike the
	// kernel's, InSegs leaves out a segment for no connection or
	// listener (gVisor answers it with a reset, counted in OutRsts,
	// without counting it). InErrs are those received invalid
	// (TcpInErrs), InCsumErrors those with a wrong checksum that the
	// stack checked itself (TcpInCsumErrors: with the RX checksum offload
	// the endpoint drops them first, Stats.RXBadChecksum).
	InSegs, OutSegs, InErrs, InCsumErrors uint64
	// RetransSegs are segments sent again (TcpRetransSegs); FastRetrans
	// those retransmitted on duplicate ACKs or SACK (TcpExtTCPFastRetrans),
	// Timeouts the retransmission timer's expiries (TcpExtTCPTimeouts).
	RetransSegs, FastRetrans, Timeouts uint64
	// OutRsts and InRsts are resets sent (TcpOutRsts) and received.
	OutRsts, InRsts uint64
}

// TCPConnInfo is one TCP connection's state in the stack (Stack.TCPConnInfo),
// what the kernel's TCP_INFO tells of one of its sockets.
type TCPConnInfo struct {
	// State is the connection's state in gVisor's names: ESTABLISHED,
	// FIN-WAIT1, FIN-WAIT2, TIME-WAIT, CLOSE-WAIT, LAST-ACK, CLOSED, …
	State string
	// RTT and RTTVar are the smoothed round-trip time and its variation
	// (zero before data went both ways); RTO the retransmission timeout.
	RTT, RTTVar, RTO time.Duration
	// SndCwnd is the congestion window and SndSsthresh the slow-start
	// threshold, in segments.
	SndCwnd, SndSsthresh uint32
	// MSS is the largest segment payload the stack's MTU allows the
	// connection (the MTU less the IP and TCP headers; TCP options, such
	// as timestamps, are not deducted).
	MSS int
	// Retransmits are the segments the connection sent again,
	// FastRetransmits those sent again on duplicate ACKs or SACK, and
	// Timeouts the expiries of its retransmission timer.
	Retransmits, FastRetransmits, Timeouts uint64
	// SegmentsSent and SegmentsReceived are the connection's segments,
	// its handshake's included but for a peer's SYN, which the
	// listener handles before the connection exists.
	SegmentsSent, SegmentsReceived uint64
	// Congestion is the congestion control algorithm ("cubic").
	Congestion string
}
