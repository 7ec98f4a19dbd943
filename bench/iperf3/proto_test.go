package iperf3

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// The state numbers are iperf3's (src/iperf_api.h, 3.12) and go on the
// wire as one signed byte.
func TestStateWire(t *testing.T) {
	want := map[State]byte{TestStart: 1, TestRunning: 2, TestEnd: 4, ParamExchange: 9, CreateStreams: 10,
		ServerTerminate: 11, ClientTerminate: 12, ExchangeResults: 13, DisplayResults: 14, IperfStart: 15,
		IperfDone: 16, AccessDenied: 0xff, ServerErrorCode: 0xfe}
	for st, b := range want {
		var buf bytes.Buffer
		if err := WriteState(&buf, st); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), []byte{b}) {
			t.Errorf("%v on the wire: % x, want %02x", st, buf.Bytes(), b)
		}
		got, err := ReadState(&buf)
		if err != nil || got != st {
			t.Errorf("ReadState(%02x) = %v, %v; want %v", b, got, err, st)
		}
		if !st.Known() || strings.HasPrefix(st.String(), "STATE(") {
			t.Errorf("%d not known", st)
		}
	}
	if State(3).Known() || State(3).String() != "STATE(3)" {
		t.Errorf("state 3 (unused RESULT_REQUEST) should be unknown, got %v", State(3))
	}
	if _, err := ReadState(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Errorf("ReadState(empty) = %v, want EOF", err)
	}
}

func TestCookie(t *testing.T) {
	c := NewCookie()
	if c[CookieSize-1] != 0 || len(c.String()) != 36 || strings.Trim(c.String(), cookieChars) != "" {
		t.Fatalf("NewCookie = %q", c[:])
	}
	if d := NewCookie(); d == c {
		t.Error("two cookies are equal")
	}
	got, err := ReadCookie(bytes.NewReader(c[:]))
	if err != nil || got != c {
		t.Fatalf("ReadCookie = %q, %v", got[:], err)
	}
	bad := map[string][]byte{
		"short":      c[:36],
		"no NUL":     append(append([]byte{}, c[:36]...), 'x'),
		"control":    append(append([]byte{1}, c[1:36]...), 0),
		"NUL inside": append(append([]byte{0}, c[1:36]...), 0),
	}
	for name, b := range bad {
		if _, err := ReadCookie(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: ReadCookie(%q) accepted", name, b)
		}
	}
}

func TestMessageFraming(t *testing.T) {
	var buf bytes.Buffer
	p := Params{UDP: true, Time: 2, Parallel: 4, Len: 1448, Bandwidth: 50e6, UDPCounters64Bit: 1, ClientVersion: "3.12"}
	if err := WriteMessage(&buf, &p); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if n := binary.BigEndian.Uint32(b); int(n) != len(b)-4 {
		t.Fatalf("length prefix %d, body %d bytes", n, len(b)-4)
	}
	if !bytes.Contains(b, []byte(`"udp":true`)) || bytes.Contains(b, []byte(`"reverse"`)) || bytes.Contains(b, []byte(`"tcp"`)) {
		t.Errorf("body %s: want udp:true and no reverse/tcp key (iperf3 reads presence as true)", b[4:])
	}
	var q Params
	if err := ReadMessage(&buf, &q); err != nil || q != p {
		t.Fatalf("ReadMessage = %+v, %v; want %+v", q, err, p)
	}

	// A length beyond the limit is refused before allocating.
	if err := ReadMessage(bytes.NewReader([]byte{0x7f, 0, 0, 0}), &q); !errors.Is(err, ErrProtocol) {
		t.Errorf("huge length: %v, want ErrProtocol", err)
	}
	// A body shorter than its length.
	if err := ReadMessage(bytes.NewReader([]byte{0, 0, 0, 10, '{', '}'}), &q); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: %v, want ErrUnexpectedEOF", err)
	}
	if err := ReadMessage(bytes.NewReader([]byte{0, 0, 0, 1, '{'}), &q); !errors.Is(err, ErrProtocol) {
		t.Errorf("bad JSON: %v, want ErrProtocol", err)
	}
}

