package offload

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// seedFrames returns well-formed frames of every shape the parser knows,
// plus a few broken ones, as fuzz seeds.
func seedFrames() [][]byte {
	rng := rand.New(rand.NewPCG(41, 42))
	var out [][]byte
	shapes := []frameOpts{
		{proto: ProtoTCP, payload: 20},
		{proto: ProtoUDP, payload: 7, pad: 10},
		{proto: ProtoUDPLite, payload: 9},
		{proto: ProtoICMP, payload: 16},
		{proto: ProtoTCP, ipOpts: 8, tcpOpts: 12, payload: 3, vlans: []uint16{EtherTypeVLAN}},
		{proto: ProtoTCP, fragMore: true, payload: 8},
		{v6: true, proto: ProtoTCP, payload: 30, vlans: []uint16{EtherTypeQinQ, EtherTypeVLAN}},
		{v6: true, proto: ProtoUDP, payload: 11, ext: []uint8{ProtoHopByHop, ProtoDstOpts}},
		{v6: true, proto: ProtoICMPv6, payload: 8, ext: []uint8{ProtoRouting}, rtType: 4, rtAddrs: 2, rtLeft: 1},
		{v6: true, proto: ProtoUDP, payload: 4, ext: []uint8{ProtoRouting}, rtType: 0, rtAddrs: 3, rtLeft: 3},
		{v6: true, proto: ProtoTCP, payload: 12, ext: []uint8{ProtoFragment}},
		{v6: true, proto: ProtoUDP, payload: 12, ext: []uint8{ProtoFragment}, fragOff: 3},
		{v6: true, proto: ProtoUDPLite, payload: 12},
	}
	for _, o := range shapes {
		f := buildFrame(rng, o)
		FillChecksum(f)
		out = append(out, f)
	}
	broken := buildFrame(rng, frameOpts{proto: ProtoTCP, payload: 4})
	broken[EthernetLen] = 0x44 // IHL 4
	out = append(out, broken, []byte{1, 2, 3})
	loop := buildFrame(rng, frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoDstOpts, ProtoDstOpts, ProtoDstOpts}})
	out = append(out, loop[:len(loop)-3])
	return out
}

// FuzzVerifyRX: never panics, never writes to the frame, the derived
// (complete sum) path agrees with the direct one, and a frame that parses
// verifies ok after FillChecksum.
func FuzzVerifyRX(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := append([]byte(nil), frame...)
		r := VerifyRX(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatal("VerifyRX modified the frame")
		}
		var sum uint16
		if len(frame) >= EthernetLen {
			sum = Checksum(frame[EthernetLen:], 0)
		}
		if rc := VerifyRXComplete(frame, sum); rc != r {
			t.Fatalf("VerifyRXComplete %v, VerifyRX %v", rc, r)
		}
		_ = r.String()
		if r.Malformed() != r.Reason.Malformed() {
			t.Fatalf("Malformed %v but reason %q", r.Malformed(), r.Reason)
		}
		if r.Malformed() {
			return
		}
		done, err := FillChecksum(frame)
		if err != nil {
			t.Fatalf("FillChecksum on a frame VerifyRX parsed (%v): %v", r, err)
		}
		r2 := VerifyRX(frame)
		if r2.Bad() || r2.Malformed() {
			t.Fatalf("after FillChecksum (%v): %v", done, r2)
		}
		if done&FilledL4 != 0 && r2.L4 != VerdictOK {
			t.Fatalf("L4 filled but verdict %v", r2)
		}
		if done&FilledIPv4 != 0 && r2.L3 != VerdictOK {
			t.Fatalf("IPv4 header filled but verdict %v", r2)
		}
	})
}

