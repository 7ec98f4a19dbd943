package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/bench/iperf3"
)

func TestIntervalFigures(t *testing.T) {
	prev := Counters{RecvCounters: iperf3.RecvCounters{Bytes: 1000, Packets: 10, Lost: 1}}
	cur := Counters{RecvCounters: iperf3.RecvCounters{Bytes: 126000, Packets: 135, Lost: 6, Jitter: 0.0002}}
	iv := intervalStream(3, false, prev, cur, 1, 1.5)
	// Stream 3 is iperf3's socket 7, in JSON as in text.
	want := IntervalStream{Socket: 7, Start: 1, End: 1.5, Seconds: 0.5, Bytes: 125000, BitsPerSecond: 2e6, Packets: 125,
		JitterMS: 0.2, LostPackets: 5, LostPercent: 4, ReceivedPackets: 120}
	if iv != want {
		t.Errorf("receiver interval\n got %+v\nwant %+v", iv, want)
	}
	s := intervalStream(1, true, Counters{SentBytes: 10, SentPackets: 1}, Counters{SentBytes: 1010, SentPackets: 2}, 0, 1)
	if s.Bytes != 1000 || s.Packets != 1 || s.BitsPerSecond != 8000 || !s.Sender {
		t.Errorf("sender interval %+v", s)
	}
	sum := sumIntervals([]IntervalStream{want, want})
	if sum.Bytes != 250000 || sum.Packets != 250 || sum.LostPackets != 10 || sum.ReceivedPackets != 240 || sum.JitterMS != 0.2 || sum.BitsPerSecond != 4e6 {
		t.Errorf("sum %+v", sum)
	}
}

