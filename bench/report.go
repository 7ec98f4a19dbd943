package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/place"
	"github.com/xdpio/xdpio/bench/plane"
)

// Report is the outcome of a test at one end, in a schema close to
// iperf3's -J output (start, intervals, end) where the meanings match.
type Report struct {
	Start     ReportStart `json:"start"`
	Intervals []Interval  `json:"intervals"`
	End       ReportEnd   `json:"end"`
	// Error is set when the test failed; the rest holds what was measured.
	Error string `json:"error,omitempty"`
}

// ReportStart describes the test as it began.
type ReportStart struct {
	Connected []Connected `json:"connected"`
	Version   string      `json:"version"`
	// SystemInfo is this end's system as iperf3 prints it: uname's
	// system, node, release, version and machine.
	SystemInfo   string    `json:"system_info"`
	Timestamp    Timestamp `json:"timestamp"`
	ConnectingTo *HostPort `json:"connecting_to,omitempty"`       // client only
	Accepted     *HostPort `json:"accepted_connection,omitempty"` // server only
	Cookie       string    `json:"cookie"`
	// TargetBitrate is the per-stream target in bits/s, 0 for no limit,
	// as iperf3 repeats it here (and in TestStart).
	TargetBitrate uint64 `json:"target_bitrate"`
	// SocketBuffers is the first stream's socket buffers, with a
	// kernel-socket data plane only (plane.BufferedConn): nil, and not in
	// the JSON, with an AF_XDP one, which has no socket buffer on its
	// path.
	*SocketBuffers
	TestStart TestParams `json:"test_start"`
	// Placement is each stream's source port and the server RX queue it
	// was placed on (client with a plane.Placer only; not in iperf3's report).
	Placement []place.Placement `json:"placement,omitempty"`
	// TCPMSSDefault is, in a TCP test, what iperf3 reports as
	// tcp_mss_default: the control connection's MSS at a client, 0 at a
	// server.
	TCPMSSDefault *int `json:"tcp_mss_default,omitempty"`
	// TCPStack is, in a TCP test, the stack of the data connections and
	// the settings it ran with (not in iperf3's report).
	TCPStack *plane.TCPStack `json:"tcp_stack,omitempty"`
}

// SocketBuffers is a kernel socket's buffer sizes, as iperf3 reports
// its streams' in start.
type SocketBuffers struct {
	// SockBufsize is the size the data plane asked for (iperf3's -w; 0
	// for none).
	SockBufsize int `json:"sock_bufsize"`
	// SndbufActual and RcvbufActual are SO_SNDBUF and SO_RCVBUF as the
	// kernel reports them.
	SndbufActual int `json:"sndbuf_actual"`
	RcvbufActual int `json:"rcvbuf_actual"`
}

// socketBuffers returns pc's socket buffers, or nil when pc is not a
// kernel socket or cannot tell.
func socketBuffers(pc plane.PacketConn) *SocketBuffers {
	b, ok := pc.(plane.BufferedConn)
	if !ok {
		return nil
	}
	req, snd, rcv, err := b.SocketBuffers()
	if err != nil {
		return nil
	}
	return &SocketBuffers{SockBufsize: req, SndbufActual: snd, RcvbufActual: rcv}
}

// Connected is one stream's addresses. Socket is the stream's number as
// iperf3 shows it, in its text and its JSON alike: its socket's file
// descriptor, 5, 7, 9 … for a UDP test's streams (SocketNumber).
type Connected struct {
	Socket     int    `json:"socket"`
	LocalHost  string `json:"local_host"`
	LocalPort  int    `json:"local_port"`
	RemoteHost string `json:"remote_host"`
	RemotePort int    `json:"remote_port"`
}

// Timestamp is when the test started.
type Timestamp struct {
	// Time is in iperf3's form, "Mon, 07 Dec 2026 04:12:12 GMT".
	Time     string `json:"time"`
	Timesecs int64  `json:"timesecs"`
}

