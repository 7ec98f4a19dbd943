package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/xdpio/xdpio/bench/iperf3"
)

// TCPReport is a TCP-mode test's outcome: both ends' figures and what
// follows from them.
type TCPReport struct {
	Sender   iperf3.TCPSenderStats   `json:"sender"`
	Receiver iperf3.TCPReceiverStats `json:"receiver"`
	Sum      TCPSummary              `json:"sum"`
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
func newTCPReport(s iperf3.TCPSenderStats, r iperf3.TCPReceiverStats) *TCPReport {
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
	rx := map[int]iperf3.TCPReceiverStream{}
	for _, s := range r.Receiver.Streams {
		rx[s.ID] = s
	}
	for _, s := range r.Sender.Streams {
		fmt.Fprintf(&b, "[%s]   0.00-%-6.2f sec  %12s  %15s  %8d  sender\n", id(SocketNumber(s.ID)), r.Sender.Seconds, FormatBytes(s.Bytes), FormatBitrate(bps(s.Bytes, r.Sender.Seconds)), s.Segments)
		x := rx[s.ID]
		fmt.Fprintf(&b, "[%s]   0.00-%-6.2f sec  %12s  %15s  %8d  receiver (in order)\n", id(SocketNumber(s.ID)), r.Receiver.Seconds, FormatBytes(x.InOrderBytes), FormatBitrate(bps(x.InOrderBytes, r.Receiver.Seconds)), x.Segments)
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
