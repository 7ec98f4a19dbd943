package iperf3

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// Mode is the kind of test a Client runs.
type Mode string

// Test modes.
const (
	// ModeUDP is iperf3's UDP test (the default, also for the zero Mode):
	// datagrams with iperf3's payload header, loss and jitter measured as
	// iperf3 does. Either end may be a real iperf3.
	ModeUDP Mode = "udp"
	// ModeTCP is xdpio's TCP mode: a one-way TCP-framed stream per flow
	// from client to server, sent and received through AF_XDP on both
	// sides with no kernel TCP (see TCPParamsKey). Both ends must be
	// xdpio; it needs the AF_XDP data plane (xskplane.DataPlane) at both ends.
	// In the iperf3-style Report of such a test a receiver's packets are
	// the segments it accepted, its bytes the in-order bytes, and its lost
	// packets the segments out of order, late or with a bad checksum;
	// bench.TCPReport has the details.
	ModeTCP Mode = "tcp"
)

// ParseMode reads a mode name as the CLI takes it ("udp" or "tcp").
func ParseMode(s string) (Mode, error) {
	switch Mode(strings.ToLower(s)) {
	case ModeUDP, "":
		return ModeUDP, nil
	case ModeTCP:
		return ModeTCP, nil
	}
	return "", fmt.Errorf("invalid mode %q: must be udp or tcp", s)
}

// TCPParamsKey is the params JSON key that asks for TCP mode (ModeTCP).
//
// TCP mode is an extension of iperf3's control protocol between two xdpio
// ends. The control connection stays the kernel's TCP on the control port;
// the data is TCP-framed segments over AF_XDP to a data port the server
// announces (by default the control port + 1), which its XDP filter takes.
//
//	client → server  params JSON with "tcp": true and the key "xdpio_tcp"
//	                 (TCPParams)
//	server → client  CREATE_STREAMS, then a TCPAccept message (data port,
//	                 the server's MSS)
//	client → server  a TCPStreams message: each flow's source address,
//	                 port and initial sequence number
//	server → client  TEST_START, TEST_RUNNING; segments flow
//	client → server  TEST_END
//	server → client  EXCHANGE_RESULTS; the client sends its Results and a
//	                 TCPSenderStats message, the server its Results and a
//	                 TCPReceiverStats message
//	server → client  DISPLAY_RESULTS; client → server IPERF_DONE
//
// A real iperf3 server ignores the unknown key, sets up an ordinary TCP
// test and sends CREATE_STREAMS without the TCPAccept message: the client
// notices within TCPAcceptTimeout, terminates the test (CLIENT_TERMINATE)
// and fails with ErrNotXDPIO. A real iperf3 client never sends the key,
// so its TCP tests still get SERVER_ERROR "not implemented".
const TCPParamsKey = "xdpio_tcp"

// TCPProtocolVersion is the version of the TCP-mode extension this package
// speaks.
const TCPProtocolVersion = 1

// ErrNotXDPIO: the server does not speak xdpio's TCP mode (a real iperf3
// server, or an older xdpio).
var ErrNotXDPIO = errors.New("server does not speak xdpio's TCP mode (a real iperf3 server?): TCP mode needs xdpio bench server at the other end")

// TCPParams is the value of the params key TCPParamsKey: the client asks
// for TCP mode.
type TCPParams struct {
	Version int `json:"version"`
	// TSO: the client builds 64 KB super-packets and cuts them with
	// offload.SegmentPayload; otherwise it builds and checksums every
	// segment on its own.
	TSO bool `json:"tso"`
	// MSS is the largest segment payload the client's MTU allows.
	MSS int `json:"mss"`
}

// TCPAccept is the server's answer to TCPParams, sent after CREATE_STREAMS.
type TCPAccept struct {
	Version int `json:"version"`
	// DataPort is the TCP destination port the server's XDP filter takes.
	DataPort uint16 `json:"data_port"`
	// MSS is the largest segment payload the server's MTU allows.
	MSS int `json:"mss"`
}

// TCPStreams is the client's list of flows, sent after TCPAccept.
type TCPStreams struct {
	// MSS is the segment payload size the client sends (the smaller of
	// both ends' MSS).
	MSS     int             `json:"mss"`
	Streams []TCPStreamInfo `json:"streams"`
}