// newTimestamp is t as iperf3 writes it (strftime's "%a, %d %b %Y
// %H:%M:%S %Z" of gmtime).
func newTimestamp(t time.Time) Timestamp {
	return Timestamp{Time: t.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT"), Timesecs: t.Unix()}
}

// HostPort is an address.
type HostPort struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// TestParams is the test's parameters (iperf3's test_start).
type TestParams struct {
	Protocol      string `json:"protocol"`
	NumStreams    int    `json:"num_streams"`
	Blksize       int    `json:"blksize"`
	Omit          int    `json:"omit"`
	Duration      int    `json:"duration"`
	Bytes         uint64 `json:"bytes"`
	Blocks        uint64 `json:"blocks"`
	Reverse       int    `json:"reverse"`
	TOS           int    `json:"tos"`
	TargetBitrate uint64 `json:"target_bitrate"`
}

// Interval is one reporting period: each stream and their sum.
type Interval struct {
	Streams []IntervalStream `json:"streams"`
	Sum     IntervalStream   `json:"sum"`
	// TCP marks a TCP test's interval, whose figures are TCP's.
	TCP bool `json:"-"`
}

// IntervalStream is a stream's (or the sum's) figures over one interval,
// seen from this end. A sender reports what it sent; a receiver what it
// received, its losses (sequence gaps) and jitter.
//
// A receiver's Packets is iperf3's: the datagrams the stream's sequence
// numbers say were sent in the interval, lost ones included, so that
// LostPackets/Packets is the loss. ReceivedPackets (Packets −
// LostPackets) is what arrived; the text's Packets and Pkts/s columns
// show it.
type IntervalStream struct {
	Socket        int     `json:"socket,omitempty"`
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Packets       int64   `json:"packets"`
	JitterMS      float64 `json:"jitter_ms"`
	LostPackets   int64   `json:"lost_packets"`
	LostPercent   float64 `json:"lost_percent"`
	// ReceivedPackets is a receiver's datagrams received (not in
	// iperf3's report).
	ReceivedPackets int64 `json:"received_packets"`
	Omitted         bool  `json:"omitted"`
	Sender          bool  `json:"sender"`
	// TCPFigures are a TCP test's sender's: its retransmissions in the
	// interval, its window, RTT and path MTU at its end (TCPInterval).
	TCPInterval
}

// MarshalJSON writes the figures with iperf3 -J's fields: a sender's
// without jitter and losses, which iperf3 leaves out of them, and a
// receiver's with those and received_packets.
func (s IntervalStream) MarshalJSON() ([]byte, error) {
	if s.TCP {
		return s.tcpJSON()
	}
	if s.Sender {
		return json.Marshal(struct {
			Socket        int     `json:"socket,omitempty"`
			Start         float64 `json:"start"`
			End           float64 `json:"end"`
			Seconds       float64 `json:"seconds"`
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Packets       int64   `json:"packets"`
			Omitted       bool    `json:"omitted"`
			Sender        bool    `json:"sender"`
		}{s.Socket, s.Start, s.End, s.Seconds, s.Bytes, s.BitsPerSecond, s.Packets, s.Omitted, s.Sender})
	}
	// In iperf3's order.
	return json.Marshal(struct {
		Socket          int     `json:"socket,omitempty"`
		Start           float64 `json:"start"`
		End             float64 `json:"end"`
		Seconds         float64 `json:"seconds"`
		Bytes           uint64  `json:"bytes"`
		BitsPerSecond   float64 `json:"bits_per_second"`
		JitterMS        float64 `json:"jitter_ms"`
		LostPackets     int64   `json:"lost_packets"`
		Packets         int64   `json:"packets"`
		LostPercent     float64 `json:"lost_percent"`
		ReceivedPackets int64   `json:"received_packets"`
		Omitted         bool    `json:"omitted"`
		Sender          bool    `json:"sender"`
	}{s.Socket, s.Start, s.End, s.Seconds, s.Bytes, s.BitsPerSecond, s.JitterMS, s.LostPackets, s.Packets, s.LostPercent,
		s.ReceivedPackets, s.Omitted, s.Sender})
}

// ReportEnd holds the totals of both ends, as exchanged at the end.
type ReportEnd struct {
	Streams     []EndStream `json:"streams"`
	Sum         Summary     `json:"sum"`
	SumSent     Summary     `json:"sum_sent"`
	SumReceived Summary     `json:"sum_received"`
	CPU         CPUUtil     `json:"cpu_utilization_percent"`
	// HostCPU is this end's CPU use per core and of its data threads
	// (not in iperf3's report).
	HostCPU *HostCPU `json:"host_cpu,omitempty"`
	// RXQueues is what each RX queue's AF_XDP socket at this end took
	// during the test: the RSS spread at a server, what a client's
	// sockets received (-R) at a client (AF_XDP data planes only; not in
	// iperf3's report).
	RXQueues []plane.QueueCount `json:"rx_queues,omitempty"`
	// TCP marks a TCP test's totals: iperf3's TCP form (streams' sender
	// and receiver, no sum).
	TCP bool `json:"-"`
	// SenderCongestion and ReceiverCongestion are, in a TCP test, the
	// congestion control of each end's data connections, when known
	// (iperf3's sender_tcp_congestion and receiver_tcp_congestion).
	SenderCongestion   string `json:"sender_tcp_congestion,omitempty"`
	ReceiverCongestion string `json:"receiver_tcp_congestion,omitempty"`
	// TCPStackCounters is what this end's own TCP stack counted during a
	// TCP test (netstack only; not in iperf3's report).
	TCPStackCounters *plane.TCPStackCounters `json:"tcp_stack_counters,omitempty"`
}

// EndStream wraps a stream's summary under its protocol, as iperf3 does.
type EndStream struct {
	UDP Summary `json:"udp"`
	// Sender is, in a TCP test, the sender's figures of the stream
	// (UDP is then unused), as iperf3's end.streams[].sender.
	Sender *Summary `json:"sender,omitempty"`
	// Receiver is what the receiving end counted of the stream, over
	// its own window (iperf3's text shows it as the stream's receiver
	// line; its JSON has it for TCP streams only). Its Sender is false,
	// as SumReceived's.
	Receiver *Summary `json:"receiver,omitempty"`
}

// Summary is a stream's (or a sum's) totals: bytes and packets as sent, or
// as received for SumReceived, and the receiver's losses and jitter.
//
// Packets keeps iperf3's meaning: in a receiver's figures (SumReceived,
// EndStream.Receiver) it is the datagrams the receiver's sequence numbers
// say were sent, lost ones included; ReceivedPackets (Packets −
// LostPackets) is what arrived.
type Summary struct {
	Socket        int     `json:"socket,omitempty"`
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	JitterMS      float64 `json:"jitter_ms"`
	LostPackets   int64   `json:"lost_packets"`
	Packets       int64   `json:"packets"`
	LostPercent   float64 `json:"lost_percent"`
	// OutOfOrder is in a stream's summaries only (iperf3 has it in
	// end.streams[].udp, not in the sums).
	OutOfOrder int64 `json:"out_of_order"`
	// ReceivedPackets is the datagrams received, in a receiver's figures
	// only (in JSON: end.streams[].receiver and end.sum_received; not in
	// iperf3's report).
	ReceivedPackets int64 `json:"received_packets"`
	Sender          bool  `json:"sender"`
	// TCPSummary is a TCP test's sender's figures.
	TCPSummary
}

// summaryJSON is a Summary as -J writes it: out_of_order and
// received_packets where they belong.
type summaryJSON struct {
	Socket          int     `json:"socket,omitempty"`
	Start           float64 `json:"start"`
	End             float64 `json:"end"`
	Seconds         float64 `json:"seconds"`
	Bytes           uint64  `json:"bytes"`
	BitsPerSecond   float64 `json:"bits_per_second"`
	JitterMS        float64 `json:"jitter_ms"`
	LostPackets     int64   `json:"lost_packets"`
	Packets         int64   `json:"packets"`
	LostPercent     float64 `json:"lost_percent"`
	OutOfOrder      *int64  `json:"out_of_order,omitempty"`
	ReceivedPackets *int64  `json:"received_packets,omitempty"`
	Sender          bool    `json:"sender"`
}

func (s Summary) json(outOfOrder, received bool) summaryJSON {
	j := summaryJSON{Socket: s.Socket, Start: s.Start, End: s.End, Seconds: s.Seconds, Bytes: s.Bytes, BitsPerSecond: s.BitsPerSecond,
		JitterMS: s.JitterMS, LostPackets: s.LostPackets, Packets: s.Packets, LostPercent: s.LostPercent, Sender: s.Sender}
	if outOfOrder {
		j.OutOfOrder = &s.OutOfOrder
	}
	if received {
		j.ReceivedPackets = &s.ReceivedPackets
	}
	return j
}

// MarshalJSON writes the totals with iperf3 -J's fields: out_of_order
// in the streams' summaries only, and received_packets (not in iperf3's
// report) in the receiver's figures only.
func (e ReportEnd) MarshalJSON() ([]byte, error) {
	if e.TCP {
		return e.tcpJSON()
	}
	type endStream struct {
		UDP      summaryJSON  `json:"udp"`
		Receiver *summaryJSON `json:"receiver,omitempty"`
	}
	var streams []endStream
	if e.Streams != nil {
		streams = make([]endStream, 0, len(e.Streams))
	}
	for _, s := range e.Streams {
		es := endStream{UDP: s.UDP.json(true, false)}
		if s.Receiver != nil {
			r := s.Receiver.json(true, true)
			es.Receiver = &r
		}
		streams = append(streams, es)
	}
	return json.Marshal(struct {
		Streams     []endStream        `json:"streams"`
		Sum         summaryJSON        `json:"sum"`
		SumSent     summaryJSON        `json:"sum_sent"`
		SumReceived summaryJSON        `json:"sum_received"`
		CPU         CPUUtil            `json:"cpu_utilization_percent"`
		HostCPU     *HostCPU           `json:"host_cpu,omitempty"`
		RXQueues    []plane.QueueCount `json:"rx_queues,omitempty"`
	}{streams, e.Sum.json(false, false), e.SumSent.json(false, false), e.SumReceived.json(false, true), e.CPU, e.HostCPU, e.RXQueues})
}

// CPUUtil is the CPU use of both ends' processes over the test, in
// percent of one core (user and system time over wall time, as iperf3
// computes it; above 100 when several threads ran).
type CPUUtil struct {
	HostTotal    float64 `json:"host_total"`
	HostUser     float64 `json:"host_user"`
	HostSystem   float64 `json:"host_system"`
	RemoteTotal  float64 `json:"remote_total"`
	RemoteUser   float64 `json:"remote_user"`
	RemoteSystem float64 `json:"remote_system"`
}

func lostPercent(lost, packets int64) float64 {
	if packets <= 0 {
		return 0
	}
	return 100 * float64(lost) / float64(packets)
}

func bps(bytes uint64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) * 8 / secs
}