func TestReportJSONAndText(t *testing.T) {
	sent := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 2000, Packets: 2, EndTime: 2}, {ID: 3, Bytes: 3000, Packets: 3, EndTime: 2}}}
	recv := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 1000, Packets: 2, Errors: 1, Jitter: 0.001, EndTime: 2}, {ID: 3, Bytes: 3000, Packets: 3, Jitter: 0.003, EndTime: 2}}}
	r := Report{End: buildEnd(sent, recv, true, nil)}
	e := r.End
	if e.SumSent.Packets != 5 || e.SumReceived.Packets != 5 || e.SumReceived.LostPackets != 1 || e.SumReceived.Bytes != 4000 ||
		e.SumReceived.JitterMS != 2 || e.Streams[0].UDP.LostPackets != 1 || e.Streams[0].UDP.LostPercent != 50 || e.SumSent.BitsPerSecond != 20000 {
		t.Errorf("end %+v", e)
	}
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	// The keys an iperf3 -J reader looks up.
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"streams", "sum", "sum_sent", "sum_received", "cpu_utilization_percent"} {
		if _, ok := m["end"][k]; !ok {
			t.Errorf("end lacks %q: %s", k, b)
		}
	}
	if !strings.Contains(string(b), `"lost_packets":1`) || !strings.Contains(string(b), `"udp":{`) {
		t.Errorf("JSON %s", b)
	}
	r.Intervals = []Interval{{Streams: []IntervalStream{{Socket: 1, End: 1, Seconds: 1, Bytes: 1 << 20, BitsPerSecond: 8388608, Packets: 724, JitterMS: 0.0123, LostPackets: 2}},
		Sum: IntervalStream{End: 1, Seconds: 1, Bytes: 1 << 20, BitsPerSecond: 8388608, Packets: 724}}}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"1.00 MBytes", "8.39 Mbits/sec", "0.012 ms  2/724", "[SUM]", "receiver", "1/5 (20%)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, out.String())
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FormatBytes(512), "512 Bytes"}, {FormatBytes(1536), "1.50 KBytes"}, {FormatBytes(3 << 30), "3.00 GBytes"},
		{FormatBitrate(999), "999 bits/sec"}, {FormatBitrate(52.4e6), "52.4 Mbits/sec"}, {FormatBitrate(9.41e9), "9.41 Gbits/sec"},
		// iperf3's own figures for a 1 s test at -b 100M: three
		// significant digits.
		{FormatBytes(382 * 32768), "11.9 MBytes"}, {FormatBitrate(99.96e6), "100 Mbits/sec"}, {FormatBitrate(99.7e6), "99.7 Mbits/sec"}, {FormatBitrate(9.96e6), "9.96 Mbits/sec"},
		{FormatBytes(0), "0.00 Bytes"},
		{fmtRate(100e6, 'k'), "100000 Kbits/sec"}, {fmtRate(100e6, 'm'), "100 Mbits/sec"}, {fmtRate(100e6, 'g'), "0.10 Gbits/sec"},
		{fmtRate(100e6, 'M'), "11.9 MBytes/sec"}, {fmtRate(8192, 'K'), "1.00 KBytes/sec"}, {fmtRate(2e12, 'a'), "2.00 Tbits/sec"},
		{fmtRate(1, 'x'), "invalid"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func fmtRate(bps float64, unit byte) string {
	s, ok := FormatRate(bps, unit)
	if !ok {
		return "invalid"
	}
	return s
}

// A one-stream test's summary has the stream's sender and receiver lines
// and no [SUM] lines, as iperf3 prints it; jitter and losses only on the
// receiver's line.
func TestReportTextOneStream(t *testing.T) {
	sent := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 3000, Packets: 3, EndTime: 1}}}
	recv := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 2000, Packets: 3, Errors: 1, Jitter: 0.001, EndTime: 1}}}
	// At the receiving end (a server) the CPU line names this end the
	// receiver, as iperf3 -s does.
	rr := Report{End: buildEnd(sent, recv, false, nil)}
	rr.End.CPU = CPUUtil{HostTotal: 1, RemoteTotal: 2}
	var rout strings.Builder
	rr.WriteText(&rout)
	if !strings.Contains(rout.String(), "CPU Utilization: local/receiver 1.0%") || !strings.Contains(rout.String(), "remote/sender 2.0%") {
		t.Errorf("receiver's report:\n%s", rout.String())
	}
	r := Report{End: buildEnd(sent, recv, true, nil)}
	var out strings.Builder
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || strings.Contains(out.String(), "SUM") || !strings.HasPrefix(lines[0], "- - -") ||
		!strings.HasPrefix(lines[2], "[  5]") || !strings.HasSuffix(lines[2], "sender") || strings.Contains(lines[2], " ms ") ||
		!strings.HasPrefix(lines[3], "[  5]") || !strings.HasSuffix(lines[3], "1/3 (33%)  receiver") {
		t.Errorf("one-stream summary:\n%s", out.String())
	}
}

// TestIntervalLinePacketRate: each interval line shows packets per second
// next to the count, as the bench's users read the rate there.
func TestIntervalLinePacketRate(t *testing.T) {
	var b strings.Builder
	iv := Interval{Streams: []IntervalStream{{Socket: 1, Start: 1, End: 1.5, Seconds: 0.5, Bytes: 1500000, BitsPerSecond: 24e6, Packets: 1500}}}
	if err := WriteInterval(&b, iv); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(b.String())
	// [ 1] 1.00-1.50 sec 1.43 MBytes 24.0 Mbits/sec 1500 3.0k 0.000 ms 0/1500 (0%)
	if len(f) < 10 || f[8] != "1500" || f[9] != "3.0k" {
		t.Errorf("interval line %q: want 1500 packets at 3.0k/s", b.String())
	}
	if !strings.Contains(IntervalHeader, "Pkts/s") {
		t.Errorf("header %q has no packets/s column", IntervalHeader)
	}
	// A receiver's line counts what it received: 600 of the 1500 the
	// sequence numbers say were sent, at 1.2k/s; Lost/Total is iperf3's.
	b.Reset()
	iv.Streams[0].LostPackets = 900
	if err := WriteInterval(&b, iv); err != nil {
		t.Fatal(err)
	}
	f = strings.Fields(b.String())
	if len(f) < 13 || f[8] != "600" || f[9] != "1.2k" || f[12] != "900/1500" {
		t.Errorf("receiver's interval line %q: want 600 packets received at 1.2k/s, 900/1500 lost", b.String())
	}
}