// resultsFromIperf3 is a results message in the form iperf3 3.12 writes
// it (cJSON doubles; a UDP receiver's -1 counters as 2^64-1).
const resultsFromIperf3 = `{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1,"sender_has_retransmits":18446744073709551615,` +
	`"streams":[{"id":1,"bytes":12496240,"retransmits":18446744073709551615,"jitter":1.5e-05,"errors":0,"packets":8630,"start_time":0,"end_time":2.000113}]}`

func TestResultsDecode(t *testing.T) {
	var r Results
	if err := DecodeMessage([]byte(resultsFromIperf3), &r); err != nil {
		t.Fatal(err)
	}
	s := r.Streams[0]
	if r.SenderHasRetransmits != -1 || s.Retransmits != -1 || s.Bytes != 12496240 || s.Packets != 8630 || s.Jitter != 1.5e-5 || s.EndTime != 2.000113 {
		t.Errorf("decoded %+v %+v", r, s)
	}
	for _, drop := range []string{`"cpu_util_total":1.5,`, `"sender_has_retransmits":18446744073709551615,`, `"packets":8630,`, `"id":1,`} {
		m := strings.Replace(resultsFromIperf3, drop, "", 1)
		if err := DecodeMessage([]byte(m), &r); !errors.Is(err, ErrProtocol) {
			t.Errorf("without %s: %v, want ErrProtocol", drop, err)
		}
	}
	for _, bad := range []string{`"packets":-5`, `"packets":1.5`, `"bytes":"x"`} {
		m := strings.Replace(resultsFromIperf3, `"packets":8630`, bad, 1)
		if err := DecodeMessage([]byte(m), &r); err == nil {
			t.Errorf("with %s accepted", bad)
		}
	}
}

func TestServerErrorWire(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteServerError(&buf, IEStreamListen, 98); err != nil {
		t.Fatal(err)
	}
	want := []byte{0xfe, 0, 0, 0, 202, 0, 0, 0, 98}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("% x, want % x", buf.Bytes(), want)
	}
	st, _ := ReadState(&buf)
	err := ReadServerError(&buf)
	var se *ServerError
	if st != ServerErrorCode || !errors.As(err, &se) || se.Code != 202 || se.Errno != 98 {
		t.Errorf("read back %v %v", st, err)
	}
}

func TestUDPHeader(t *testing.T) {
	h := UDPHeader{Sec: 0x01020304, Usec: 999999, Seq: 0x0a0b0c0d0e0f1011}
	b := make([]byte, 16)
	h.Put(b, true)
	want := []byte{1, 2, 3, 4, 0, 0x0f, 0x42, 0x3f, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11}
	if !bytes.Equal(b, want) {
		t.Errorf("64-bit header % x, want % x", b, want)
	}
	if got, err := ParseUDPHeader(b, true); err != nil || got != h {
		t.Errorf("parse = %+v, %v", got, err)
	}
	h.Put(b, false)
	if !bytes.Equal(b[8:12], []byte{0x0e, 0x0f, 0x10, 0x11}) {
		t.Errorf("32-bit sequence % x", b[8:12])
	}
	if got, _ := ParseUDPHeader(b, false); got.Seq != 0x0e0f1011 {
		t.Errorf("32-bit parse %x", got.Seq)
	}
	if _, err := ParseUDPHeader(b[:15], true); !errors.Is(err, ErrShortDatagram) {
		t.Errorf("short: %v", err)
	}
	binary.BigEndian.PutUint32(b[4:], 1000000)
	if _, err := ParseUDPHeader(b, true); !errors.Is(err, ErrBadHeader) {
		t.Errorf("usec 1e6: %v", err)
	}
}