// intervalStream computes a stream's figures between two counter snapshots.
func intervalStream(id int, sender bool, prev, cur Counters, start, end float64) IntervalStream {
	iv := IntervalStream{Socket: SocketNumber(id), Start: start, End: end, Seconds: end - start, Sender: sender}
	if sender {
		iv.Bytes = cur.SentBytes - prev.SentBytes
		iv.Packets = cur.SentPackets - prev.SentPackets
	} else {
		iv.Bytes = cur.Bytes - prev.Bytes
		iv.Packets = cur.Packets - prev.Packets
		iv.LostPackets = cur.Lost - prev.Lost
		iv.ReceivedPackets = iv.Packets - iv.LostPackets
		iv.JitterMS = cur.Jitter * 1000
		iv.LostPercent = lostPercent(iv.LostPackets, iv.Packets)
	}
	iv.BitsPerSecond = bps(iv.Bytes, iv.Seconds)
	return iv
}

// sumIntervals adds streams' figures; jitter is their mean, as in iperf3.
func sumIntervals(ss []IntervalStream) IntervalStream {
	var sum IntervalStream
	for i, s := range ss {
		if i == 0 {
			sum.Start, sum.End, sum.Seconds, sum.Sender = s.Start, s.End, s.Seconds, s.Sender
		}
		sum.Bytes += s.Bytes
		sum.Packets += s.Packets
		sum.LostPackets += s.LostPackets
		sum.ReceivedPackets += s.ReceivedPackets
		sum.JitterMS += s.JitterMS
	}
	if len(ss) > 0 {
		sum.JitterMS /= float64(len(ss))
	}
	sum.LostPercent = lostPercent(sum.LostPackets, sum.Packets)
	sum.BitsPerSecond = bps(sum.Bytes, sum.Seconds)
	return sum
}