// Issue #27's numbers: four streams against iperf3 -s at -b 0, of which
// 88819 datagrams arrived in 3.105 s and 2590433 of the 2679252 sent
// were lost. The [SUM] receiver line counts the 88819 at 28.6k/s, not
// the 2679252; its Lost/Total is iperf3's; the JSON keeps iperf3's
// packets and lost_packets and adds received_packets.
func TestReportReceiverCountsReceived(t *testing.T) {
	var sent, recv iperf3.Results
	for i, lost := range []int64{647600, 647611, 647622, 647600} {
		id := iperf3.StreamID(i)
		sent.Streams = append(sent.Streams, iperf3.StreamResults{ID: id, Bytes: 669813 * 1448, Packets: 669813, EndTime: 3})
		// The receiver's counts: the highest sequence number it saw
		// (here all sent) and the gaps below it.
		const total = 669813
		recv.Streams = append(recv.Streams, iperf3.StreamResults{ID: id, Bytes: uint64(total-lost) * 1448, Packets: total, Errors: lost, EndTime: 3.105})
	}
	r := Report{End: buildEnd(sent, recv, true, nil)}
	var out strings.Builder
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	var sumRecv string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "[SUM]") && strings.HasSuffix(l, "receiver") {
			sumRecv = l
		}
	}
	f := strings.Fields(sumRecv)
	if len(f) < 12 || f[7] != "88819" || f[8] != "28.6k" || f[11] != "2590433/2679252" || f[12] != "(97%)" {
		t.Errorf("[SUM] receiver line %q: want 88819 packets at 28.6k/s and 2590433/2679252 (97%%) lost\n%s", sumRecv, out.String())
	}
	e := r.End
	if e.SumReceived.Packets != 2679252 || e.SumReceived.LostPackets != 2590433 || e.SumReceived.ReceivedPackets != 88819 {
		t.Errorf("sum_received %+v", e.SumReceived)
	}
	for i, s := range e.Streams {
		if s.Receiver == nil || s.Receiver.Sender || s.Receiver.ReceivedPackets != recv.Streams[i].Packets-recv.Streams[i].Errors {
			t.Errorf("stream %d's receiver figures %+v: want sender false, received %d", i, s.Receiver, recv.Streams[i].Packets-recv.Streams[i].Errors)
		}
	}
}

