package bench

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
	// xdpio; it needs the AF_XDP data plane (XSKDataPlane) at both ends.
	// In the iperf3-style Report of such a test a receiver's packets are
	// the segments it accepted, its bytes the in-order bytes, and its lost
	// packets the segments out of order, late or with a bad checksum;
	// TCPReport has the details.
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

// minTCPMSS and maxTCPMSS bound an MSS on the wire: the IPv4 minimum
// (RFC 9293's 536 less IP options is the practical floor; Linux refuses
// below 88) and what fits a 16-bit IPv4 total length.
const (
	minTCPMSS = 88
	maxTCPMSS = 65495
)

func checkMSS(what string, mss int) error {
	if mss < minTCPMSS || mss > maxTCPMSS {
		return fmt.Errorf("invalid %s MSS %d: must be %d..%d: %w", what, mss, minTCPMSS, maxTCPMSS, ErrProtocol)
	}
	return nil
}

func (p *TCPParams) check() error {
	if p.Version < 1 {
		return fmt.Errorf("xdpio TCP mode version %d: %w", p.Version, ErrProtocol)
	}
	return checkMSS("client", p.MSS)
}

func (a *TCPAccept) check() error {
	if a.Version < 1 {
		return fmt.Errorf("xdpio TCP mode version %d: %w", a.Version, ErrProtocol)
	}
	if a.DataPort == 0 {
		return fmt.Errorf("data port 0: %w", ErrProtocol)
	}
	return checkMSS("server", a.MSS)
}

