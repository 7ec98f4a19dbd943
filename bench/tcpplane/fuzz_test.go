package tcpplane

import (
	"errors"
	"testing"
)

// FuzzParseTCPSegment: any frame parses as a TCP segment or fails with
// errNotTCPSegment, never panics; a parsed segment's payload lies inside
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
			if !errors.Is(err, errNotTCPSegment) {
				t.Fatalf("error %v does not wrap errNotTCPSegment", err)
			}
			return
		}
		if s.payload < 0 || s.payloadStart < tcpHdrLen4 || s.payloadStart+s.payload > len(b) {
			t.Fatalf("segment %+v outside the %d-byte frame", s, len(b))
		}
		fl := tcpRXFlow{next: s.seq}
		fl.add(s.seq, s.payload)
		fl.add(s.seq, s.payload) // the same again: a duplicate
		if fl.Bytes != uint64(s.payload) || fl.InOrderBytes != uint64(s.payload) || (s.payload > 0) != (fl.Late == 1) {
			t.Fatalf("accounting %+v for %+v", fl, s)
		}
	})
}
