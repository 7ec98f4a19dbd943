package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/xdpio/xdpio/bench/iperf3"
)

// TCPIntervalHeader is the column header of a TCP test's interval lines
// without a sender's figures (a receiver's), as iperf3's.
const TCPIntervalHeader = "[ ID] Interval           Transfer     Bitrate\n"

// TCPSenderIntervalHeader is the column header of a TCP sender's
// interval lines, with its retransmissions and congestion window, as
// iperf3's.
const TCPSenderIntervalHeader = "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n"

// TCPInterval is a TCP test's part of an IntervalStream.
type TCPInterval struct {
	// TCP marks a TCP test's figures.
	TCP bool `json:"-"`
	// HasTCPInfo is set on a sender's figures when its stack tells its
	// retransmissions and window (iperf3's sender_has_retransmits): the
	// fields below are then iperf3's (a sum has Retransmits only).
	HasTCPInfo bool `json:"-"`
	// Retransmits are the segments sent again during the interval.
	Retransmits int64 `json:"retransmits"`
	// SndCwnd and SndWnd are the congestion window and the peer's receive
	// window in bytes at the interval's end (SndWnd 0 when the stack does
	// not tell it: netstack).
	SndCwnd uint64 `json:"snd_cwnd"`
	SndWnd  uint64 `json:"snd_wnd"`
	// RTT and RTTVar are the smoothed round-trip time and its variation
	// in µs, PMTU the path MTU, at the interval's end.
	RTT    int64 `json:"rtt"`
	RTTVar int64 `json:"rttvar"`
	PMTU   int   `json:"pmtu"`
}

// TCPSummary is a TCP test's part of a Summary: the sender's figures.
type TCPSummary struct {
	// HasRetransmits is set when the sender's stack told its
	// retransmissions (iperf3's sender_has_retransmits).
	HasRetransmits bool `json:"-"`
	// Retransmits are the segments the sender sent again.
	Retransmits int64 `json:"retransmits"`
	// MaxSndCwnd and MaxSndWnd are the largest windows the sender's
	// intervals saw, in bytes; MaxRTT, MinRTT and MeanRTT their RTTs in
	// µs. A sender at the other end does not send them: they are 0 then,
	// as in iperf3's report.
	MaxSndCwnd uint64 `json:"max_snd_cwnd"`
	MaxSndWnd  uint64 `json:"max_snd_wnd"`
	MaxRTT     int64  `json:"max_rtt"`
	MinRTT     int64  `json:"min_rtt"`
	MeanRTT    int64  `json:"mean_rtt"`
}

// tcpJSON writes a TCP interval's figures with iperf3 -J's fields: a
// sender's stream with its retransmissions, window, RTT and path MTU, a
// sender's sum with its retransmissions, a receiver's without.
func (s IntervalStream) tcpJSON() ([]byte, error) {
	switch {
	case s.HasTCPInfo && s.Socket != 0:
		return json.Marshal(struct {
			Socket        int     `json:"socket"`
			Start         float64 `json:"start"`
			End           float64 `json:"end"`
			Seconds       float64 `json:"seconds"`
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int64   `json:"retransmits"`
			SndCwnd       uint64  `json:"snd_cwnd"`
			SndWnd        uint64  `json:"snd_wnd"`
			RTT           int64   `json:"rtt"`
			RTTVar        int64   `json:"rttvar"`
			PMTU          int     `json:"pmtu"`
			Omitted       bool    `json:"omitted"`
			Sender        bool    `json:"sender"`
		}{s.Socket, s.Start, s.End, s.Seconds, s.Bytes, s.BitsPerSecond, s.Retransmits, s.SndCwnd, s.SndWnd, s.RTT, s.RTTVar, s.PMTU, s.Omitted, s.Sender})
	case s.HasTCPInfo:
		return json.Marshal(struct {
			Start         float64 `json:"start"`
			End           float64 `json:"end"`
			Seconds       float64 `json:"seconds"`
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int64   `json:"retransmits"`
			Omitted       bool    `json:"omitted"`
			Sender        bool    `json:"sender"`
		}{s.Start, s.End, s.Seconds, s.Bytes, s.BitsPerSecond, s.Retransmits, s.Omitted, s.Sender})
	}
	return json.Marshal(struct {
		Socket        int     `json:"socket,omitempty"`
		Start         float64 `json:"start"`
		End           float64 `json:"end"`
		Seconds       float64 `json:"seconds"`
		Bytes         uint64  `json:"bytes"`
		BitsPerSecond float64 `json:"bits_per_second"`
		Omitted       bool    `json:"omitted"`
		Sender        bool    `json:"sender"`
	}{s.Socket, s.Start, s.End, s.Seconds, s.Bytes, s.BitsPerSecond, s.Omitted, s.Sender})
}

