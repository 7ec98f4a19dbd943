package offload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fuzzSeeds(f *testing.F, udp bool) {
	for _, s := range []superSpec{
		{payload: 3000, tsopt: true, flags: tcpACK | tcpPSH | tcpCWR | tcpFIN},
		{v6: true, ext: true, vlans: 1, payload: 2000, flags: tcpACK},
		{vlans: 2, ipOpts: true, payload: 100, flags: tcpACK | tcpPSH},
		{v6: true, payload: 0, flags: tcpACK},
	} {
		s.udp = udp
		f.Add(buildSuper(f, s), uint16(536), false)
		f.Add(buildSuper(f, s), uint16(1), true)
	}
	f.Add([]byte{}, uint16(0), false)
	f.Add(ext6Loop(), uint16(100), false)
}

// fuzzSegment runs one segmentation input through every output style and
// checks the result (or the error) the same way for TCP and UDP.
func fuzzSegment(t *testing.T, frame []byte, mss uint16, fixed bool, proto uint8) {
	if mss != 0 && int(mss) < len(frame)/64 {
		// Bound the work per input (segment count) to keep the fuzzer fast.
		mss = uint16(len(frame)/64 + 1)
	}
	opts := SegmentOptions{MSS: int(mss), FixedID: fixed}
	in := append([]byte(nil), frame...)
	var segs [][]byte
	var err error
	if proto == ipProtoTCP {
		segs, err = Segment(nil, frame, opts)
	} else {
		segs, err = SegmentUDP(nil, frame, opts)
	}
	// The template form on an arbitrary split must not panic, and its
	// output must verify.
	if k := int(mss) % (len(frame) + 1); true {
		fn := SegmentPayload
		if proto == ipProtoUDP {
			fn = SegmentUDPPayload
		}
		var outs [][]byte
		_, perr := fn(frame[:k], frame[k:], opts, func(size int) []byte {
			b := make([]byte, size)
			outs = append(outs, b)
			return b
		})
		if perr == nil {
			for i, o := range outs {
				lo, err := parseSegLayout(o, proto, "fuzz")
				if err != nil {
					t.Fatalf("template split %d: segment %d: %v", k, i, err)
				}
				if err := segRefVerify(o, lo); err != nil {
					t.Fatalf("template split %d: segment %d: %v", k, i, err)
				}
			}
		}
	}
	if string(in) != string(frame) {
		t.Fatal("segmentation modified its input")
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrWrongProtocol) && !errors.Is(err, ErrInvalidMSS) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if len(segs) != 0 {
			t.Fatalf("%d segments with error %v", len(segs), err)
		}
		return
	}
	if err := checkReassembles(frame, segs, opts, proto); err != nil {
		t.Fatal(err)
	}
	// Split at the payload, the template form must write the same frames.
	if lo, err := parseSegLayout(frame, proto, "fuzz"); err == nil && lo.Payload <= segMaxHeader {
		fn := SegmentPayload
		if proto == ipProtoUDP {
			fn = SegmentUDPPayload
		}
		var tsegs [][]byte
		_, err := fn(frame[:lo.Payload], frame[lo.Payload:lo.End], opts, func(size int) []byte {
			b := make([]byte, size)
			tsegs = append(tsegs, b)
			return b
		})
		if err != nil {
			t.Fatalf("template form: %v", err)
		}
		if len(tsegs) != len(segs) {
			t.Fatalf("template form: %d segments, want %d", len(tsegs), len(segs))
		}
		for i := range segs {
			if string(tsegs[i]) != string(segs[i]) {
				t.Fatalf("template form: segment %d differs", i)
			}
		}
	}
	// The zero-copy form must agree, and must not write past the length
	// it reports: guard bytes after each buffer's segment stay intact.
	bufs := make([][]byte, len(segs))
	full := make([][]byte, len(segs))
	for i := range bufs {
		full[i] = make([]byte, len(segs[i])+16)
		for j := range full[i] {
			full[i][j] = 0xee
		}
		bufs[i] = full[i][:len(segs[i]):len(segs[i])]
	}
	var n int
	if proto == ipProtoTCP {
		n, err = SegmentInto(bufs, frame, opts)
	} else {
		n, err = SegmentUDPInto(bufs, frame, opts)
	}
	if err != nil || n != len(segs) {
		t.Fatalf("Into = %d, %v; want %d", n, err, len(segs))
	}
	for i := range segs {
		if string(bufs[i]) != string(segs[i]) {
			t.Fatalf("segment %d differs between output styles", i)
		}
		for _, g := range full[i][len(segs[i]):] {
			if g != 0xee {
				t.Fatalf("segment %d: write past its end", i)
			}
		}
	}
}

// FuzzSegment: the output reassembles to the input and every checksum
// verifies, or the error wraps a sentinel; never a panic or an
// out-of-range write.
func FuzzSegment(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, frame []byte, mss uint16, fixed bool) {
		fuzzSegment(t, frame, mss, fixed, ipProtoTCP)
	})
}

// FuzzUSO is FuzzSegment for UDP segmentation.
func FuzzUSO(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, frame []byte, mss uint16, fixed bool) {
		fuzzSegment(t, frame, mss, fixed, ipProtoUDP)
	})
}

// TestWriteSegmentCorpus regenerates the committed seed corpora under
// testdata/fuzz when XDPIO_WRITE_CORPUS=1 (plain go test replays them).
func TestWriteSegmentCorpus(t *testing.T) {
	if os.Getenv("XDPIO_WRITE_CORPUS") != "1" {
		t.Skip("set XDPIO_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	for name, udp := range map[string]bool{"FuzzSegment": false, "FuzzUSO": true} {
		var n int
		for _, s := range []superSpec{
			{payload: 3000, tsopt: true, flags: tcpACK | tcpPSH | tcpCWR | tcpFIN, id: 0xffff},
			{v6: true, ext: true, vlans: 1, payload: 2000, flags: tcpACK},
			{vlans: 2, ipOpts: true, payload: 100, flags: tcpACK | tcpPSH},
			{v6: true, payload: 0, flags: tcpACK},
			{payload: 1449, badCsums: true, flags: tcpACK | tcpURG},
		} {
			s.udp = udp
			for _, mss := range []uint16{1448, 7} {
				segWriteCorpus(t, name, &n, buildSuper(t, s), mss, mss == 7)
			}
		}
		good := buildSuper(t, superSpec{udp: udp, payload: 300})
		segWriteCorpus(t, name, &n, good[:len(good)-1], uint16(100), false) // length beyond buffer
		ihl := append([]byte(nil), good...)
		ihl[14] = 0x44
		segWriteCorpus(t, name, &n, ihl, uint16(100), false)
		segWriteCorpus(t, name, &n, ext6Loop(), uint16(100), false)
		segWriteCorpus(t, name, &n, vlanStack(), uint16(100), false)
		segWriteCorpus(t, name, &n, good, uint16(0), false)
	}
}

func segWriteCorpus(t *testing.T, name string, n *int, args ...any) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		default:
			t.Fatalf("corpus value %T", a)
		}
	}
	*n++
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", *n)), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