func (s *TCPStreams) check() error {
	if err := checkMSS("stream", s.MSS); err != nil {
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
	// wrong (offload.VerifyRx): counted, never accepted.
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

func (s *TCPSenderStats) check() error {
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

func (s *TCPReceiverStats) check() error {
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

// tcpParamsMsg is the params message with the TCP-mode key.
type tcpParamsMsg struct {
	Params
	TCP *TCPParams `json:"xdpio_tcp,omitempty"`
}

func (m *tcpParamsMsg) check() error {
	if err := m.Params.check(); err != nil {
		return err
	}
	if m.TCP != nil {
		return m.TCP.check()
	}
	return nil
}

// readParams reads the client's parameters and, when present, its
// TCP-mode request.
func readParams(r io.Reader) (Params, *TCPParams, error) {
	var m tcpParamsMsg
	if err := ReadMessage(r, &m); err != nil {
		return Params{}, nil, err
	}
	return m.Params, m.TCP, nil
}

// TCPReport is a TCP-mode test's outcome: both ends' figures and what
// follows from them.
type TCPReport struct {
	Sender   TCPSenderStats   `json:"sender"`
	Receiver TCPReceiverStats `json:"receiver"`
	Sum      TCPSummary       `json:"sum"`
}

// TCPSummary sums a TCP-mode test over its flows.
type TCPSummary struct {
	SentBytes        uint64  `json:"sent_bytes"`
	SentSegments     int64   `json:"sent_segments"`
	SenderBitsPerSec float64 `json:"sender_bits_per_second"`
	// ReceivedBytes are the receiver's in-order bytes.
	ReceivedBytes      uint64  `json:"received_bytes"`
	ReceivedSegments   int64   `json:"received_segments"`
	ReceiverBitsPerSec float64 `json:"receiver_bits_per_second"`
	OutOfOrder         int64   `json:"out_of_order"`
	Late               int64   `json:"late"`
	GapBytes           uint64  `json:"gap_bytes"`
	BadChecksum        int64   `json:"bad_checksum"`
	// Sender CPU per byte and per segment sent, in nanoseconds, and the
	// share of one CPU the sending threads used.
	SenderCPUNsPerByte    float64 `json:"sender_cpu_ns_per_byte"`
	SenderCPUNsPerSegment float64 `json:"sender_cpu_ns_per_segment"`
	SenderCPUPercent      float64 `json:"sender_cpu_percent"`
	ReceiverCPUNsPerByte  float64 `json:"receiver_cpu_ns_per_byte"`
}

// newTCPReport sums both ends' figures.
func newTCPReport(s TCPSenderStats, r TCPReceiverStats) *TCPReport {
	rep := &TCPReport{Sender: s, Receiver: r}
	m := &rep.Sum
	for _, st := range s.Streams {
		m.SentBytes += st.Bytes
		m.SentSegments += st.Segments
	}
	for _, st := range r.Streams {
		m.ReceivedBytes += st.InOrderBytes
		m.ReceivedSegments += st.Segments
		m.OutOfOrder += st.OutOfOrder
		m.Late += st.Late
		m.GapBytes += st.GapBytes
		m.BadChecksum += st.BadChecksum
	}
	m.SenderBitsPerSec = bps(m.SentBytes, s.Seconds)
	m.ReceiverBitsPerSec = bps(m.ReceivedBytes, r.Seconds)
	if m.SentBytes > 0 {
		m.SenderCPUNsPerByte = s.CPU.Total() * 1e9 / float64(m.SentBytes)
		m.SenderCPUNsPerSegment = s.CPU.Total() * 1e9 / float64(m.SentSegments)
	}
	if s.Seconds > 0 {
		m.SenderCPUPercent = 100 * s.CPU.Total() / s.Seconds
	}
	if m.ReceivedBytes > 0 {
		m.ReceiverCPUNsPerByte = r.CPU.Total() * 1e9 / float64(m.ReceivedBytes)
	}
	return rep
}

// WriteText prints the report as iperf3 prints a TCP test's summary: a
// sender and a receiver line per flow and for the sum, then the
// receiver's checks and the sender's CPU cost.
func (r *TCPReport) WriteText(w io.Writer) error {
	var b strings.Builder
	tso := "off"
	if r.Sender.TSO {
		tso = "on"
	}
	fmt.Fprintf(&b, "TCP mode over AF_XDP, software TSO %s, MSS %d\n", tso, r.Sender.MSS)
	b.WriteString("[ ID] Interval           Transfer     Bitrate         Segments\n")
	rx := map[int]TCPReceiverStream{}
	for _, s := range r.Receiver.Streams {
		rx[s.ID] = s
	}
	for _, s := range r.Sender.Streams {
		fmt.Fprintf(&b, "[%s]   0.00-%-6.2f sec  %12s  %15s  %8d  sender\n", id(s.ID), r.Sender.Seconds, FormatBytes(s.Bytes), FormatBitrate(bps(s.Bytes, r.Sender.Seconds)), s.Segments)
		x := rx[s.ID]
		fmt.Fprintf(&b, "[%s]   0.00-%-6.2f sec  %12s  %15s  %8d  receiver (in order)\n", id(s.ID), r.Receiver.Seconds, FormatBytes(x.InOrderBytes), FormatBitrate(bps(x.InOrderBytes, r.Receiver.Seconds)), x.Segments)
	}
	m := r.Sum
	if len(r.Sender.Streams) > 1 {
		fmt.Fprintf(&b, "[SUM]   0.00-%-6.2f sec  %12s  %15s  %8d  sender\n", r.Sender.Seconds, FormatBytes(m.SentBytes), FormatBitrate(m.SenderBitsPerSec), m.SentSegments)
		fmt.Fprintf(&b, "[SUM]   0.00-%-6.2f sec  %12s  %15s  %8d  receiver (in order)\n", r.Receiver.Seconds, FormatBytes(m.ReceivedBytes), FormatBitrate(m.ReceiverBitsPerSec), m.ReceivedSegments)
	}
	fmt.Fprintf(&b, "receiver: %d out of order (%d bytes skipped), %d late or duplicate, %d bad checksums, %d malformed, %d stray, %d dropped by the kernel\n",
		m.OutOfOrder, m.GapBytes, m.Late, m.BadChecksum, r.Receiver.Malformed, r.Receiver.Stray, r.Receiver.Dropped)
	fmt.Fprintf(&b, "sender CPU: %.3f s user + %.3f s system (%.0f%% of a core), %.3f ns/byte, %.0f ns/segment\n",
		r.Sender.CPU.User, r.Sender.CPU.System, m.SenderCPUPercent, m.SenderCPUNsPerByte, m.SenderCPUNsPerSegment)
	fmt.Fprintf(&b, "receiver CPU: %.3f s user + %.3f s system, %.3f ns/byte (checksums verified on every frame)\n",
		r.Receiver.CPU.User, r.Receiver.CPU.System, m.ReceiverCPUNsPerByte)
	_, err := io.WriteString(w, b.String())
	return err
}