// intervalReporter snapshots a running test's streams every period.
type intervalReporter struct {
	run    *dataRun
	every  time.Duration
	notify func(Interval)

	mu      sync.Mutex
	prev    map[*stream]Counters
	prevT   float64
	ivs     []Interval
	quit    chan struct{}
	stopped chan struct{}
}

func newIntervalReporter(run *dataRun, every time.Duration, notify func(Interval)) *intervalReporter {
	return &intervalReporter{run: run, every: every, notify: notify, prev: map[*stream]Counters{}}
}

func (ir *intervalReporter) begin() {
	ir.quit = make(chan struct{})
	ir.stopped = make(chan struct{})
	if ir.every <= 0 {
		close(ir.stopped)
		return
	}
	go func() {
		defer close(ir.stopped)
		t := time.NewTicker(ir.every)
		defer t.Stop()
		for {
			select {
			case <-ir.quit:
				return
			case now := <-t.C:
				ir.take(now.Sub(ir.run.start).Seconds())
			}
		}
	}()
}

func (ir *intervalReporter) take(at float64) {
	ir.mu.Lock()
	var iv Interval
	for _, s := range ir.run.allStreams() {
		if ir.run.tcp && ir.run.sender {
			s.sample()
		}
		cur := s.counters()
		is := intervalStream(s.id, ir.run.sender, ir.prev[s], cur, ir.prevT, at)
		if ir.run.tcp {
			is = tcpIntervalStream(s, ir.run.sender, is, ir.prev[s], cur)
		}
		iv.Streams = append(iv.Streams, is)
		ir.prev[s] = cur
	}
	iv.Sum = sumIntervals(iv.Streams)
	if ir.run.tcp {
		iv.TCP = true
		iv.Sum = sumTCPIntervals(iv.Sum, iv.Streams)
	}
	ir.prevT = at
	ir.ivs = append(ir.ivs, iv)
	ir.mu.Unlock()
	if ir.notify != nil {
		ir.notify(iv)
	}
}