// FuzzFill: FillChecksum and PreparePartial+FillPartial never panic, never
// write outside the frame (bytes after it in the same array are guarded),
// leave a frame they reject untouched, and what they fill verifies.
func FuzzFill(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		const guard = 64
		buf := make([]byte, len(frame)+guard)
		copy(buf, frame)
		for i := len(frame); i < len(buf); i++ {
			buf[i] = 0xa5
		}
		fr := buf[:len(frame)]
		checkGuard := func(op string) {
			for i := len(frame); i < len(buf); i++ {
				if buf[i] != 0xa5 {
					t.Fatalf("%s wrote past the end of the frame at +%d", op, i-len(frame))
				}
			}
		}
		done, err := FillChecksum(fr)
		checkGuard("FillChecksum")
		if err != nil {
			if !bytes.Equal(fr, frame) {
				t.Fatalf("FillChecksum returned %v and modified the frame", err)
			}
			if r := VerifyRX(fr); !r.Malformed() {
				t.Fatalf("FillChecksum: %v, but VerifyRX says %v", err, r)
			}
		} else if r := VerifyRX(fr); r.Bad() || r.Malformed() || (done&FilledL4 != 0 && r.L4 != VerdictOK) {
			t.Fatalf("after FillChecksum (%v): %v", done, r)
		}

		copy(fr, frame)
		start, off, err := PreparePartial(fr)
		checkGuard("PreparePartial")
		if err != nil {
			if !bytes.Equal(fr, frame) {
				t.Fatalf("PreparePartial returned %v and modified the frame", err)
			}
			return
		}
		// What PreparePartial leaves is what PartialChecksum recognizes
		// (unless the data happen to sum to 0: then it is correct).
		if r := VerifyRX(fr); r.L4 == VerdictBad && (r.Proto == ProtoTCP || r.Proto == ProtoUDP || r.Proto == ProtoUDPLite) && !PartialChecksum(fr) {
			t.Fatalf("PartialChecksum false after PreparePartial (%v)", r)
		}
		if err := FillPartial(fr, start, off); err != nil {
			t.Fatalf("FillPartial(%d, %d) after PreparePartial: %v", start, off, err)
		}
		checkGuard("FillPartial")
		if r := VerifyRX(fr); !r.OK() || r.L4 != VerdictOK {
			t.Fatalf("after PreparePartial+FillPartial(%d, %d): %v", start, off, r)
		}
		if PartialChecksum(fr) {
			t.Fatal("PartialChecksum true for a finished checksum")
		}
	})
}

// FuzzFillPartial: arbitrary csum_start/csum_offset are rejected or
// produce the checksum a plain loop computes, written only at the field.
func FuzzFillPartial(f *testing.F) {
	for i, s := range seedFrames() {
		f.Add(s, uint16(EthernetLen+20), uint16(16+i%3))
	}
	f.Add([]byte{1, 2, 3, 4}, uint16(0), uint16(2))
	f.Add([]byte{1, 2, 3, 4}, uint16(3), uint16(0))
	f.Add([]byte{}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, frame []byte, start, offset uint16) {
		buf := append(append([]byte(nil), frame...), 0xa5, 0xa5, 0xa5, 0xa5)
		fr := buf[:len(frame)]
		err := FillPartial(fr, int(start), int(offset))
		if !bytes.Equal(buf[len(frame):], []byte{0xa5, 0xa5, 0xa5, 0xa5}) {
			t.Fatal("FillPartial wrote past the end of the frame")
		}
		at := int(start) + int(offset)
		if at+2 > len(frame) {
			if err == nil {
				t.Fatalf("FillPartial(%d, %d) on %d bytes: no error", start, offset, len(frame))
			}
			if !bytes.Equal(fr, frame) {
				t.Fatal("rejected FillPartial modified the frame")
			}
			return
		}
		if err != nil {
			t.Fatalf("FillPartial(%d, %d) on %d bytes: %v", start, offset, len(frame), err)
		}
		want := ^refChecksum(frame[start:], 0)
		if want == 0 {
			want = 0xffff
		}
		if got := uint16(fr[at])<<8 | uint16(fr[at+1]); got != want {
			t.Fatalf("stored %#04x, want %#04x", got, want)
		}
		fr[at], fr[at+1] = frame[at], frame[at+1]
		if !bytes.Equal(fr, frame) {
			t.Fatal("FillPartial wrote outside the checksum field")
		}
	})
}

// TestWriteFuzzSeeds writes the seed corpora under testdata/fuzz when
// XDPIO_WRITE_SEEDS=1 (run it after changing seedFrames); plain go test
// then replays them.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("XDPIO_WRITE_SEEDS") != "1" {
		t.Skip("set XDPIO_WRITE_SEEDS=1 to regenerate testdata/fuzz seeds")
	}
	write := func(target string, i int, vals ...string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, v := range vals {
			body += v + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lit := func(b []byte) string { return "[]byte(" + strconv.Quote(string(b)) + ")" }
	for i, s := range seedFrames() {
		write("FuzzVerifyRX", i, lit(s))
		write("FuzzFill", i, lit(s))
		write("FuzzParse", i, lit(s))
		write("FuzzFillPartial", i, lit(s), fmt.Sprintf("uint16(%d)", EthernetLen+20), fmt.Sprintf("uint16(%d)", 16+i%3))
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for i, n := range []int{0, 1, 7, 20, 63, 64, 255, 256, 257, 1501} {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		write("FuzzChecksum", i, lit(b), fmt.Sprintf("uint16(%d)", rng.IntN(65536)), fmt.Sprintf("uint8(%d)", i%8))
	}
}
