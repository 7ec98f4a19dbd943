package offload

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

func TestSegmentUDPGopacket(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, vl := range []int{0, 1, 2} {
			for _, pl := range []int{0, 1, 1399, 1400, 1401, 9000, 65000} {
				for _, bad := range []bool{false, true} {
					s := superSpec{v6: v6, vlans: vl, ext: v6 && vl == 1, ipOpts: !v6 && vl == 2, udp: true, payload: pl, id: 0xfffd, badCsums: bad}
					t.Run(s.String(), func(t *testing.T) {
						in := buildSuper(t, s)
						opts := SegmentOptions{MSS: 1400}
						segs, err := SegmentUDP(nil, in, opts)
						if err != nil {
							t.Fatal(err)
						}
						for i, seg := range segs {
							p := gopacketCheck(t, seg)
							u := p.TransportLayer().(*layers.UDP)
							if want := min(1400, pl-i*1400); len(u.Payload) != want {
								t.Errorf("datagram %d: %d payload bytes, want %d", i, len(u.Payload), want)
							}
							if u.Checksum == 0 {
								t.Errorf("datagram %d: checksum 0", i)
							}
						}
						if err := checkReassembles(in, segs, opts, ipProtoUDP); err != nil {
							t.Error(err)
						}
					})
				}
			}
		}
	}
}

// TestSegmentUDPZeroChecksum builds a datagram whose checksum computes to
// zero and requires 0xffff on the wire (RFC 768).
func TestSegmentUDPZeroChecksum(t *testing.T) {
	in := buildSuper(t, superSpec{udp: true, payload: 10})
	lo, _ := parseSegLayout(in, ipProtoUDP, "test")
	// Adjust the last two payload bytes so that the full sum is 0xffff,
	// i.e. the checksum field computes to zero.
	in[lo.End-2], in[lo.End-1] = 0, 0
	binary.BigEndian.PutUint16(in[lo.L4+6:], 0)
	ph := pseudoSum(in[lo.L3:], false, ipProtoUDP, lo.End-lo.L4)
	s := Combine(ph, Checksum(in[lo.L4:lo.End], 0))
	binary.BigEndian.PutUint16(in[lo.End-2:], ^s)
	segs, err := SegmentUDP(nil, in, SegmentOptions{MSS: 1400})
	if err != nil {
		t.Fatal(err)
	}
	if c := binary.BigEndian.Uint16(segs[0][lo.L4+6:]); c != 0xffff {
		t.Fatalf("UDP checksum %#04x, want 0xffff", c)
	}
	gopacketCheck(t, segs[0])
}

func TestSegmentUDPErrors(t *testing.T) {
	tcp := buildSuper(t, superSpec{payload: 100})
	in := buildSuper(t, superSpec{udp: true, payload: 3000})
	bad := append([]byte(nil), in...)
	binary.BigEndian.PutUint16(bad[14+20+4:], 100) // UDP length != IP length
	for _, c := range []struct {
		name  string
		frame []byte
		mss   int
		want  error
	}{
		{"TCP", tcp, 1400, ErrWrongProtocol},
		{"UDP length mismatch", bad, 1400, ErrMalformed},
		{"truncated UDP", in[:14+20+4], 1400, ErrMalformed},
		{"gso size 0", in, 0, ErrInvalidMSS},
	} {
		if _, err := SegmentUDP(nil, c.frame, SegmentOptions{MSS: c.mss}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	n, maxLen, err := SegmentUDPCount(in, SegmentOptions{MSS: 1400})
	if err != nil || n != 3 || maxLen != 14+20+8+1400 {
		t.Errorf("SegmentUDPCount = %d, %d, %v", n, maxLen, err)
	}
	bufs := [][]byte{make([]byte, 2000), make([]byte, 2000), make([]byte, 2000)}
	if k, err := SegmentUDPInto(bufs, in, SegmentOptions{MSS: 1400}); k != 3 || err != nil {
		t.Errorf("SegmentUDPInto = %d, %v", k, err)
	}
	if k, err := SegmentUDPFunc(in, SegmentOptions{MSS: 1400}, func(n int) []byte { return make([]byte, n) }); k != 3 || err != nil {
		t.Errorf("SegmentUDPFunc = %d, %v", k, err)
	}
}