func (ir *intervalReporter) changed() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	for _, s := range ir.run.allStreams() {
		c, p := s.counters(), ir.prev[s]
		if c.RecvCounters != p.RecvCounters || c.SentBytes != p.SentBytes || c.SentPackets != p.SentPackets {
			return true
		}
	}
	return false
}

// finish stops the ticker and takes the last, partial interval when it is
// at least a tenth of a period long or counted something, so that the
// intervals add up to the totals.
func (ir *intervalReporter) finish() []Interval {
	if ir.quit == nil {
		return nil
	}
	select {
	case <-ir.quit:
	default:
		close(ir.quit)
	}
	<-ir.stopped
	if ir.every > 0 {
		end := ir.run.end
		if end.IsZero() {
			end = time.Now()
		}
		// A window that ends at TEST_END may end before the last tick.
		at := max(end.Sub(ir.run.start).Seconds(), ir.prevT)
		if at-ir.prevT >= ir.every.Seconds()/10 || ir.changed() {
			ir.take(at)
		}
	}
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.ivs
}

// buildEnd combines the sender's and the receiver's results. localSender
// tells which of the two is this end; outOfOrder comes from the local
// receiver's counters when there is one.
func buildEnd(sent, recv iperf3.Results, localSender bool, ooo map[int]int64) ReportEnd {
	var e ReportEnd
	rx := map[int]iperf3.StreamResults{}
	for _, s := range recv.Streams {
		rx[s.ID] = s
	}
	var ss, sr Summary
	ss.Sender, sr.Sender = true, false
	var jit float64
	for _, s := range sent.Streams {
		r := rx[s.ID]
		secs := s.EndTime - s.StartTime
		u := Summary{Socket: SocketNumber(s.ID), Start: 0, End: secs, Seconds: secs, Bytes: s.Bytes, BitsPerSecond: bps(s.Bytes, secs),
			JitterMS: r.Jitter * 1000, LostPackets: r.Errors, Packets: s.Packets, LostPercent: lostPercent(r.Errors, s.Packets),
			OutOfOrder: ooo[s.ID], Sender: localSender}
		rsecs := r.EndTime - r.StartTime
		// The receiver's figures: Sender false, as in sum_received.
		rs := Summary{Socket: u.Socket, End: rsecs, Seconds: rsecs, Bytes: r.Bytes, BitsPerSecond: bps(r.Bytes, rsecs),
			JitterMS: u.JitterMS, LostPackets: r.Errors, Packets: r.Packets, LostPercent: lostPercent(r.Errors, r.Packets),
			OutOfOrder: u.OutOfOrder, ReceivedPackets: r.Packets - r.Errors}
		e.Streams = append(e.Streams, EndStream{UDP: u, Receiver: &rs})
		ss.Bytes += s.Bytes
		ss.Packets += s.Packets
		ss.End = max(ss.End, secs)
		sr.Bytes += r.Bytes
		sr.Packets += r.Packets
		sr.LostPackets += r.Errors
		sr.ReceivedPackets += rs.ReceivedPackets
		sr.End = max(sr.End, r.EndTime-r.StartTime)
		jit += r.Jitter * 1000
	}
	if n := len(sent.Streams); n > 0 {
		sr.JitterMS = jit / float64(n)
	}
	ss.Seconds, sr.Seconds = ss.End, sr.End
	ss.BitsPerSecond, sr.BitsPerSecond = bps(ss.Bytes, ss.Seconds), bps(sr.Bytes, sr.Seconds)
	sr.LostPercent = lostPercent(sr.LostPackets, sr.Packets)
	e.SumSent, e.SumReceived = ss, sr
	e.Sum = Summary{End: sr.End, Seconds: sr.Seconds, Bytes: ss.Bytes, BitsPerSecond: ss.BitsPerSecond, JitterMS: sr.JitterMS,
		LostPackets: sr.LostPackets, Packets: ss.Packets, LostPercent: lostPercent(sr.LostPackets, ss.Packets), Sender: localSender}
	local, remote := recv, sent
	if localSender {
		local, remote = sent, recv
	}
	e.CPU = CPUUtil{HostTotal: local.CPUUtilTotal, HostUser: local.CPUUtilUser, HostSystem: local.CPUUtilSystem,
		RemoteTotal: remote.CPUUtilTotal, RemoteUser: remote.CPUUtilUser, RemoteSystem: remote.CPUUtilSystem}
	return e
}

