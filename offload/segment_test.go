package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

func segSpecs() []superSpec {
	var specs []superSpec
	for _, v6 := range []bool{false, true} {
		for _, vl := range []int{0, 1, 2} {
			for _, pl := range []int{0, 1, 100, 1448, 1449, 4000, 65000} {
				specs = append(specs, superSpec{v6: v6, vlans: vl, ext: v6 && vl == 1, ipOpts: !v6 && vl == 2,
					flags: tcpACK | tcpPSH | tcpCWR | tcpFIN*byte(pl%2), tsopt: pl%3 != 0, payload: pl, id: 0xfffe, seq: 0xffffff00})
			}
		}
	}
	specs = append(specs, superSpec{flags: tcpACK | tcpURG | tcpECE | tcpRST, payload: 3000, badCsums: true})
	return specs
}

func TestSegmentGopacket(t *testing.T) {
	for _, s := range segSpecs() {
		for _, mss := range []int{1448, 536, 1} {
			if mss == 1 && s.payload > 1500 {
				continue
			}
			for _, fixed := range []bool{false, true} {
				t.Run(s.String(), func(t *testing.T) {
					in := buildSuper(t, s)
					if !s.badCsums {
						gopacketCheck(t, in)
					}
					opts := SegmentOptions{MSS: mss, FixedID: fixed}
					segs, err := Segment(nil, in, opts)
					if err != nil {
						t.Fatal(err)
					}
					for i, seg := range segs {
						p := gopacketCheck(t, seg)
						tcp := p.TransportLayer().(*layers.TCP)
						if len(tcp.Payload) != min(mss, s.payload-i*mss) {
							t.Errorf("segment %d: gopacket sees %d payload bytes", i, len(tcp.Payload))
						}
						if want := s.seq + uint32(i*mss); tcp.Seq != want {
							t.Errorf("segment %d: seq %d, want %d", i, tcp.Seq, want)
						}
						last := i == len(segs)-1
						if tcp.PSH != (last && s.flags&tcpPSH != 0) || tcp.FIN != (last && s.flags&tcpFIN != 0) || tcp.CWR != (i == 0 && s.flags&tcpCWR != 0) {
							t.Errorf("segment %d of %d: PSH %v FIN %v CWR %v", i, len(segs), tcp.PSH, tcp.FIN, tcp.CWR)
						}
						if ip, ok := p.NetworkLayer().(*layers.IPv4); ok {
							want := s.id + uint16(i)
							if fixed {
								want = s.id
							}
							if ip.Id != want {
								t.Errorf("segment %d: IPv4 ID %d, want %d", i, ip.Id, want)
							}
						}
					}
					if err := checkReassembles(in, segs, opts, ipProtoTCP); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
}

// TestSegmentOutputStyles requires Segment, SegmentInto and SegmentFunc to
// write the same bytes, and the reusing forms not to allocate.
func TestSegmentOutputStyles(t *testing.T) {
	in := buildSuper(t, superSpec{v6: true, vlans: 1, ext: true, tsopt: true, flags: tcpACK | tcpPSH, payload: 65000})
	opts := SegmentOptions{MSS: 1448}
	want, err := Segment(nil, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	n, maxLen, err := SegmentCount(in, opts)
	if err != nil || n != len(want) || maxLen != len(want[0]) {
		t.Fatalf("SegmentCount = %d, %d, %v; want %d, %d", n, maxLen, err, len(want), len(want[0]))
	}
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	got, err := SegmentInto(bufs, in, opts)
	if err != nil || got != n {
		t.Fatalf("SegmentInto = %d, %v", got, err)
	}
	pool := make([][]byte, 0, n)
	_, err = SegmentFunc(in, opts, func(size int) []byte {
		b := make([]byte, size)
		pool = append(pool, b)
		return b
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !bytes.Equal(want[i], bufs[i]) || !bytes.Equal(want[i], pool[i]) {
			t.Fatalf("segment %d differs between output styles", i)
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		for i := range bufs {
			bufs[i] = bufs[i][:cap(bufs[i])]
		}
		SegmentInto(bufs, in, opts)
	}); a != 0 {
		t.Errorf("SegmentInto: %v allocs per call, want 0", a)
	}
	dst := want
	if a := testing.AllocsPerRun(20, func() {
		dst, _ = Segment(dst[:0], in, opts)
	}); a != 0 {
		t.Errorf("Segment reusing dst: %v allocs per call, want 0", a)
	}
	pool2 := make([][]byte, n)
	for i := range pool2 {
		pool2[i] = make([]byte, 2048)
	}
	if a := testing.AllocsPerRun(20, func() {
		k := 0
		SegmentFunc(in, opts, func(size int) []byte {
			b := pool2[k][:size]
			k++
			return b
		})
	}); a != 0 {
		t.Errorf("SegmentFunc from a pool: %v allocs per call, want 0", a)
	}
	// Too few or too short buffers.
	if _, err := SegmentInto(bufs[:3], in, opts); !errors.Is(err, ErrDestTooSmall) {
		t.Errorf("SegmentInto with 3 buffers: %v, want ErrDestTooSmall", err)
	}
	bufs[0] = make([]byte, 100)
	if k, err := SegmentInto(bufs, in, opts); !errors.Is(err, ErrDestTooSmall) || k != 0 {
		t.Errorf("SegmentInto with a short buffer: %d, %v, want ErrDestTooSmall", k, err)
	}
	if _, err := SegmentFunc(in, opts, func(int) []byte { return nil }); !errors.Is(err, ErrDestTooSmall) {
		t.Errorf("SegmentFunc with nil buffer: %v", err)
	}
}

func TestSegmentErrors(t *testing.T) {
	good := buildSuper(t, superSpec{tsopt: true, flags: tcpACK, payload: 3000})
	good6 := buildSuper(t, superSpec{v6: true, ext: true, flags: tcpACK, payload: 3000})
	small6 := buildSuper(t, superSpec{v6: true, ext: true, flags: tcpACK, payload: 100})
	udp := buildSuper(t, superSpec{udp: true, payload: 3000})
	mod := func(b []byte, f func(b []byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	const l3 = 14
	cases := []struct {
		name  string
		frame []byte
		mss   int
		want  error
	}{
		{"mss 0", good, 0, ErrInvalidMSS},
		{"mss negative", good, -1, ErrInvalidMSS},
		{"mss too big", good, 70000, ErrInvalidMSS},
		{"empty", nil, 1448, ErrMalformed},
		{"ethernet only", good[:14], 1448, ErrMalformed},
		{"truncated IPv4", good[:30], 1448, ErrMalformed},
		{"IHL 4", mod(good, func(b []byte) { b[l3] = 0x44 }), 1448, ErrMalformed},
		{"IPv4 version 6", mod(good, func(b []byte) { b[l3] = 0x65 }), 1448, ErrMalformed},
		{"total length beyond buffer", good[:len(good)-1], 1448, ErrMalformed},
		{"total length below IHL", mod(good, func(b []byte) { binary.BigEndian.PutUint16(b[l3+2:], 10) }), 1448, ErrMalformed},
		{"IPv4 fragment", mod(good, func(b []byte) { b[l3+6] |= 0x20 }), 1448, ErrWrongProtocol},
		{"TCP data offset 4", mod(good, func(b []byte) { b[l3+20+12] = 0x40 }), 1448, ErrMalformed},
		{"TCP header beyond packet", mod(good, func(b []byte) { binary.BigEndian.PutUint16(b[l3+2:], 40) }), 1448, ErrMalformed},
		{"not TCP", udp, 1448, ErrWrongProtocol},
		{"ARP", mod(good, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), 1448, ErrWrongProtocol},
		{"truncated IPv6", good6[:50], 1448, ErrMalformed},
		{"IPv6 payload length 0", mod(good6, func(b []byte) { b[l3+4], b[l3+5] = 0, 0 }), 1448, ErrMalformed},
		{"IPv6 payload beyond buffer", good6[:len(good6)-1], 1448, ErrMalformed},
		{"IPv6 ext header beyond packet", mod(small6, func(b []byte) { b[l3+40+8+1] = 200 }), 1448, ErrMalformed},
		{"IPv6 hop-by-hop not first", mod(good6, func(b []byte) { b[l3+40+8] = 0 }), 1448, ErrMalformed},
		{"IPv6 fragment header", mod(good6, func(b []byte) { b[l3+40+8] = 44 }), 1448, ErrWrongProtocol},
		{"IPv6 ext header chain loop", ext6Loop(), 1448, ErrMalformed},
		{"VLAN tag stack", vlanStack(), 1448, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Segment(nil, c.frame, SegmentOptions{MSS: c.mss})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if len(out) != 0 {
				t.Errorf("%d segments returned with the error", len(out))
			}
		})
	}
}

// ext6Loop is an IPv6 packet whose destination options headers chain to
// each other more times than the parser walks.
func ext6Loop() []byte {
	b := make([]byte, 14+40+8*20+20)
	b[12], b[13] = 0x86, 0xdd
	b[14] = 0x60
	binary.BigEndian.PutUint16(b[14+4:], uint16(8*20+20))
	b[14+6] = 60
	for i := 0; i < 20; i++ {
		b[14+40+8*i] = 60
	}
	return b
}

func vlanStack() []byte {
	b := make([]byte, 14+4*10+60)
	b[12], b[13] = 0x81, 0x00
	for i := 0; i < 10; i++ {
		b[14+4*i+2], b[14+4*i+3] = 0x81, 0x00
	}
	return b
}

func TestCopySum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 70000)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	// Like copy, CopyChecksum stops at the shorter slice.
	if n, c := CopyChecksum(make([]byte, 3), src[:10]); n != 3 || c != Checksum(src[:3], 0) {
		t.Fatalf("CopyChecksum into 3 bytes = %d, %#04x; want 3, %#04x", n, c, Checksum(src[:3], 0))
	}
	dst := make([]byte, len(src))
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 1447, 1448, 1500, 9000, 65535}
	for i := 0; i < 200; i++ {
		lengths = append(lengths, rng.IntN(3000))
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 3, 8} {
			clear(dst)
			s := src[off : off+n]
			got := copySum(dst[off:], s)
			if n2, pub := CopyChecksum(dst[off:], s); n2 != len(s) || pub != got {
				t.Fatalf("CopyChecksum(len %d, off %d) = %d, %#04x; copySum %#04x", n, off, n2, pub, got)
			}
			if !bytes.Equal(dst[off:off+n], s) {
				t.Fatalf("copySum(len %d, off %d) copied wrong bytes", n, off)
			}
			want := segRefSum(s)
			if n == 0 {
				want = 0
			}
			if uint32(got) != want && !(got == 0 && want == 0xffff) && !(got == 0xffff && want == 0) {
				t.Fatalf("copySum(len %d, off %d) = %#04x, reference %#04x", n, off, got, want)
			}
			sc := copySumScalar(dst[off:], s)
			if g2 := bits.ReverseBytes16(Fold(sc)); g2 != got && !(g2^got == 0xffff && (g2 == 0 || got == 0)) {
				t.Fatalf("copySumScalar(len %d, off %d) = %#04x, copySum %#04x", n, off, g2, got)
			}
			if c := Checksum(s, 0); c != got && !(c^got == 0xffff && (c == 0 || got == 0)) {
				t.Fatalf("copySum(len %d, off %d) = %#04x, Checksum %#04x", n, off, got, c)
			}
		}
	}
	// All-ones data sums to 0xffff, not 0.
	ff := bytes.Repeat([]byte{0xff}, 100)
	if got := copySum(make([]byte, 100), ff); got != 0xffff {
		t.Errorf("copySum(0xff...) = %#04x", got)
	}
}