// The setup datagrams are iperf3's native-order ints: on x86 the client's
// message is the bytes "9876" and the reply "6789".
func TestConnectMessages(t *testing.T) {
	m, r := ConnectBytes(UDPConnectMsg), ConnectBytes(UDPConnectReply)
	if binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) == 1 && (string(m) != "9876" || string(r) != "6789") {
		t.Errorf("little endian host: msg %q reply %q", m, r)
	}
	if !IsConnectMsg(m) || !IsConnectReply(r) || IsConnectReply(m) || !IsConnectReply(ConnectBytes(987654321)) {
		t.Error("connect message recognition")
	}
}

func TestRecvStats(t *testing.T) {
	cases := []struct {
		seqs               []uint64
		packets, lost, ooo int64
	}{
		{[]uint64{1, 2, 3}, 3, 0, 0},
		{[]uint64{1, 3}, 3, 1, 0},
		{[]uint64{1, 3, 2}, 3, 0, 1},
		{[]uint64{5}, 5, 4, 0},
		{[]uint64{1, 2, 2}, 2, 0, 1}, // a duplicate counts as out of order
		{[]uint64{1, 10, 2, 3}, 10, 6, 2},
	}
	for _, c := range cases {
		var s RecvStats
		for _, q := range c.seqs {
			s.Add(100, UDPHeader{Seq: q}, time.Unix(0, 0))
		}
		if s.Packets != c.packets || s.Lost != c.lost || s.OutOfOrder != c.ooo || s.Datagrams != int64(len(c.seqs)) || s.Bytes != uint64(100*len(c.seqs)) {
			t.Errorf("%v: %+v, want packets %d lost %d ooo %d", c.seqs, s.RecvCounters, c.packets, c.lost, c.ooo)
		}
	}
	// RFC 3550 A.8: J += (|D| - J)/16. Transit 0, 1 ms, 0 (sender clock
	// offset of 100 s does not matter).
	var s RecvStats
	sent := time.Unix(1000, 0)
	for i, tr := range []time.Duration{0, time.Millisecond, 0} {
		at := sent.Add(time.Duration(i)*10*time.Millisecond + tr + 100*time.Second)
		s.Add(100, UDPHeader{Sec: uint32(sent.Unix()) + uint32(i/100), Usec: uint32(i * 10000), Seq: uint64(i + 1)}, at)
	}
	j1 := 0.001 / 16
	j2 := j1 + (0.001-j1)/16
	if d := s.Jitter - j2; d > 1e-12 || d < -1e-12 {
		t.Errorf("jitter %g, want %g", s.Jitter, j2)
	}
}

// iperf3 numbers a test's streams 1, 3, 4, 5… (2 is skipped).
func TestStreamID(t *testing.T) {
	for i, want := range []int{1, 3, 4, 5, 130} {
		if i == 4 {
			i = 128
		}
		if got := StreamID(i); got != want {
			t.Errorf("StreamID(%d) = %d, want %d", i, got, want)
		}
	}
}

// xdpio_tail_ms: xdpio's client announces its wait before TEST_END; a
// server takes 0..MaxTailMS, and the key round-trips.
func TestParamsTailMS(t *testing.T) {
	for _, c := range []struct {
		ms int
		ok bool
	}{{0, true}, {100, true}, {MaxTailMS, true}, {-1, false}, {MaxTailMS + 1, false}} {
		p := Params{UDP: true, Time: 1, Parallel: 1, TailMS: c.ms}
		if err := p.Check(); (err == nil) != c.ok {
			t.Errorf("xdpio_tail_ms %d: %v, want ok %v", c.ms, err, c.ok)
		}
	}
	var b bytes.Buffer
	if err := WriteMessage(&b, &Params{UDP: true, Time: 1, TailMS: 100}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"xdpio_tail_ms":100`)) {
		t.Errorf("params %q lack xdpio_tail_ms", b.Bytes())
	}
	var p Params
	err := ReadMessage(&b, &p)
	if err != nil || p.TailMS != 100 {
		t.Errorf("read back %+v, %v", p, err)
	}
}