// TCPStreamInfo is one flow of a TCP-mode test.
type TCPStreamInfo struct {
	ID      int    `json:"id"`       // iperf3's stream id: 1, 3, 4, …
	Src     string `json:"src"`      // the client's address
	SrcPort uint16 `json:"src_port"` // the flow's source port
	ISN     uint32 `json:"isn"`      // sequence number of the first byte
}

// MinTCPMSS and MaxTCPMSS bound an MSS on the wire: the IPv4 minimum
// (RFC 9293's 536 less IP options is the practical floor; Linux refuses
// below 88) and what fits a 16-bit IPv4 total length.
const (
	MinTCPMSS = 88
	MaxTCPMSS = 65495
)

// CheckMSS returns an ErrProtocol error when mss is outside
// MinTCPMSS..MaxTCPMSS; what names the MSS in the message.
func CheckMSS(what string, mss int) error {
	if mss < MinTCPMSS || mss > MaxTCPMSS {
		return fmt.Errorf("invalid %s MSS %d: must be %d..%d: %w", what, mss, MinTCPMSS, MaxTCPMSS, ErrProtocol)
	}
	return nil
}

// Check returns an ErrProtocol error for an unknown version or an impossible MSS (ReadMessage calls it).
func (p *TCPParams) Check() error {
	if p.Version < 1 {
		return fmt.Errorf("xdpio TCP mode version %d: %w", p.Version, ErrProtocol)
	}
	return CheckMSS("client", p.MSS)
}

// Check returns an ErrProtocol error for an unusable data port or MSS (ReadMessage calls it).
func (a *TCPAccept) Check() error {
	if a.Version < 1 {
		return fmt.Errorf("xdpio TCP mode version %d: %w", a.Version, ErrProtocol)
	}
	if a.DataPort == 0 {
		return fmt.Errorf("data port 0: %w", ErrProtocol)
	}
	return CheckMSS("server", a.MSS)
}

// Check returns an ErrProtocol error for an impossible MSS or stream (ReadMessage calls it).
func (s *TCPStreams) Check() error {
	if err := CheckMSS("stream", s.MSS); err != nil {
		return err
	}
	if len(s.Streams) < 1 || len(s.Streams) > 128 {
		return fmt.Errorf("%d streams: must be 1..128: %w", len(s.Streams), ErrProtocol)
	}
	seen := map[netip.AddrPort]bool{}
	ids := map[int]bool{}
	for _, st := range s.Streams {
		a, err := netip.ParseAddr(st.Src)
		if err != nil {
			return fmt.Errorf("stream %d: source %q: %w: %w", st.ID, st.Src, ErrProtocol, err)
		}
		ap := netip.AddrPortFrom(a.Unmap(), st.SrcPort)
		switch {
		case st.ID < 1:
			return fmt.Errorf("stream id %d: %w", st.ID, ErrProtocol)
		case st.SrcPort == 0:
			return fmt.Errorf("stream %d: source port 0: %w", st.ID, ErrProtocol)
		case a.Zone() != "" || a.IsUnspecified() || a.IsMulticast():
			return fmt.Errorf("stream %d: source %v is not a unicast address: %w", st.ID, a, ErrProtocol)
		case seen[ap] || ids[st.ID]:
			return fmt.Errorf("stream %d (%v) given twice: %w", st.ID, ap, ErrProtocol)
		}
		seen[ap], ids[st.ID] = true, true
	}
	return nil
}

// CPUTime is CPU time in seconds, split as getrusage splits it.
type CPUTime struct {
	User   float64 `json:"user"`
	System float64 `json:"system"`
}

// Total returns user plus system time.
func (c CPUTime) Total() float64 { return c.User + c.System }

// Sub returns c less o, field by field.
func (c CPUTime) Sub(o CPUTime) CPUTime {
	return CPUTime{User: c.User - o.User, System: c.System - o.System}
}

// Add returns c plus o, field by field.
func (c CPUTime) Add(o CPUTime) CPUTime {
	return CPUTime{User: c.User + o.User, System: c.System + o.System}
}

// TCPSenderStream is one flow's figures at the sender.
type TCPSenderStream struct {
	ID       int    `json:"id"`
	Bytes    uint64 `json:"bytes"`    // payload bytes handed to the TX ring
	Segments int64  `json:"segments"` // frames handed to the TX ring
	Writes   int64  `json:"writes"`   // application writes (super-packets with TSO)
}