// tcpSummaryJSON is a TCP total as -J writes it: a sender's with its
// retransmissions (and, for a stream, its windows and RTTs) when it has
// them, a receiver's with bytes only.
type tcpSummaryJSON struct {
	Socket        int     `json:"socket,omitempty"`
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   *int64  `json:"retransmits,omitempty"`
	MaxSndCwnd    *uint64 `json:"max_snd_cwnd,omitempty"`
	MaxSndWnd     *uint64 `json:"max_snd_wnd,omitempty"`
	MaxRTT        *int64  `json:"max_rtt,omitempty"`
	MinRTT        *int64  `json:"min_rtt,omitempty"`
	MeanRTT       *int64  `json:"mean_rtt,omitempty"`
	Sender        bool    `json:"sender"`
}

func (s Summary) tcpJSON(sender bool) tcpSummaryJSON {
	j := tcpSummaryJSON{Socket: s.Socket, Start: s.Start, End: s.End, Seconds: s.Seconds, Bytes: s.Bytes, BitsPerSecond: s.BitsPerSecond, Sender: s.Sender}
	if sender && s.HasRetransmits {
		j.Retransmits = &s.Retransmits
		if s.Socket != 0 {
			j.MaxSndCwnd, j.MaxSndWnd, j.MaxRTT, j.MinRTT, j.MeanRTT = &s.MaxSndCwnd, &s.MaxSndWnd, &s.MaxRTT, &s.MinRTT, &s.MeanRTT
		}
	}
	return j
}

// tcpJSON writes a TCP test's totals with iperf3 -J's fields: each
// stream's sender and receiver figures, sum_sent and sum_received (no
// sum), the CPU use and both ends' congestion control, and xdpio's
// additions.
func (e ReportEnd) tcpJSON() ([]byte, error) {
	type endStream struct {
		Sender   tcpSummaryJSON `json:"sender"`
		Receiver tcpSummaryJSON `json:"receiver"`
	}
	var streams []endStream
	if e.Streams != nil {
		streams = make([]endStream, 0, len(e.Streams))
	}
	for _, s := range e.Streams {
		var es endStream
		if s.Sender != nil {
			es.Sender = s.Sender.tcpJSON(true)
		}
		if s.Receiver != nil {
			es.Receiver = s.Receiver.tcpJSON(false)
		}
		streams = append(streams, es)
	}
	return json.Marshal(struct {
		Streams            []endStream    `json:"streams"`
		SumSent            tcpSummaryJSON `json:"sum_sent"`
		SumReceived        tcpSummaryJSON `json:"sum_received"`
		CPU                CPUUtil        `json:"cpu_utilization_percent"`
		SenderCongestion   string         `json:"sender_tcp_congestion,omitempty"`
		ReceiverCongestion string         `json:"receiver_tcp_congestion,omitempty"`
		HostCPU            *HostCPU       `json:"host_cpu,omitempty"`
		TCPStackCounters   any            `json:"tcp_stack_counters,omitempty"`
	}{Streams: streams, SumSent: e.SumSent.tcpJSON(true), SumReceived: e.SumReceived.tcpJSON(false), CPU: e.CPU,
		SenderCongestion: e.SenderCongestion, ReceiverCongestion: e.ReceiverCongestion, HostCPU: e.HostCPU,
		TCPStackCounters: nilIfNone(e.TCPStackCounters)})
}

