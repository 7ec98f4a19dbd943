package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParseTCPSegment: any frame parses as a TCP segment or fails with
// ErrNotTCPSegment, never panics; a parsed segment's payload lies inside
// the frame, and accounting it never panics either.
func FuzzParseTCPSegment(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		var fr [][]byte
		fl := testFlow(f, v6, 0xfffffff0, 100)
		fl.writeSegments(make([]byte, 150), collect(&fr))
		for _, b := range fr {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseTCPSegment(b)
		if err != nil {
			if !errors.Is(err, ErrNotTCPSegment) {
				t.Fatalf("error %v does not wrap ErrNotTCPSegment", err)
			}
			return
		}
		if s.payload < 0 || s.payloadStart < tcpHdrLen4 || s.payloadStart+s.payload > len(b) {
			t.Fatalf("segment %+v outside the %d-byte frame", s, len(b))
		}
		fl := tcpRxFlow{next: s.seq}
		fl.add(s.seq, s.payload)
		fl.add(s.seq, s.payload) // the same again: a duplicate
		if fl.Bytes != uint64(s.payload) || fl.InOrderBytes != uint64(s.payload) || (s.payload > 0) != (fl.Late == 1) {
			t.Fatalf("accounting %+v for %+v", fl, s)
		}
	})
}

// FuzzTCPMessages: any JSON body decodes into each TCP-mode message or
// fails with an error, never panics; what is accepted passes its checks
// and survives a round trip.
func FuzzTCPMessages(f *testing.F) {
	f.Add([]byte(`{"version":1,"tso":true,"mss":1460}`))
	f.Add([]byte(`{"version":1,"data_port":5202,"mss":1440}`))
	f.Add([]byte(`{"mss":1460,"streams":[{"id":1,"src":"198.18.0.1","src_port":20000,"isn":7},{"id":3,"src":"2001:db8::1","src_port":20001,"isn":4294967295}]}`))
	f.Add([]byte(`{"tso":false,"mss":1460,"seconds":1.5,"streams":[{"id":1,"bytes":100,"segments":1,"writes":1}],"cpu":{"user":0.1,"system":0.2}}`))
	f.Add([]byte(`{"seconds":1,"streams":[{"id":1,"segments":1,"bytes":10,"in_order_bytes":10,"out_of_order":0,"gap_bytes":0,"late":0,"bad_checksum":1}],"stray":0,"malformed":2,"dropped":3,"cpu":{"user":0,"system":0}}`))
	f.Add([]byte(`{"udp":true,"time":1,"parallel":1,"xdpio_tcp":{"version":1,"mss":1460}}`))
	f.Add([]byte(`{"streams":[{"id":-1,"src":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range []func() any{
			func() any { return new(TCPParams) }, func() any { return new(TCPAccept) }, func() any { return new(TCPStreams) },
			func() any { return new(TCPSenderStats) }, func() any { return new(TCPReceiverStats) }, func() any { return new(tcpParamsMsg) },
		} {
			v := mk()
			if err := DecodeMessage(b, v); err != nil {
				continue
			}
			enc, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encode %T %+v: %v", v, v, err)
			}
			w := mk()
			if err := DecodeMessage(enc, w); err != nil {
				t.Fatalf("%T %s accepted, its encoding %s not: %v", v, b, enc, err)
			}
			if _, ok := v.(*tcpParamsMsg); !ok && !reflect.DeepEqual(v, w) {
				t.Fatalf("round trip of %T: %+v became %+v", v, v, w)
			}
			if bytes.Contains(enc, []byte("NaN")) {
				t.Fatalf("encoded NaN: %s", enc)
			}
		}
	})
}
