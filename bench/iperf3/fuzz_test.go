package iperf3

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzReadMessage: any byte string read as a control message is a value or
// an error, never a panic; accepted parameters survive a round trip.
func FuzzReadMessage(f *testing.F) {
	frame := func(s string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
		return append(b, s...)
	}
	f.Add(frame(`{"udp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":4,"len":1448,"bandwidth":52428800,"udp_counters_64bit":1,"client_version":"3.12"}`))
	f.Add(frame(resultsFromIperf3))
	f.Add(frame(`{"streams":[{}]}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Params
		if err := ReadMessage(bytes.NewReader(b), &p); err == nil {
			var buf bytes.Buffer
			if err := WriteMessage(&buf, &p); err != nil {
				t.Fatal(err)
			}
			var q Params
			if err := ReadMessage(&buf, &q); err != nil {
				t.Fatalf("re-read %+v: %v", p, err)
			}
			if (q.ServerAffinity == nil) != (p.ServerAffinity == nil) {
				t.Fatalf("round trip %+v != %+v", q, p)
			}
			q.ServerAffinity, p.ServerAffinity = nil, nil
			if q != p {
				t.Fatalf("round trip %+v != %+v", q, p)
			}
		}
		var r Results
		if err := ReadMessage(bytes.NewReader(b), &r); err == nil {
			for _, s := range r.Streams {
				if s.Packets < 0 || s.Errors < 0 {
					t.Fatalf("accepted negative counts %+v", s)
				}
			}
		}
	})
}

// FuzzParseUDPHeader: any datagram parses or errs; a parsed header writes
// back to the same bytes.
func FuzzParseUDPHeader(f *testing.F) {
	f.Add([]byte{0x65, 0x0, 0x0, 0x1, 0x0, 0x0, 0x3, 0xe8, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add([]byte{1, 2, 3})
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c64 := range []bool{false, true} {
			h, err := ParseUDPHeader(b, c64)
			if err != nil {
				continue
			}
			n := HeaderLen(c64)
			out := make([]byte, n)
			h.Put(out, c64)
			if !bytes.Equal(out, b[:n]) {
				t.Fatalf("%x parsed as %+v writes back %x", b[:n], h, out)
			}
			var s RecvStats
			s.Add(len(b), h, time.Now())
			if s.Datagrams != 1 || s.Packets != int64(h.Seq) && h.Seq <= 1<<62 {
				t.Fatalf("stats %+v for %+v", s, h)
			}
		}
	})
}
