package plane

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/coalesce"
)

// TCPInfo is a data connection's TCP figures at one moment, what iperf3
// reads from the kernel's TCP_INFO for its reports.
type TCPInfo struct {
	// Retransmits are the segments the connection sent again since it
	// was opened.
	Retransmits uint64
	// SndCwnd is the congestion window in bytes.
	SndCwnd uint64
	// SndWnd is the peer's receive window in bytes, 0 when the stack does
	// not tell it.
	SndWnd uint64
	// RTT and RTTVar are the smoothed round-trip time and its variation.
	RTT, RTTVar time.Duration
	// PMTU is the path MTU.
	PMTU int
}

// TCPConn is one data connection of iperf3's TCP test, on whichever TCP
// stack. Read and Write are used by one goroutine each; Info may be
// called from any.
type TCPConn interface {
	net.Conn
	// Info returns the connection's figures now.
	Info() (TCPInfo, error)
	// Finish ends the connection's sending: its FIN follows what was
	// written, and Finish waits until the peer has acknowledged the FIN,
	// and so everything sent, or until ctx ends. The connection can still
	// read.
	Finish(ctx context.Context) error
	// Congestion names the connection's congestion control ("cubic").
	Congestion() string
}

// TCPPlane opens the TCP stack that carries a TCP test's data
// connections, once per test. A Server or Client without one runs them
// on the kernel's TCP.
type TCPPlane interface {
	// Listen opens, for one server test, the listener of its data
	// connections: to local, the control connection's local address
	// (iperf3's data connections go to the control port too), from any
	// address but ctl, the control connection's other end, which stays
	// the kernel's.
	Listen(local, ctl netip.AddrPort) (TCPListener, error)
	// Dialer opens, for one client test, the stack its data connections
	// are dialed from: local, the control connection's local address,
	// to server, its remote one.
	Dialer(local, server netip.AddrPort) (TCPDialer, error)
}

// TCPListener takes a server test's data connections. Close closes the
// stack too: call it once the test is over.
type TCPListener interface {
	// Accept waits for the next connection; Close ends the wait.
	Accept() (TCPConn, error)
	// Stack describes the stack, with its counters so far.
	Stack() TCPStack
	// Close closes the listener and the stack: its connections are reset.
	Close() error
}

// TCPDialer dials a client test's data connections. Close closes the
// stack: call it once the test is over.
type TCPDialer interface {
	// Dial opens a connection to the test's server.
	Dial(ctx context.Context) (TCPConn, error)
	// Stack describes the stack, with its counters so far.
	Stack() TCPStack
	// Close closes the stack: its connections are reset.
	Close() error
}

// TCPStack describes the TCP stack of a test's data connections and the
// settings it ran with, for the report.
type TCPStack struct {
	// Name is "kernel", "netstack" for gVisor's stack over AF_XDP
	// (package netstack), sharing the kernel's address, or "gvisor-xdp"
	// for gVisor's stack over gVisor's own AF_XDP endpoint (package
	// gvisorxdpplane), sharing it too.
	Name string `json:"name"`
	// Interface and Queues are the interface and the RX queues the
	// stack's AF_XDP sockets took frames from (netstack only).
	Interface string `json:"interface,omitempty"`
	Queues    []int  `json:"queues,omitempty"`
	// TSO tells that the stack handed the link segments of up to 64 KiB
	// to cut (software TSO, netstack), RXChecksumOffload that the link
	// verified received checksums for it, GRO that the link merged the
	// segments of a flow it received in one batch (netstack).
	TSO               bool `json:"tso"`
	RXChecksumOffload bool `json:"rx_checksum_offload"`
	GRO               bool `json:"gro"`
	// RXCoalesce and TXCoalesce are the software coalescing of the
	// stack's queues, nil when off (netstack).
	RXCoalesce *coalesce.Params   `json:"rx_coalesce,omitempty"`
	TXCoalesce *coalesce.TXParams `json:"tx_coalesce,omitempty"`
	// QDisc is the queueing discipline between the stack and its link
	// endpoint (gvisor-xdp: "fifo", gVisor's, or "none"); empty when the
	// stack has no such choice.
	QDisc string `json:"qdisc,omitempty"`
	// Counters are the stack's own counters for the test (netstack; nil
	// for the kernel, whose counters are the whole namespace's).
	Counters *TCPStackCounters `json:"counters,omitempty"`
}

// TCPStackCounters are what a test's own TCP stack counted, named as the
// kernel's SNMP counters where one exists (nstat's TcpRetransSegs ...).
type TCPStackCounters struct {
	// ActiveOpens and PassiveOpens are connections dialed and accepted;
	// EstabResets established connections reset.
	ActiveOpens  uint64 `json:"active_opens"`
	PassiveOpens uint64 `json:"passive_opens"`
	EstabResets  uint64 `json:"estab_resets"`
	// InSegs and OutSegs are TCP segments received and sent (a segment
	// the link cut with TSO counts once); InErrs those received invalid.
	InSegs  uint64 `json:"in_segs"`
	OutSegs uint64 `json:"out_segs"`
	InErrs  uint64 `json:"in_errs"`
	// RetransSegs are segments sent again, FastRetrans those on duplicate
	// ACKs or SACK, Timeouts the retransmission timer's expiries.
	RetransSegs uint64 `json:"retrans_segs"`
	FastRetrans uint64 `json:"fast_retrans"`
	Timeouts    uint64 `json:"timeouts"`
	// RXFrames and TXFrames are the link's frames, RXPackets the packets
	// the received frames became (fewer when GRO merged segments),
	// RXBatches the batches they came in (one a wake-up),
	// RXSocketDropped the frames the kernel dropped before the stack's
	// AF_XDP sockets (their RX ring full, no free frame: xsk.Stats'
	// RXDropped and RXRingFull),
	// TXSegmented the packets it cut (TSO); RXBadChecksum frames it dropped for a wrong
	// checksum, RXPartialChecksum those whose checksum a sender on this
	// host left to an offload. TXPackets are the packets the stack
	// handed the link; TXDropped those it could not send for want of a
	// free frame, TXNoNeighbour for want of the next hop's address,
	// TXErrors for another error.
	RXFrames          uint64 `json:"rx_frames"`
	RXPackets         uint64 `json:"rx_packets"`
	RXBatches         uint64 `json:"rx_batches"`
	RXSocketDropped   uint64 `json:"rx_socket_dropped"`
	TXFrames          uint64 `json:"tx_frames"`
	TXSegmented       uint64 `json:"tx_segmented"`
	RXBadChecksum     uint64 `json:"rx_bad_checksum"`
	RXPartialChecksum uint64 `json:"rx_partial_checksum"`
	TXPackets         uint64 `json:"tx_packets"`
	TXDropped         uint64 `json:"tx_dropped"`
	TXNoNeighbour     uint64 `json:"tx_no_neighbour"`
	TXErrors          uint64 `json:"tx_errors"`
}