// The JSON has iperf3 -J's fields in each place: a sender's intervals
// without jitter and losses, the sums without out_of_order, the
// receiver's figures with received_packets (ours) and sender false.
func TestReportJSONFieldsByRole(t *testing.T) {
	sent := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 4000, Packets: 4, EndTime: 1}}}
	recv := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 1000, Packets: 4, Errors: 3, EndTime: 1}}}
	r := Report{End: buildEnd(sent, recv, true, nil), Intervals: []Interval{{
		Streams: []IntervalStream{intervalStream(1, true, Counters{}, Counters{SentBytes: 4000, SentPackets: 4}, 0, 1)}}}}
	r.Intervals[0].Sum = sumIntervals(r.Intervals[0].Streams)
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Intervals []struct {
			Streams []map[string]any `json:"streams"`
			Sum     map[string]any   `json:"sum"`
		} `json:"intervals"`
		End struct {
			Streams []struct {
				UDP      map[string]any `json:"udp"`
				Receiver map[string]any `json:"receiver"`
			} `json:"streams"`
			Sum         map[string]any `json:"sum"`
			SumSent     map[string]any `json:"sum_sent"`
			SumReceived map[string]any `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	has := func(name string, o map[string]any, key string, want bool) {
		t.Helper()
		if _, ok := o[key]; ok != want {
			t.Errorf("%s has %q: %v, want %v: %v", name, key, ok, want, o)
		}
	}
	for _, k := range []string{"jitter_ms", "lost_packets", "lost_percent", "received_packets"} {
		has("sender's interval", m.Intervals[0].Streams[0], k, false)
		has("sender's interval sum", m.Intervals[0].Sum, k, false)
	}
	has("end.streams[].udp", m.End.Streams[0].UDP, "out_of_order", true)
	has("end.streams[].udp", m.End.Streams[0].UDP, "received_packets", false)
	has("end.streams[].receiver", m.End.Streams[0].Receiver, "received_packets", true)
	for name, o := range map[string]map[string]any{"sum": m.End.Sum, "sum_sent": m.End.SumSent, "sum_received": m.End.SumReceived} {
		has(name, o, "out_of_order", false)
		has(name, o, "received_packets", name == "sum_received")
	}
	if m.End.Streams[0].Receiver["sender"] != false || m.End.SumReceived["received_packets"] != 1.0 || m.End.Streams[0].Receiver["received_packets"] != 1.0 {
		t.Errorf("receiver figures %v, sum_received %v: want sender false, 1 packet received", m.End.Streams[0].Receiver, m.End.SumReceived)
	}
	// A receiver's interval has iperf3's fields and ours.
	iv := intervalStream(1, false, Counters{}, Counters{RecvCounters: iperf3.RecvCounters{Bytes: 1000, Packets: 4, Lost: 3}}, 0, 1)
	b, _ = json.Marshal(iv)
	var o map[string]any
	json.Unmarshal(b, &o)
	for _, k := range []string{"jitter_ms", "lost_packets", "lost_percent", "packets", "received_packets"} {
		has("receiver's interval", o, k, true)
	}
	if o["packets"] != 4.0 || o["received_packets"] != 1.0 {
		t.Errorf("receiver's interval %s: want packets 4 (iperf3's), received_packets 1", b)
	}
	// The Go values survive a round trip.
	var back IntervalStream
	if err := json.Unmarshal(b, &back); err != nil || back != iv {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, iv)
	}
}

// iperf3's end-of-test block of a two-stream test: each stream's sender
// and receiver lines (the receiver's over its own window), then [SUM]'s;
// the streams numbered 5 and 7 in text and JSON alike.
func TestReportTextPerStreamReceiver(t *testing.T) {
	sent := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 2000, Packets: 2, EndTime: 1}, {ID: 3, Bytes: 3000, Packets: 3, EndTime: 1}}}
	recv := iperf3.Results{Streams: []iperf3.StreamResults{{ID: 1, Bytes: 1000, Packets: 2, Errors: 1, Jitter: 0.001, EndTime: 2}, {ID: 3, Bytes: 3000, Packets: 3, Jitter: 0.003, EndTime: 2}}}
	r := Report{End: buildEnd(sent, recv, true, nil)}
	var out strings.Builder
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[2:] {
		f := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(l))
		got = append(got, f[0]+" "+f[len(f)-1])
	}
	want := []string{"5 sender", "5 receiver", "7 sender", "7 receiver", "SUM sender", "SUM receiver"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("rows %q, want %q:\n%s", got, want, out.String())
	}
	if !strings.Contains(out.String(), "1000 Bytes   4.00 Kbits/sec") || !strings.Contains(out.String(), "1/2 (50%)  receiver") {
		t.Errorf("stream 5's receiver line is not its own:\n%s", out.String())
	}
	b, _ := json.Marshal(&r)
	if !strings.Contains(string(b), `"socket":5`) || !strings.Contains(string(b), `"socket":7`) || strings.Contains(string(b), `"socket":1,`) {
		t.Errorf("JSON stream ids are not iperf3's 5 and 7: %s", b)
	}
}
