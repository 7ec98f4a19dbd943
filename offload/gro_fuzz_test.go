package offload

import (
	"bytes"
	"os"
	"testing"
)

// groWeight is the number of TCP payload bytes in a frame, or its length
// if it is not a TCP frame: GRO must conserve the total.
func groWeight(f []byte) int {
	var lo Layout
	if e := parseLayout(&lo, f, ipProtoTCP); e.kind != nil {
		return len(f)
	}
	return lo.End - lo.Payload
}

// FuzzGRO feeds GRO the segments Segment makes of the input (with one byte
// of one segment flipped, to exercise the flush paths), the input itself
// and two pieces of it, and requires: no panic; every output frame is
// either a copy of an input frame or a merged TCP frame whose checksums
// verify; payload bytes are conserved; the input is not modified.
func FuzzGRO(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, frame []byte, mss uint16, flip bool) {
		if mss != 0 && int(mss) < len(frame)/64 {
			mss = uint16(len(frame)/64 + 1)
		}
		in := append([]byte(nil), frame...)
		segs, _ := Segment(nil, frame, SegmentOptions{MSS: int(mss)})
		if flip && len(segs) > 1 {
			s := segs[len(segs)/2]
			s[int(mss)%len(s)] ^= 0x10
		}
		inputs := append(segs, frame, frame[:len(frame)/2], frame[len(frame)/2:])
		for _, partial := range []bool{false, true} {
			g, err := NewGRO(GROOptions{PartialChecksum: partial, MaxFlows: 2})
			if err != nil {
				t.Fatal(err)
			}
			var out [][]byte
			for _, x := range inputs {
				out = g.Feed(out, x)
			}
			out = g.Flush(out)
			if g.Held() != 0 {
				t.Fatalf("%d held after Flush", g.Held())
			}
			win, wout := 0, 0
			for _, x := range inputs {
				win += groWeight(x)
			}
			for _, o := range out {
				wout += groWeight(o)
				copyOfInput := false
				for _, x := range inputs {
					if bytes.Equal(o, x) {
						copyOfInput = true
						break
					}
				}
				if copyOfInput || partial {
					continue
				}
				lo, err := parseSegLayout(o, ipProtoTCP, "fuzz")
				if err != nil {
					t.Fatalf("merged frame does not parse: %v", err)
				}
				if err := segRefVerify(o, lo); err != nil {
					t.Fatalf("merged frame: %v", err)
				}
			}
			if win != wout {
				t.Fatalf("payload bytes in %d, out %d", win, wout)
			}
			if !partial {
				checkGROVerify(t, inputs, out)
			}
		}
		if !bytes.Equal(in, frame) {
			t.Fatal("GRO modified its input")
		}
	})
}

func TestWriteGROCorpus(t *testing.T) {
	if os.Getenv("XDPIO_WRITE_CORPUS") != "1" {
		t.Skip("set XDPIO_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	var n int
	for _, s := range []superSpec{
		{payload: 6000, tsopt: true, flags: tcpACK | tcpPSH, id: 0xfffe},
		{v6: true, ext: true, vlans: 1, payload: 4000, flags: tcpACK | tcpFIN},
		{vlans: 2, ipOpts: true, payload: 3000, flags: tcpACK},
		{payload: 3001, flags: tcpACK | tcpCWR},
		{payload: 100, flags: tcpACK | tcpSYN},
	} {
		for _, mss := range []uint16{1000, 1448} {
			segWriteCorpus(t, "FuzzGRO", &n, buildSuper(t, s), mss, mss == 1000)
		}
	}
	segWriteCorpus(t, "FuzzGRO", &n, []byte("not a frame"), uint16(10), false)
}

// checkGROVerify requires of GRO with Verify, fed inputs: what GRO without
// it hands over (out), less the frames whose checksums do not verify
// (segRefVerify, the tests' own reference) or that are no TCP segment,
// in the same order and byte for byte; and as many drops counted as
// frames left out.
func checkGROVerify(t *testing.T, inputs, out [][]byte) {
	t.Helper()
	g, err := NewGRO(GROOptions{Verify: true, MaxFlows: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for _, x := range inputs {
		got = g.Feed(got, x)
	}
	got = g.Flush(got)
	var want [][]byte
	for _, o := range out {
		lo, err := parseSegLayout(o, ipProtoTCP, "fuzz")
		if err != nil || segRefVerify(o, lo) != nil {
			continue
		}
		want = append(want, o)
	}
	if len(got) != len(want) {
		t.Fatalf("Verify handed over %d frames, want the %d of %d that verify", len(got), len(want), len(out))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs with Verify", i)
		}
	}
	st := g.Stats()
	if dropped := st.BadChecksum + st.Unverifiable; dropped != uint64(len(out)-len(want)) {
		t.Fatalf("Verify counted %+v, want %d drops", st, len(out)-len(want))
	}
}