// TCPSenderStats is what the sender reports in TCP mode.
type TCPSenderStats struct {
	TSO     bool              `json:"tso"`
	MSS     int               `json:"mss"`
	Seconds float64           `json:"seconds"`
	Streams []TCPSenderStream `json:"streams"`
	// CPU is the time the sending threads used (getrusage RUSAGE_THREAD of
	// each, summed): building segments, checksums, TX ring and kicks.
	CPU CPUTime `json:"cpu"`
}

// TCPReceiverStream is one flow's figures at the receiver.
type TCPReceiverStream struct {
	ID int `json:"id"`
	// Segments with a valid checksum, Bytes their payload (duplicates and
	// late segments excluded).
	Segments int64  `json:"segments"`
	Bytes    uint64 `json:"bytes"`
	// InOrderBytes arrived exactly at the next expected sequence number:
	// what a TCP receiver would deliver without reassembly.
	InOrderBytes uint64 `json:"in_order_bytes"`
	// OutOfOrder segments jumped ahead of the expected sequence (a gap:
	// earlier segments lost or reordered); GapBytes is the sum of the
	// gaps skipped.
	OutOfOrder int64  `json:"out_of_order"`
	GapBytes   uint64 `json:"gap_bytes"`
	// Late segments started before the expected sequence: duplicates or
	// segments that arrived after a later one.
	Late int64 `json:"late"`
	// BadChecksum counts frames of the flow whose IPv4 or TCP checksum was
	// wrong (offload.VerifyRX): counted, never accepted.
	BadChecksum int64 `json:"bad_checksum"`
}

// TCPReceiverStats is what the receiver reports in TCP mode.
type TCPReceiverStats struct {
	Seconds float64             `json:"seconds"`
	Streams []TCPReceiverStream `json:"streams"`
	// Stray frames reached the data port's sockets but belong to no flow of
	// the test; Malformed frames could not be parsed as TCP.
	Stray     int64 `json:"stray"`
	Malformed int64 `json:"malformed"`
	// Dropped is what the kernel could not put into the receiving sockets
	// (RX ring full, no fill ring entry: XDP statistics rx_dropped and
	// rx_ring_full), which shows up as gaps in the flows.
	Dropped uint64 `json:"dropped"`
	// CPU is the time the receiving threads used.
	CPU CPUTime `json:"cpu"`
}

// Check returns an ErrProtocol error for impossible figures (ReadMessage calls it).
func (s *TCPSenderStats) Check() error {
	if s.Seconds < 0 || s.CPU.User < 0 || s.CPU.System < 0 || len(s.Streams) > 128 {
		return fmt.Errorf("sender stats: negative time or too many streams: %w", ErrProtocol)
	}
	for _, st := range s.Streams {
		if st.Segments < 0 || st.Writes < 0 {
			return fmt.Errorf("sender stats: stream %d: negative count: %w", st.ID, ErrProtocol)
		}
	}
	return nil
}

// Check returns an ErrProtocol error for impossible figures (ReadMessage calls it).
func (s *TCPReceiverStats) Check() error {
	if s.Seconds < 0 || s.CPU.User < 0 || s.CPU.System < 0 || s.Stray < 0 || s.Malformed < 0 || len(s.Streams) > 128 {
		return fmt.Errorf("receiver stats: negative count or too many streams: %w", ErrProtocol)
	}
	for _, st := range s.Streams {
		if st.Segments < 0 || st.OutOfOrder < 0 || st.Late < 0 || st.BadChecksum < 0 {
			return fmt.Errorf("receiver stats: stream %d: negative count: %w", st.ID, ErrProtocol)
		}
	}
	return nil
}

// TCPParamsMsg is the params message with the TCP-mode key.
type TCPParamsMsg struct {
	Params
	TCP *TCPParams `json:"xdpio_tcp,omitempty"`
}

// Check checks the iperf3 parameters and, when present, the TCP mode's (ReadMessage calls it).
func (m *TCPParamsMsg) Check() error {
	if err := m.Params.Check(); err != nil {
		return err
	}
	if m.TCP != nil {
		return m.TCP.Check()
	}
	return nil
}

// ReadParams reads the client's parameters and, when present, its
// TCP-mode request.
func ReadParams(r io.Reader) (Params, *TCPParams, error) {
	var m TCPParamsMsg
	if err := ReadMessage(r, &m); err != nil {
		return Params{}, nil, err
	}
	return m.Params, m.TCP, nil
}
