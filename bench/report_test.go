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
		JitterMS: 0.2, LostPackets: 5, LostPercent: 4}
	if iv != want {
		t.Errorf("receiver interval\n got %+v\nwant %+v", iv, want)
	}
	s := intervalStream(1, true, Counters{SentBytes: 10, SentPackets: 1}, Counters{SentBytes: 1010, SentPackets: 2}, 0, 1)
	if s.Bytes != 1000 || s.Packets != 1 || s.BitsPerSecond != 8000 || !s.Sender {
		t.Errorf("sender interval %+v", s)
	}
	sum := sumIntervals([]IntervalStream{want, want})
	if sum.Bytes != 250000 || sum.Packets != 250 || sum.LostPackets != 10 || sum.JitterMS != 0.2 || sum.BitsPerSecond != 4e6 {
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

// A TCP-mode test's interval lines have no jitter or losses, at the
// receiver either, and their own header.
func TestTCPIntervalLine(t *testing.T) {
	iv := Interval{TCP: true, Streams: []IntervalStream{{Socket: 5, Start: 0, End: 1, Seconds: 1, Bytes: 1 << 20, BitsPerSecond: 8388608, Packets: 724}}}
	var b strings.Builder
	if err := WriteInterval(&b, iv); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), " ms ") || strings.Contains(b.String(), "/724") || len(strings.Fields(b.String())) != 10 {
		t.Errorf("TCP-mode receiver's interval line %q has UDP columns", b.String())
	}
	if iv.Header() != TCPIntervalHeader || (Interval{}).Header() != IntervalHeader {
		t.Errorf("headers %q, %q", iv.Header(), Interval{}.Header())
	}
}
