package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func mustGRO(t testing.TB, opts GROOptions) *GRO {
	t.Helper()
	g, err := NewGRO(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGROInvertsSegment feeds Segment's output to GRO and requires the
// original super-packet back, byte for byte.
func TestGROInvertsSegment(t *testing.T) {
	for _, s := range []superSpec{
		{tsopt: true, flags: tcpACK | tcpPSH, payload: 65000, id: 0xfff0},
		{tsopt: true, flags: tcpACK | tcpCWR | tcpECE, payload: 10 * 1448, id: 3},
		{flags: tcpACK | tcpFIN, payload: 5000, id: 3},
		{v6: true, tsopt: true, flags: tcpACK | tcpPSH, payload: 65000},
		{v6: true, ext: true, vlans: 2, flags: tcpACK | tcpPSH | tcpFIN, payload: 30001},
		{vlans: 1, flags: tcpACK, payload: 1449},
	} {
		for _, mss := range []int{1448, 1000, 1} {
			if mss == 1 && s.payload > 5000 {
				continue
			}
			for _, fixed := range []bool{false, true} {
				t.Run(s.String(), func(t *testing.T) {
					in := buildSuper(t, s)
					segs, err := Segment(nil, in, SegmentOptions{MSS: mss, FixedID: fixed})
					if err != nil {
						t.Fatal(err)
					}
					g := mustGRO(t, GROOptions{})
					var out [][]byte
					for _, seg := range segs {
						out = g.Feed(out, seg)
					}
					out = g.Flush(out)
					if len(out) != 1 {
						t.Fatalf("GRO returned %d frames, want 1", len(out))
					}
					if !bytes.Equal(out[0], in) {
						t.Fatalf("GRO(Segment(x)) != x\n got %x\nwant %x", out[0][:80], in[:80])
					}
					gopacketCheck(t, out[0])
				})
			}
		}
	}
}

// groSeq builds n segments of a flow as Segment would cut them from one
// super-packet, for the rule tests to modify.
func groSeq(t *testing.T, v6 bool, n int) [][]byte {
	in := buildSuper(t, superSpec{v6: v6, tsopt: true, flags: tcpACK, payload: n * 1000, id: 100, seq: 5000})
	segs, err := Segment(nil, in, SegmentOptions{MSS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// groRefix recomputes a modified segment's IPv4 header and TCP checksums.
func groRefix(t *testing.T, f []byte) []byte {
	lo, err := parseSegLayout(f, ipProtoTCP, "groRefix")
	if err != nil {
		t.Fatal(err)
	}
	ip := f[lo.L3:]
	if !lo.IPv6 {
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], ^Checksum(ip[:lo.L4-lo.L3], 0))
	}
	binary.BigEndian.PutUint16(f[lo.L4+16:], 0)
	s := Combine(pseudoSum(ip, lo.IPv6, ipProtoTCP, lo.End-lo.L4), Checksum(f[lo.L4:lo.End], 0))
	binary.BigEndian.PutUint16(f[lo.L4+16:], ^s)
	return f
}

func TestGRORules(t *testing.T) {
	type mod func(t *testing.T, segs [][]byte) [][]byte
	at := func(i int, f func(b []byte)) mod {
		return func(t *testing.T, segs [][]byte) [][]byte {
			f(segs[i])
			segs[i] = groRefix(t, segs[i])
			return segs
		}
	}
	const l3, l4 = 14, 34
	cases := []struct {
		name string
		v6   bool
		mod  mod
		want []int // segments per output frame, in order
	}{
		{"all merge", false, nil, []int{4}},
		{"all merge v6", true, nil, []int{4}},
		{"seq gap", false, at(2, func(b []byte) { binary.BigEndian.PutUint32(b[l4+4:], 1) }), []int{2, 1, 1}},
		{"ack differs", false, at(1, func(b []byte) { b[l4+11]++ }), []int{1, 1, 2}},
		{"window differs", false, at(2, func(b []byte) { b[l4+15]++ }), []int{2, 1, 1}},
		{"timestamp differs", false, at(1, func(b []byte) { b[l4+20+11]++ }), []int{1, 1, 2}},
		{"CWR on second", false, at(1, func(b []byte) { b[l4+13] |= tcpCWR }), []int{1, 3}},
		{"ECE on second", false, at(1, func(b []byte) { b[l4+13] |= tcpECE }), []int{1, 1, 2}},
		{"PSH on second ends", false, at(1, func(b []byte) { b[l4+13] |= tcpPSH }), []int{2, 2}},
		{"FIN on third ends", false, at(2, func(b []byte) { b[l4+13] |= tcpFIN }), []int{3, 1}},
		{"SYN on first", false, at(0, func(b []byte) { b[l4+13] |= tcpSYN }), []int{1, 3}},
		{"URG on second", false, at(1, func(b []byte) { b[l4+13] |= tcpURG }), []int{1, 1, 2}},
		{"TTL differs", false, at(1, func(b []byte) { b[l3+8]-- }), []int{1, 1, 2}},
		{"TOS differs", false, at(3, func(b []byte) { b[l3+1] = 4 }), []int{3, 1}},
		{"DF differs", false, at(1, func(b []byte) { b[l3+6] &^= 0x40 }), []int{1, 1, 2}},
		{"ID jumps", false, at(2, func(b []byte) { b[l3+5] += 5 }), []int{2, 1, 1}},
		{"hop limit differs", true, at(1, func(b []byte) { b[l3+7]-- }), []int{1, 1, 2}},
		{"traffic class differs", true, at(1, func(b []byte) { b[l3+1] ^= 0x10 }), []int{1, 1, 2}},
		{"flow label differs", true, at(1, func(b []byte) { b[l3+3] ^= 1 }), []int{1, 1, 2}},
		{"bad TCP checksum", false, func(t *testing.T, s [][]byte) [][]byte { s[2][l4+16]++; return s }, []int{2, 1, 1}},
		{"bad IP checksum", false, func(t *testing.T, s [][]byte) [][]byte { s[2][l3+10]++; return s }, []int{2, 1, 1}},
		{"padding", false, func(t *testing.T, s [][]byte) [][]byte { s[1] = append(s[1], 0, 0); return s }, []int{1, 1, 2}},
		{"short second ends", false, func(t *testing.T, s [][]byte) [][]byte {
			s[1] = s[1][:len(s[1])-10]
			binary.BigEndian.PutUint16(s[1][l3+2:], uint16(len(s[1])-l3))
			groRefix(t, s[1])
			return s
		}, []int{2, 2}},
		{"larger second", false, func(t *testing.T, s [][]byte) [][]byte {
			s[0] = s[0][:len(s[0])-10]
			binary.BigEndian.PutUint16(s[0][l3+2:], uint16(len(s[0])-l3))
			groRefix(t, s[0])
			for i := 1; i < len(s); i++ {
				binary.BigEndian.PutUint32(s[i][l4+4:], binary.BigEndian.Uint32(s[i][l4+4:])-10)
				groRefix(t, s[i])
			}
			return s
		}, []int{1, 3}},
		{"pure ACK flushes", false, func(t *testing.T, s [][]byte) [][]byte {
			ack := append([]byte(nil), s[0][:l4+32]...)
			binary.BigEndian.PutUint16(ack[l3+2:], uint16(len(ack)-l3))
			binary.BigEndian.PutUint32(ack[l4+4:], binary.BigEndian.Uint32(s[2][l4+4:]))
			return append(s[:2], groRefix(t, ack), s[2], s[3])
		}, []int{2, 0, 2}},
		{"IP options", false, func(t *testing.T, s [][]byte) [][]byte {
			o := make([]byte, 0, len(s[1])+4)
			o = append(o, s[1][:l4]...)
			o = append(o, 1, 1, 1, 0)
			o = append(o, s[1][l4:]...)
			o[l3] = 0x46
			binary.BigEndian.PutUint16(o[l3+2:], uint16(len(o)-l3))
			s[1] = groRefix(t, o)
			return s
		}, []int{1, 1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			segs := groSeq(t, c.v6, 4)
			if c.mod != nil {
				segs = c.mod(t, segs)
			}
			g := mustGRO(t, GROOptions{})
			var out [][]byte
			for _, s := range segs {
				out = g.Feed(out, s)
			}
			out = g.Flush(out)
			if g.Held() != 0 {
				t.Errorf("Held() = %d after Flush", g.Held())
			}
			var got []int
			for _, f := range out {
				lo, err := parseSegLayout(f, ipProtoTCP, "test")
				if err != nil {
					t.Fatalf("output frame: %v", err)
				}
				got = append(got, (lo.End-lo.Payload+999)/1000)
				if len(f) > lo.End {
					continue // padded frame passed through
				}
				if err := segRefVerify(f, lo); err != nil && !bytes.Contains([]byte(c.name), []byte("bad")) {
					t.Errorf("output frame: %v", err)
				}
			}
			if !segEqualInts(got, c.want) {
				t.Errorf("segments per output frame = %v, want %v", got, c.want)
			}
		})
	}
}

func segEqualInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGROFlowsAndPassThrough(t *testing.T) {
	a := groSeq(t, false, 3)
	b := groSeq(t, true, 3)
	g := mustGRO(t, GROOptions{MaxFlows: 2})
	other := []byte("not a packet at all")
	var out [][]byte
	for i := 0; i < 3; i++ {
		out = g.Feed(out, a[i])
		out = g.Feed(out, b[i])
		out = g.Feed(out, other)
	}
	if len(out) != 3 || g.Held() != 2 {
		t.Fatalf("%d frames out, %d held; want 3 pass-through, 2 held", len(out), g.Held())
	}
	for _, f := range out {
		if !bytes.Equal(f, other) {
			t.Fatalf("pass-through frame changed: %q", f)
		}
	}
	// A third flow evicts the oldest (a).
	c := groSeq(t, false, 1)[0]
	binary.BigEndian.PutUint16(c[34:], 1234)
	groRefix(t, c)
	out = g.Feed(out[:0], c)
	if len(out) != 1 || len(out[0]) != len(a[0])+2000 {
		t.Fatalf("eviction: %d frames", len(out))
	}
	out = g.Flush(out[:0])
	if len(out) != 2 {
		t.Fatalf("Flush returned %d frames, want 2", len(out))
	}
	// Steady state reuses buffers.
	if allocs := testing.AllocsPerRun(20, func() {
		out = out[:0]
		for i := 0; i < 3; i++ {
			out = g.Feed(out, a[i])
			out = g.Feed(out, other)
		}
		out = g.Flush(out)
	}); allocs != 0 {
		t.Errorf("steady state: %v allocs per run", allocs)
	}
}

func TestGROPartialChecksum(t *testing.T) {
	segs := groSeq(t, false, 3)
	g := mustGRO(t, GROOptions{PartialChecksum: true})
	var out [][]byte
	for _, s := range segs {
		out = g.Feed(out, s)
	}
	out = g.Flush(out)
	lo, _ := parseSegLayout(out[0], ipProtoTCP, "test")
	want := pseudoSum(out[0][lo.L3:], false, ipProtoTCP, lo.End-lo.L4)
	if got := binary.BigEndian.Uint16(out[0][lo.L4+16:]); got != want {
		t.Errorf("partial checksum %#04x, want pseudo-header sum %#04x", got, want)
	}
}

func TestNewGROErrors(t *testing.T) {
	for _, o := range []GROOptions{{MaxSize: 10}, {MaxSize: 70000}, {MaxFlows: -1}, {MaxFlows: 5000}} {
		if _, err := NewGRO(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewGRO(%+v): %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestGROMaxSize(t *testing.T) {
	segs := groSeq(t, false, 10)
	g := mustGRO(t, GROOptions{MaxSize: 20 + 32 + 3000})
	var out [][]byte
	for _, s := range segs {
		out = g.Feed(out, s)
	}
	out = g.Flush(out)
	if len(out) != 4 {
		t.Fatalf("%d frames, want 4 (3+3+3+1 segments)", len(out))
	}
}

// With Verify, GRO is the checksum check: a segment with a wrong TCP or
// IPv4 header checksum is dropped and counted (what it held goes first),
// as is a frame that is no TCP segment; one whose TCP checksum was left
// to a TX offload is counted as such; good segments merge as without it.
func TestGROVerify(t *testing.T) {
	g := mustGRO(t, GROOptions{Verify: true})
	segs := groSeq(t, false, 5)
	segs[2][70] ^= 0xff // payload: TCP checksum wrong
	segs[3][24] ^= 0x01 // TTL: IPv4 header checksum wrong
	var out [][]byte
	for _, s := range segs {
		out = g.Feed(out, s)
	}
	out = g.Flush(out)
	if len(out) != 2 || len(out[0]) != len(segs[0])+1000 || len(out[1]) != len(segs[4]) {
		t.Fatalf("%d frames out: want segments 0-1 merged, then 4", len(out))
	}
	for i, o := range out {
		if v := VerifyRX(o); !v.L4Verified() || v.L3 != VerdictOK {
			t.Errorf("frame %d: %v", i, v)
		}
	}
	if st := g.Stats(); st.BadChecksum != 2 || st.PartialChecksum != 0 || st.Unverifiable != 0 {
		t.Errorf("stats %+v: want 2 bad checksums", st)
	}

	// A segment GRO passes on alone (PSH, no payload) is verified too.
	g = mustGRO(t, GROOptions{Verify: true})
	lone := groRefix(t, groSeq(t, true, 1)[0])
	lone[14+40+13] |= tcpPSH
	groRefix(t, lone)
	if out = g.Feed(out[:0], lone); len(out) != 1 || !bytes.Equal(out[0], lone) {
		t.Fatalf("a good lone segment: %d frames out", len(out))
	}
	bad := append([]byte(nil), lone...)
	bad[len(bad)-1] ^= 1
	if out = g.Feed(out[:0], bad); len(out) != 0 {
		t.Fatalf("a bad lone segment was handed over")
	}
	// Left unfinished by a sender's TX offload: the pseudo-header sum.
	partial := append([]byte(nil), lone...)
	lo, _ := parseSegLayout(partial, ipProtoTCP, "test")
	binary.BigEndian.PutUint16(partial[lo.L4+16:], pseudoSum(partial[lo.L3:], true, ipProtoTCP, lo.End-lo.L4))
	if out = g.Feed(out[:0], partial); len(out) != 0 {
		t.Fatalf("a partial checksum was handed over")
	}
	if out = g.Feed(out[:0], []byte("not a packet at all")); len(out) != 0 {
		t.Fatalf("a frame that is no TCP segment was handed over")
	}
	if st := g.Stats(); st.BadChecksum != 2 || st.PartialChecksum != 1 || st.Unverifiable != 1 {
		t.Errorf("stats %+v: want 2 bad checksums, 1 of them partial, 1 unverifiable", st)
	}
	g = mustGRO(t, GROOptions{Verify: true, AcceptPartialChecksum: true})
	if out = g.Feed(out[:0], partial); len(out) != 1 || !bytes.Equal(out[0], partial) {
		t.Fatalf("AcceptPartialChecksum: a partial checksum was not handed over as it came")
	}
	if out = g.Feed(out[:0], bad); len(out) != 0 {
		t.Fatalf("AcceptPartialChecksum: a bad checksum was handed over")
	}
	if st := g.Stats(); st.BadChecksum != 1 || st.PartialChecksum != 1 {
		t.Errorf("AcceptPartialChecksum: stats %+v: want 1 bad, 1 partial (accepted)", st)
	}
	if _, err := NewGRO(GROOptions{AcceptPartialChecksum: true}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("AcceptPartialChecksum without Verify: %v, want ErrInvalidOptions", err)
	}
}

// With AcceptPartialChecksum, segments whose checksums a sender on this
// host left to its TX offload merge as verified ones do.
func TestGROAcceptPartialMerges(t *testing.T) {
	segs := groSeq(t, false, 4)
	var full [][]byte
	g := mustGRO(t, GROOptions{PartialChecksum: true})
	for _, s := range segs {
		full = g.Feed(full, s)
	}
	full = g.Flush(full)
	for _, s := range segs {
		lo, _ := parseSegLayout(s, ipProtoTCP, "test")
		binary.BigEndian.PutUint16(s[lo.L4+16:], pseudoSum(s[lo.L3:], false, ipProtoTCP, lo.End-lo.L4))
	}
	g = mustGRO(t, GROOptions{PartialChecksum: true, Verify: true, AcceptPartialChecksum: true})
	var out [][]byte
	for _, s := range segs {
		out = g.Feed(out, s)
	}
	out = g.Flush(out)
	if len(out) != 1 || len(full) != 1 || !bytes.Equal(out[0], full[0]) {
		t.Fatalf("%d frames out, want the one packet the verified segments make", len(out))
	}
	if st := g.Stats(); st.PartialChecksum != 4 || st.BadChecksum != 0 {
		t.Errorf("stats %+v: want 4 partial checksums, none bad", st)
	}
}