// nilIfNone makes a nil pointer an untyped nil, which omitempty leaves
// out of an any field.
func nilIfNone[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

// tcpAgg is what a TCP sender's intervals saw of one stream's window and
// RTT, for its end summary.
type tcpAgg struct {
	maxCwnd, maxWnd        uint64
	maxRTT, minRTT, sumRTT int64
	nRTT                   int64
}

func (a *tcpAgg) add(iv TCPInterval) {
	a.maxCwnd = max(a.maxCwnd, iv.SndCwnd)
	a.maxWnd = max(a.maxWnd, iv.SndWnd)
	a.maxRTT = max(a.maxRTT, iv.RTT)
	if a.nRTT == 0 || iv.RTT < a.minRTT {
		a.minRTT = iv.RTT
	}
	a.sumRTT += iv.RTT
	a.nRTT++
}

// buildTCPEnd combines a TCP test's sender's and receiver's results;
// localSender tells which of the two is this end, agg is what the local
// sender's intervals saw of each stream (nil at a receiver).
func buildTCPEnd(sent, recv iperf3.Results, localSender bool, agg map[int]*tcpAgg) ReportEnd {
	e := ReportEnd{TCP: true, SenderCongestion: sent.CongestionUsed, ReceiverCongestion: recv.CongestionUsed}
	rx := map[int]iperf3.StreamResults{}
	for _, s := range recv.Streams {
		rx[s.ID] = s
	}
	hasRetr := sent.SenderHasRetransmits == 1
	ss := Summary{Sender: localSender, TCPSummary: TCPSummary{HasRetransmits: hasRetr}}
	sr := Summary{Sender: localSender}
	for _, s := range sent.Streams {
		r := rx[s.ID]
		secs, rsecs := s.EndTime-s.StartTime, r.EndTime-r.StartTime
		snd := Summary{Socket: SocketNumber(s.ID), End: secs, Seconds: secs, Bytes: s.Bytes, BitsPerSecond: bps(s.Bytes, secs), Sender: localSender,
			TCPSummary: TCPSummary{HasRetransmits: hasRetr, Retransmits: max(s.Retransmits, 0)}}
		if a := agg[s.ID]; a != nil && a.nRTT > 0 {
			snd.MaxSndCwnd, snd.MaxSndWnd, snd.MaxRTT, snd.MinRTT, snd.MeanRTT = a.maxCwnd, a.maxWnd, a.maxRTT, a.minRTT, a.sumRTT/a.nRTT
		}
		rcv := Summary{Socket: snd.Socket, End: rsecs, Seconds: rsecs, Bytes: r.Bytes, BitsPerSecond: bps(r.Bytes, rsecs), Sender: localSender}
		e.Streams = append(e.Streams, EndStream{Sender: &snd, Receiver: &rcv})
		ss.Bytes += s.Bytes
		ss.Retransmits += snd.Retransmits
		ss.End = max(ss.End, secs)
		sr.Bytes += r.Bytes
		sr.End = max(sr.End, rsecs)
	}
	ss.Seconds, sr.Seconds = ss.End, sr.End
	ss.BitsPerSecond, sr.BitsPerSecond = bps(ss.Bytes, ss.Seconds), bps(sr.Bytes, sr.Seconds)
	e.SumSent, e.SumReceived = ss, sr
	e.Sum = Summary{End: sr.End, Seconds: sr.Seconds, Bytes: ss.Bytes, BitsPerSecond: ss.BitsPerSecond, Sender: localSender}
	local, remote := recv, sent
	if localSender {
		local, remote = sent, recv
	}
	e.CPU = CPUUtil{HostTotal: local.CPUUtilTotal, HostUser: local.CPUUtilUser, HostSystem: local.CPUUtilSystem,
		RemoteTotal: remote.CPUUtilTotal, RemoteUser: remote.CPUUtilUser, RemoteSystem: remote.CPUUtilSystem}
	return e
}

// tcpRow prints one TCP line as iperf3 does: a sender's with its
// retransmissions (retr ≥ 0) and window (cwnd > 0), then tag.
func tcpRow(w io.Writer, unit byte, sid int, start, end float64, bytes uint64, rate float64, retr int64, cwnd uint64, tag string) error {
	r, ok := FormatRate(rate, unit)
	if !ok {
		r = FormatBitrate(rate)
	}
	var tail string
	switch {
	case retr >= 0 && cwnd > 0:
		tail = fmt.Sprintf("  %4d  %10s", retr, FormatBytes(cwnd))
	case retr >= 0:
		tail = fmt.Sprintf("  %4d", retr)
	}
	if tag != "" {
		if retr < 0 {
			tail = "      "
		}
		tail += "  " + tag
	}
	_, err := fmt.Fprintf(w, "[%s] %6.2f-%-6.2f sec  %12s  %15s%s\n", id(sid), start, end, FormatBytes(bytes), r, tail)
	return err
}

// writeTCPInterval prints a TCP interval: a line per stream and, with
// more than one, a [SUM] line; a sender's with its retransmissions and
// window (the sum's with retransmissions only), as iperf3 does.
func writeTCPInterval(w io.Writer, iv Interval, unit byte) error {
	for _, s := range iv.Streams {
		retr, cwnd := int64(-1), uint64(0)
		if s.HasTCPInfo {
			retr, cwnd = s.Retransmits, s.SndCwnd
		}
		if err := tcpRow(w, unit, s.Socket, s.Start, s.End, s.Bytes, s.BitsPerSecond, retr, cwnd, ""); err != nil {
			return err
		}
	}
	if len(iv.Streams) > 1 {
		s := iv.Sum
		retr := int64(-1)
		if s.HasTCPInfo {
			retr = s.Retransmits
		}
		return tcpRow(w, unit, 0, s.Start, s.End, s.Bytes, s.BitsPerSecond, retr, 0, "")
	}
	return nil
}

// writeTCPText prints a TCP test's report as iperf3 does: the intervals,
// then each stream's sender and receiver lines (the sender's with its
// retransmissions when known) and, with more than one stream, the [SUM]
// lines; the CPU use; xdpio's stack line.
func (r *Report) writeTCPText(w io.Writer, unit byte) error {
	var b strings.Builder
	for i, iv := range r.Intervals {
		if i == 0 {
			b.WriteString(iv.Header())
		}
		writeTCPInterval(&b, iv, unit)
	}
	b.WriteString("- - - - - - - - - - - - - - - - - - - - - - - - -\n")
	ss, sr := r.End.SumSent, r.End.SumReceived
	if ss.HasRetransmits {
		b.WriteString("[ ID] Interval           Transfer     Bitrate         Retr\n")
	} else {
		b.WriteString(TCPIntervalHeader)
	}
	retr := func(s Summary) int64 {
		if s.HasRetransmits {
			return s.Retransmits
		}
		return -1
	}
	for _, s := range r.End.Streams {
		if s.Sender != nil {
			x := *s.Sender
			tcpRow(&b, unit, x.Socket, 0, x.End, x.Bytes, x.BitsPerSecond, retr(x), 0, "sender")
		}
		if s.Receiver != nil {
			x := *s.Receiver
			tcpRow(&b, unit, x.Socket, 0, x.End, x.Bytes, x.BitsPerSecond, -1, 0, "receiver")
		}
	}
	if len(r.End.Streams) > 1 {
		tcpRow(&b, unit, 0, 0, ss.End, ss.Bytes, ss.BitsPerSecond, retr(ss), 0, "sender")
		tcpRow(&b, unit, 0, 0, sr.End, sr.Bytes, sr.BitsPerSecond, -1, 0, "receiver")
	}
	r.writeTail(&b)
	if c := r.End.TCPStackCounters; c != nil {
		fmt.Fprintf(&b, "netstack: %d segments in, %d out, %d retransmitted (%d fast, %d timeouts); frames %d in (%d batches, %d packets after GRO, %d dropped by the kernel before the sockets), %d out (%d cut by TSO), %d bad checksums, %d not sent\n",
			c.InSegs, c.OutSegs, c.RetransSegs, c.FastRetrans, c.Timeouts, c.RXFrames, c.RXBatches, c.RXPackets, c.RXSocketDropped, c.TXFrames, c.TXSegmented, c.RXBadChecksum, c.TXDropped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