func senderWord(sender bool) string {
	if sender {
		return "sender"
	}
	return "receiver"
}

// iperfNumber prints v with three significant digits as iperf3 does
// (9.99, 99.9, 999), then the unit.
func iperfNumber(v float64, unit string) string {
	switch {
	case v < 9.995:
		return fmt.Sprintf("%.2f %s", v, unit)
	case v < 99.95:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// FormatBytes formats a byte count like iperf3 (KBytes, MBytes, GBytes,
// 1024-based, three significant digits: "11.9 MBytes").
func FormatBytes(b uint64) string {
	return formatUnit(float64(b), 'A', "")
}

// FormatBitrate formats bits per second like iperf3 (1000-based, three
// significant digits: "100 Mbits/sec").
func FormatBitrate(bps float64) string {
	return formatUnit(bps, 'a', "/sec")
}

// FormatRate formats bits per second in the unit of iperf3's -f: k, m, g
// or t for Kbits … Tbits (1000-based), K, M, G or T for KBytes … TBytes
// (1024-based), a or A to pick the unit from the value. It reports false
// for any other unit.
func FormatRate(bps float64, unit byte) (string, bool) {
	if !ValidFormat(unit) {
		return "", false
	}
	return formatUnit(bps, unit, "/sec"), true
}

// ValidFormat tells whether unit is one iperf3's -f accepts (or a/A,
// adaptive).
func ValidFormat(unit byte) bool {
	return strings.IndexByte("kmgtKMGTaA", unit) >= 0
}

// formatUnit formats v (bits for lowercase units, bytes for A; a rate in
// bits is turned into bytes for K, M, G and T) in unit with suffix.
func formatUnit(v float64, unit byte, suffix string) string {
	names := []string{"", "K", "M", "G", "T"}
	bytesUnit := unit >= 'A' && unit <= 'Z'
	base := 1000.0
	if bytesUnit {
		base = 1024
		if suffix != "" { // a rate in bits/s shown in bytes/s
			v /= 8
		}
	}
	idx := strings.IndexByte("_kmgt", unit|0x20)
	if unit == 'a' || unit == 'A' {
		idx = 0
		for idx < 4 && v >= pow(base, idx+1) {
			idx++
		}
	}
	word := "bits"
	if bytesUnit {
		word = "Bytes"
	}
	return iperfNumber(v/pow(base, idx), names[idx]+word+suffix)
}

func pow(b float64, n int) float64 {
	r := 1.0
	for range n {
		r *= b
	}
	return r
}

// IntervalHeader is the column header WriteInterval's lines go under.
// On a receiver's lines Packets and Pkts/s count the datagrams received;
// Lost/Total Datagrams is iperf3's: the losses and the datagrams the
// sequence numbers say were sent.
const IntervalHeader = "[ ID] Interval           Transfer     Bitrate         Packets   Pkts/s   Jitter    Lost/Total Datagrams\n"

// formatSI writes a rate with k/M/G prefixes (powers of 1000).
func formatSI(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// SocketNumber is the number iperf3's client shows for the stream the
// protocol numbers id (1, 3, 4 …, iperf3.StreamID): its socket's file
// descriptor, 5, 7, 9 … for the streams of a UDP test. Reports use it
// in text and JSON alike.
func SocketNumber(id int) int {
	switch {
	case id == 1:
		return 5
	case id > 2:
		return 5 + 2*(id-2)
	}
	return id
}

// id is a row's label: a stream's socket number, or SUM for 0.
func id(socket int) string {
	if socket == 0 {
		return "SUM"
	}
	return fmt.Sprintf("%3d", socket)
}

// line prints an end-of-test line, a sender's or a receiver's.
func line(w io.Writer, unit byte, sid int, end float64, bytes uint64, rate float64, packets int64, sender bool, jitter float64, lost int64, tag string) error {
	return row(w, unit, sid, 0, end, bytes, rate, packets, !sender, jitter, lost, tag)
}

// row prints one line. packets is iperf3's count: sent, or at a
// receiver (losses set) the datagrams its sequence numbers say were
// sent; then the line has the receiver's jitter and its losses over
// that total, iperf3's Lost/Total, and the Packets and Pkts/s columns
// count what was received: packets − lost.
func row(w io.Writer, unit byte, sid int, start, end float64, bytes uint64, rate float64, packets int64, losses bool, jitter float64, lost int64, tag string) error {
	var tail string
	shown := packets
	if losses {
		tail = fmt.Sprintf("  %.3f ms  %d/%d (%.2g%%)", jitter, lost, packets, lostPercent(lost, packets))
		shown = packets - lost
	}
	pps := "-"
	if end > start {
		pps = formatSI(float64(shown) / (end - start))
	}
	r, ok := FormatRate(rate, unit)
	if !ok {
		r = FormatBitrate(rate)
	}
	_, err := fmt.Fprintf(w, "[%s] %6.2f-%-6.2f sec  %12s  %15s  %7d  %7s%s%s\n", id(sid), start, end, FormatBytes(bytes), r, shown, pps, tail, tag)
	return err
}

// WriteInterval prints an interval as iperf3 does: a line per stream and,
// with more than one stream, a [SUM] line. Jitter and losses are a
// receiver's figures: a sender's lines have none. On a receiver's lines
// Packets and Pkts/s count the datagrams received (IntervalHeader).
func WriteInterval(w io.Writer, iv Interval) error {
	return WriteIntervalUnit(w, iv, 'a')
}

// WriteIntervalUnit is WriteInterval with bit rates in unit, as
// FormatRate takes it (iperf3's -f).
func WriteIntervalUnit(w io.Writer, iv Interval, unit byte) error {
	if iv.TCP {
		return writeTCPInterval(w, iv, unit)
	}
	for _, s := range iv.Streams {
		if err := row(w, unit, s.Socket, s.Start, s.End, s.Bytes, s.BitsPerSecond, s.Packets, !s.Sender, s.JitterMS, s.LostPackets, ""); err != nil {
			return err
		}
	}
	if len(iv.Streams) > 1 {
		s := iv.Sum
		return row(w, unit, 0, s.Start, s.End, s.Bytes, s.BitsPerSecond, s.Packets, !s.Sender, s.JitterMS, s.LostPackets, "")
	}
	return nil
}

// Header is the column header of iv's lines: IntervalHeader, or in a TCP
// test TCPIntervalHeader, or TCPSenderIntervalHeader for a sender's
// lines with its retransmissions and window.
func (iv Interval) Header() string {
	if iv.TCP {
		if iv.Sum.HasTCPInfo {
			return TCPSenderIntervalHeader
		}
		return TCPIntervalHeader
	}
	return IntervalHeader
}

// WriteText prints the whole report as text: the intervals and the
// summary, as iperf3 does: each stream's sender and receiver lines and,
// with more than one stream, the [SUM] sender and receiver lines.
// Jitter and losses are on receiver lines only, whose Packets and
// Pkts/s count the datagrams received.
func (r *Report) WriteText(w io.Writer) error {
	return r.WriteTextUnit(w, 'a')
}

// WriteTextUnit is WriteText with bit rates in unit, as FormatRate takes
// it (iperf3's -f).
func (r *Report) WriteTextUnit(w io.Writer, unit byte) error {
	if r.End.TCP {
		return r.writeTCPText(w, unit)
	}
	var b strings.Builder
	if len(r.Intervals) > 0 {
		b.WriteString(IntervalHeader)
		for _, iv := range r.Intervals {
			WriteIntervalUnit(&b, iv, unit)
		}
	}
	b.WriteString("- - - - - - - - - - - - - - - - - - - - - - - - -\n")
	b.WriteString(IntervalHeader)
	ss, sr := r.End.SumSent, r.End.SumReceived
	for _, s := range r.End.Streams {
		u := s.UDP
		line(&b, unit, u.Socket, u.End, u.Bytes, u.BitsPerSecond, u.Packets, true, 0, 0, "  sender")
		x := sr // a report from before Receiver was kept: one stream's is the sum
		if s.Receiver != nil {
			x = *s.Receiver
		} else if len(r.End.Streams) > 1 {
			continue
		}
		line(&b, unit, u.Socket, x.End, x.Bytes, x.BitsPerSecond, x.Packets, false, x.JitterMS, x.LostPackets, "  receiver")
	}
	if len(r.End.Streams) > 1 {
		line(&b, unit, 0, ss.End, ss.Bytes, ss.BitsPerSecond, ss.Packets, true, 0, 0, "  sender")
		line(&b, unit, 0, sr.End, sr.Bytes, sr.BitsPerSecond, sr.Packets, false, sr.JitterMS, sr.LostPackets, "  receiver")
	}
	r.writeTail(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTail writes the end of the text report, after the totals: CPU
// use and the error, if any.
func (r *Report) writeTail(b *strings.Builder) {
	c := r.End.CPU
	if c.HostTotal > 0 || c.RemoteTotal > 0 {
		fmt.Fprintf(b, "CPU Utilization: local/%s %.1f%% (%.1f%%u/%.1f%%s), remote/%s %.1f%% (%.1f%%u/%.1f%%s)\n",
			senderWord(r.End.Sum.Sender), c.HostTotal, c.HostUser, c.HostSystem,
			senderWord(!r.End.Sum.Sender), c.RemoteTotal, c.RemoteUser, c.RemoteSystem)
	}
	if h := r.End.HostCPU; h != nil && len(h.Cores) > 0 {
		b.WriteString("CPU     %usr   %nice    %sys %iowait    %irq   %soft  %steal  %idle\n")
		for _, k := range h.Cores {
			fmt.Fprintf(b, "%-5s %6.2f  %6.2f  %6.2f  %6.2f  %6.2f  %6.2f  %6.2f %6.2f\n", k.CPU, k.User, k.Nice, k.System, k.IOWait, k.IRQ, k.SoftIRQ, k.Steal, k.Idle)
		}
		fmt.Fprintf(b, "busy CPU time of all cores %.2f s; data threads %.2f s\n", h.BusySeconds, h.DataThreadSeconds)
	}
	if r.Error != "" {
		fmt.Fprintf(b, "error: %s\n", r.Error)
	}
}
