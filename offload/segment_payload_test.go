package offload

import (
	"bytes"
	"errors"
	"testing"
)

// TestSegmentPayload requires SegmentPayload on (headers, payload) to
// write exactly what Segment writes for the contiguous super-packet, with
// any values in the template's length and checksum fields, and without
// allocating.
func TestSegmentPayload(t *testing.T) {
	for _, s := range segSpecs() {
		for _, udp := range []bool{false, true} {
			s := s
			s.udp = udp
			t.Run(s.String(), func(t *testing.T) {
				in := buildSuper(t, s)
				proto := uint8(ipProtoTCP)
				if udp {
					proto = ipProtoUDP
				}
				lo, err := parseSegLayout(in, proto, "test")
				if err != nil {
					t.Fatal(err)
				}
				opts := SegmentOptions{MSS: 1000}
				var want [][]byte
				if udp {
					want, err = SegmentUDP(nil, in, opts)
				} else {
					want, err = Segment(nil, in, opts)
				}
				if err != nil {
					t.Fatal(err)
				}
				hdr := append([]byte(nil), in[:lo.Payload]...)
				// Garbage in the fields the function must ignore.
				if lo.IPv6 {
					hdr[lo.L3+4], hdr[lo.L3+5] = 0xde, 0xad
				} else {
					hdr[lo.L3+2], hdr[lo.L3+3], hdr[lo.L3+10] = 0, 7, 0x55
				}
				if udp {
					hdr[lo.L4+4], hdr[lo.L4+6] = 0x77, 0x66
				} else {
					hdr[lo.L4+16] ^= 0xff
				}
				payload := in[lo.Payload:lo.End]
				bufs := make([][]byte, len(want))
				for i := range bufs {
					bufs[i] = make([]byte, 2048)
				}
				call := func() (int, error) {
					k := 0
					next := func(size int) []byte { b := bufs[k][:size]; k++; return b }
					if udp {
						return SegmentUDPPayload(hdr, payload, opts, next)
					}
					return SegmentPayload(hdr, payload, opts, next)
				}
				n, err := call()
				if err != nil || n != len(want) {
					t.Fatalf("= %d, %v; want %d segments", n, err, len(want))
				}
				for i := range want {
					if !bytes.Equal(bufs[i][:len(want[i])], want[i]) {
						t.Fatalf("segment %d differs from Segment's", i)
					}
				}
				if a := testing.AllocsPerRun(10, func() { call() }); a != 0 {
					t.Errorf("%v allocs per call", a)
				}
			})
		}
	}
}

func TestSegmentPayloadErrors(t *testing.T) {
	in := buildSuper(t, superSpec{tsopt: true, flags: tcpACK, payload: 100})
	lo, _ := parseSegLayout(in, ipProtoTCP, "test")
	hdr := in[:lo.Payload]
	next := func(size int) []byte { return make([]byte, size) }
	for _, c := range []struct {
		name    string
		hdr     []byte
		payload []byte
		mss     int
		want    error
	}{
		{"payload beyond 64 KB", hdr, make([]byte, 65535), 1448, ErrMalformed},
		{"bytes after the TCP header", in[:lo.Payload+10], nil, 1448, ErrMalformed},
		{"template too long", make([]byte, 600), nil, 1448, ErrMalformed},
		{"truncated TCP header", in[:lo.L4+10], nil, 1448, ErrMalformed},
		{"UDP template for TCP", buildSuper(t, superSpec{udp: true})[:14+20+8], nil, 1448, ErrWrongProtocol},
		{"MSS 0", hdr, nil, 0, ErrInvalidMSS},
	} {
		if _, err := SegmentPayload(c.hdr, c.payload, SegmentOptions{MSS: c.mss}, next); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := SegmentPayload(hdr, make([]byte, 3000), SegmentOptions{MSS: 1448}, func(int) []byte { return nil }); !errors.Is(err, ErrDestTooSmall) {
		t.Errorf("nil buffer: %v", err)
	}
}
