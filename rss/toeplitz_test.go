package rss

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// msVector is one row of Microsoft's RSS verification suite.
type msVector struct {
	dst, src       netip.Addr
	dport, sport   uint16
	hashL3, hashL4 uint32
}

// readMSVectors reads testdata/microsoft_rss_vectors.txt, which cites the
// published source (Microsoft, "Verifying the RSS Hash Calculation"; the
// same table is in Intel's 82599 datasheet, 7.1.2.8.3).
func readMSVectors(tb testing.TB) []msVector {
	tb.Helper()
	f, err := os.Open("testdata/microsoft_rss_vectors.txt")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var vs []msVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 6 {
			tb.Fatalf("bad vector line %q", line)
		}
		num := func(s string, bits int) uint64 {
			n, err := strconv.ParseUint(s, 0, bits)
			if err != nil {
				tb.Fatalf("bad number %q in %q: %v", s, line, err)
			}
			return n
		}
		vs = append(vs, msVector{
			dst: netip.MustParseAddr(fs[0]), dport: uint16(num(fs[1], 16)),
			src: netip.MustParseAddr(fs[2]), sport: uint16(num(fs[3], 16)),
			hashL3: uint32(num(fs[4], 32)), hashL4: uint32(num(fs[5], 32)),
		})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(vs) != 8 {
		tb.Fatalf("read %d vectors, want the suite's 5 IPv4 and 3 IPv6 rows", len(vs))
	}
	return vs
}

// refHash is the bit-by-bit Toeplitz hash exactly as Microsoft's
// pseudocode states it: for each input bit from the left, if it is set
// XOR the left-most 32 bits of K into the result; shift K left one bit.
// Key bits past the end are zero. It is the oracle for the table-driven
// implementation and its speed is the benchmark's baseline.
func refHash(key, input []byte) uint32 {
	keyBit := func(i int) uint32 {
		if i/8 >= len(key) {
			return 0
		}
		return uint32(key[i/8]>>(7-i%8)) & 1
	}
	var k uint32 // left-most 32 bits of the shifted key
	for i := range 32 {
		k = k<<1 | keyBit(i)
	}
	var h uint32
	for i := range 8 * len(input) {
		if input[i/8]&(0x80>>(i%8)) != 0 {
			h ^= k
		}
		k = k<<1 | keyBit(32+i)
	}
	return h
}

func newT(tb testing.TB, key []byte) *Toeplitz {
	tb.Helper()
	t, err := NewToeplitz(key)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func TestMicrosoftVerificationSuite(t *testing.T) {
	h := newT(t, nil)
	for _, v := range readMSVectors(t) {
		name := fmt.Sprintf("%v:%d>%v:%d", v.src, v.sport, v.dst, v.dport)
		t.Run(name, func(t *testing.T) {
			l3 := FlowKey{Src: v.src, Dst: v.dst}
			l4 := FlowKey{Src: v.src, Dst: v.dst, SrcPort: v.sport, DstPort: v.dport, Ports: true}
			checks := []struct {
				what string
				got  uint32
				want uint32
			}{
				{"HashFlow L3", h.HashFlow(l3, SymmetricNone), v.hashL3},
				{"HashFlow L4", h.HashFlow(l4, SymmetricNone), v.hashL4},
				{"Hash(Input) L3", h.Hash(l3.Input(nil, SymmetricNone)), v.hashL3},
				{"Hash(Input) L4", h.Hash(l4.Input(nil, SymmetricNone)), v.hashL4},
				{"refHash L3", refHash(DefaultKey(), l3.Input(nil, SymmetricNone)), v.hashL3},
				{"refHash L4", refHash(DefaultKey(), l4.Input(nil, SymmetricNone)), v.hashL4},
			}
			if v.src.Is4() {
				checks = append(checks,
					struct {
						what      string
						got, want uint32
					}{"HashIPv4", h.HashIPv4(v.src.As4(), v.dst.As4()), v.hashL3},
					struct {
						what      string
						got, want uint32
					}{"HashIPv4Ports", h.HashIPv4Ports(v.src.As4(), v.dst.As4(), v.sport, v.dport), v.hashL4})
			} else {
				checks = append(checks,
					struct {
						what      string
						got, want uint32
					}{"HashIPv6", h.HashIPv6(v.src.As16(), v.dst.As16()), v.hashL3},
					struct {
						what      string
						got, want uint32
					}{"HashIPv6Ports", h.HashIPv6Ports(v.src.As16(), v.dst.As16(), v.sport, v.dport), v.hashL4})
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %#08x, want %#08x", c.what, c.got, c.want)
				}
			}
		})
	}
}

// bitwiseHash is the usual bit-by-bit software Toeplitz (one test and one
// shift per input bit, without branches, a 64-bit key window refilled a byte at a time), the
// way RSS hashes are computed without tables. It is the speed baseline the
// benchmarks compare the table-driven hash with; TestHashMatchesReference
// checks it against refHash.
func bitwiseHash(key, input []byte) uint32 {
	var k uint64
	for i := range 8 {
		k <<= 8
		if i < len(key) {
			k |= uint64(key[i])
		}
	}
	var h uint32
	for i, v := range input {
		for b := range 8 {
			bit := uint32(v>>(7-b)) & 1
			h ^= uint32(k>>32) & -bit // branch-free: random bits defeat prediction
			k <<= 1
		}
		if i+8 < len(key) {
			k |= uint64(key[i+8])
		}
	}
	return h
}

// TestHashMatchesReference compares the table-driven hash with the
// bit-by-bit reference over random keys of many lengths (shorter and
// longer than the input, and past the table cap) and random inputs.
func TestHashMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, klen := range []int{4, 5, 8, 12, 16, 39, 40, 52, 63, 64, 65, 80, 128} {
		key := make([]byte, klen)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		h := newT(t, key)
		for range 300 {
			in := make([]byte, rng.IntN(100))
			for i := range in {
				in[i] = byte(rng.Uint32())
			}
			want := refHash(key, in)
			if got := h.Hash(in); got != want {
				t.Fatalf("key %x input %x: Hash = %#08x, reference %#08x", key, in, got, want)
			}
			if got := bitwiseHash(key, in); got != want {
				t.Fatalf("key %x input %x: bitwiseHash = %#08x, reference %#08x", key, in, got, want)
			}
		}
		// The fixed-layout fast paths agree with the generic path even
		// when the key is too short to cover their input.
		for range 100 {
			k := randFlow(rng, rng.IntN(2) == 0)
			for _, s := range []Symmetric{SymmetricNone, SymmetricXOR, SymmetricOrXOR} {
				if got, want := h.HashFlow(k, s), refHash(key, k.Input(nil, s)); got != want {
					t.Fatalf("key %x flow %v %v: HashFlow = %#08x, reference %#08x", key, k, s, got, want)
				}
			}
		}
	}
}

func randFlow(rng *rand.Rand, v6 bool) FlowKey {
	var k FlowKey
	if v6 {
		var a, b [16]byte
		for i := range a {
			a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		k.Src, k.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
	} else {
		var a, b [4]byte
		for i := range a {
			a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		k.Src, k.Dst = netip.AddrFrom4(a), netip.AddrFrom4(b)
	}
	k.SrcPort, k.DstPort = uint16(rng.Uint32()), uint16(rng.Uint32())
	k.Ports = rng.IntN(4) != 0
	if k.Ports {
		k.Proto = 6
	}
	return k
}

func TestSymmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	def := newT(t, nil)
	sym := newT(t, SymmetricKey(40))
	asym := 0
	for range 2000 {
		k := randFlow(rng, rng.IntN(2) == 0)
		r := k.Reverse()
		for _, s := range []Symmetric{SymmetricXOR, SymmetricOrXOR} {
			if a, b := def.HashFlow(k, s), def.HashFlow(r, s); a != b {
				t.Fatalf("%v with %v: %#08x, reverse %#08x", k, s, a, b)
			}
		}
		if a, b := sym.HashFlow(k, SymmetricNone), sym.HashFlow(r, SymmetricNone); a != b {
			t.Fatalf("%v with the symmetric key: %#08x, reverse %#08x", k, a, b)
		}
		if def.HashFlow(k, SymmetricNone) != def.HashFlow(r, SymmetricNone) {
			asym++
		}
	}
	// The property is not vacuous: the default key is not symmetric.
	if asym < 1900 {
		t.Errorf("default key without transformation hashed %d of 2000 flows differently from their reverse; want nearly all", asym)
	}
}

func TestSymmetricXORInput(t *testing.T) {
	// The transformed input is what scaling.rst documents.
	k := FlowKey{
		Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 0x1234, DstPort: 0x00ff, Ports: true,
	}
	got := fmt.Sprintf("%x", k.Input(nil, SymmetricXOR))
	if want := "00000003" + "00000003" + "12cb" + "12cb"; got != want {
		t.Errorf("symmetric-xor input = %s, want %s", got, want)
	}
	got = fmt.Sprintf("%x", k.Input(nil, SymmetricOrXOR))
	if want := "c6120003" + "00000003" + "12ff" + "12cb"; got != want {
		t.Errorf("symmetric-or-xor input = %s, want %s", got, want)
	}
}

func TestKeys(t *testing.T) {
	if got := fmt.Sprintf("%x", DefaultKey()); got != DefaultKeyHex {
		t.Errorf("DefaultKey = %s, want %s", got, DefaultKeyHex)
	}
	k, err := ParseKey("6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa")
	if err != nil || fmt.Sprintf("%x", k) != DefaultKeyHex {
		t.Errorf("ParseKey(colon form) = %x, %v", k, err)
	}
	if k, err := ParseKey("0x" + DefaultKeyHex); err != nil || len(k) != 40 {
		t.Errorf("ParseKey(0x form) = %x, %v", k, err)
	}
	for _, bad := range []string{"", "6d5a56", "zz5a56da", "6d5a56d"} {
		if _, err := ParseKey(bad); !errors.Is(err, ErrKeyInvalid) {
			t.Errorf("ParseKey(%q) error = %v, want ErrKeyInvalid", bad, err)
		}
	}
	if _, err := NewToeplitz([]byte{1, 2, 3}); !errors.Is(err, ErrKeyInvalid) {
		t.Errorf("NewToeplitz(3 bytes) error = %v, want ErrKeyInvalid", err)
	}
	h := newT(t, nil)
	if h.MaxInput() != 36 {
		t.Errorf("MaxInput = %d, want 36", h.MaxInput())
	}
	key := h.Key()
	key[0] ^= 0xff
	if fmt.Sprintf("%x", h.Key()) != DefaultKeyHex {
		t.Error("Key returned the hasher's own slice")
	}
	for _, s := range []string{"xor", "symmetric-xor", "or-xor", "symmetric-or-xor", "none", ""} {
		v, err := ParseSymmetric(s)
		if err != nil {
			t.Errorf("ParseSymmetric(%q): %v", s, err)
			continue
		}
		if w, _ := ParseSymmetric(v.String()); w != v {
			t.Errorf("ParseSymmetric(%q).String() = %q does not round-trip", s, v)
		}
	}
	if _, err := ParseSymmetric("sym"); !errors.Is(err, ErrSymmetricInvalid) {
		t.Errorf("ParseSymmetric(sym) error = %v", err)
	}
}

func TestFlowKeyValidate(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")
	for _, k := range []FlowKey{{}, {Src: v4}, {Src: v4, Dst: v6}} {
		if err := k.Validate(); !errors.Is(err, ErrFlowKey) {
			t.Errorf("Validate(%v) = %v, want ErrFlowKey", k, err)
		}
		if h := newT(t, nil).HashFlow(k, SymmetricNone); h != 0 {
			t.Errorf("HashFlow(%v) = %#x, want 0 for an invalid key", k, h)
		}
	}
	if err := (FlowKey{Src: v6, Dst: v6}).Validate(); err != nil {
		t.Error(err)
	}
}

// The benchmarks run the table-driven hash and the bit-by-bit reference in
// the same binary; compare them as a ratio:
//
//	go test ./rss -run '^$' -bench 'Toeplitz' -count 5
var sinkHash uint32

func benchFlows() []FlowKey {
	rng := rand.New(rand.NewPCG(5, 6))
	fs := make([]FlowKey, 1024)
	for i := range fs {
		fs[i] = randFlow(rng, false)
		fs[i].Ports = true
	}
	return fs
}

func BenchmarkToeplitzIPv4Ports(b *testing.B) {
	h := newT(b, nil)
	fs := benchFlows()
	type tuple struct {
		src, dst   [4]byte
		sport, dpt uint16
	}
	ts := make([]tuple, len(fs))
	for i, f := range fs {
		ts[i] = tuple{f.Src.As4(), f.Dst.As4(), f.SrcPort, f.DstPort}
	}
	b.Run("table", func(b *testing.B) {
		b.SetBytes(ipv4PortsLen)
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			t := &ts[i&1023]
			x ^= h.HashIPv4Ports(t.src, t.dst, t.sport, t.dpt)
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hashes/s")
	})
	b.Run("flowkey", func(b *testing.B) {
		b.SetBytes(ipv4PortsLen)
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			x ^= h.HashFlow(fs[i&1023], SymmetricNone)
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hashes/s")
	})
	inputs := make([][]byte, len(fs))
	for i, f := range fs {
		inputs[i] = f.Input(nil, SymmetricNone)
	}
	key := DefaultKey()
	b.Run("bitwise", func(b *testing.B) {
		b.SetBytes(ipv4PortsLen)
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			x ^= bitwiseHash(key, inputs[i&1023])
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hashes/s")
	})
}

// BenchmarkToeplitzSpeedup alternates blocks of table-driven and
// bit-by-bit hashes of the same IPv4 4-tuples in one loop, so that the
// noise of a shared machine hits both alike, and reports the speedup. The
// fastest block of each kind estimates the unloaded speed (a block is short
// enough to often run undisturbed); the *-mean metrics use all blocks.
func BenchmarkToeplitzSpeedup(b *testing.B) {
	h := newT(b, nil)
	fs := benchFlows()
	inputs := make([][]byte, len(fs))
	type tuple struct {
		src, dst   [4]byte
		sport, dpt uint16
	}
	ts := make([]tuple, len(fs))
	for i, f := range fs {
		inputs[i] = f.Input(nil, SymmetricNone)
		ts[i] = tuple{f.Src.As4(), f.Dst.As4(), f.SrcPort, f.DstPort}
	}
	key := DefaultKey()
	const block = 256
	b.ReportAllocs()
	var tTable, tBit time.Duration
	minTable, minBit := time.Duration(1<<62), time.Duration(1<<62)
	var x uint32
	for b.Loop() {
		t0 := time.Now()
		for i := range block {
			t := &ts[i]
			x ^= h.HashIPv4Ports(t.src, t.dst, t.sport, t.dpt)
		}
		t1 := time.Now()
		for i := range block {
			x ^= bitwiseHash(key, inputs[i])
		}
		t2 := time.Now()
		tTable += t1.Sub(t0)
		tBit += t2.Sub(t1)
		minTable, minBit = min(minTable, t1.Sub(t0)), min(minBit, t2.Sub(t1))
	}
	sinkHash = x
	n := float64(b.N * block)
	b.ReportMetric(float64(minTable.Nanoseconds())/block, "table-ns/hash")
	b.ReportMetric(float64(minBit.Nanoseconds())/block, "bitwise-ns/hash")
	b.ReportMetric(float64(minBit)/float64(minTable), "speedup")
	b.ReportMetric(block/minTable.Seconds(), "table-hashes/s")
	b.ReportMetric(float64(tBit)/float64(tTable), "speedup-mean")
	b.ReportMetric(n/tTable.Seconds(), "table-hashes/s-mean")
}

func BenchmarkToeplitzIPv6Ports(b *testing.B) {
	h := newT(b, nil)
	rng := rand.New(rand.NewPCG(7, 8))
	fs := make([]FlowKey, 1024)
	inputs := make([][]byte, len(fs))
	for i := range fs {
		fs[i] = randFlow(rng, true)
		fs[i].Ports = true
		inputs[i] = fs[i].Input(nil, SymmetricNone)
	}
	b.Run("table", func(b *testing.B) {
		b.SetBytes(ipv6PortsLen)
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			x ^= h.HashFlow(fs[i&1023], SymmetricNone)
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hashes/s")
	})
	key := DefaultKey()
	b.Run("bitwise", func(b *testing.B) {
		b.SetBytes(ipv6PortsLen)
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			x ^= bitwiseHash(key, inputs[i&1023])
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hashes/s")
	})
}

// FuzzParseKey feeds arbitrary text to the key parser: it never panics,
// errors wrap ErrKeyInvalid, and an accepted key is the input's hex digits
// (0x prefix, spaces and colons aside) and hashes like the same key given
// as bytes.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{DefaultKeyHex, "0x" + DefaultKeyHex, "6d:5a:56:da:25", " 6D5A56DA ", "", "6d5a5", "zz", "6d::5a:56:da", "0X6d5a56da"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrKeyInvalid) {
				t.Fatalf("error %v does not wrap ErrKeyInvalid", err)
			}
			return
		}
		norm := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
		norm = strings.TrimPrefix(norm, "0x")
		if got := fmt.Sprintf("%x", k); got != norm {
			t.Fatalf("ParseKey(%q) = %s, want %s", s, got, norm)
		}
		h, err := NewToeplitz(k)
		if err != nil {
			t.Fatalf("NewToeplitz of a parsed key: %v", err)
		}
		in := []byte("0123456789abcdef")
		if a, b := h.Hash(in), refHash(k, in); a != b {
			t.Fatalf("key %x: Hash %#x, reference %#x", k, a, b)
		}
	})
}

// FuzzParseNames: the CLI's names for an input transformation and an
// indirection index rule parse to a value or an error, never a panic, and
// a value's own name parses back to it.
func FuzzParseNames(f *testing.F) {
	for _, s := range []string{"", "none", "xor", "Symmetric-Or-Xor", "mod", "scale", "low-bits", "bogus"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if sym, err := ParseSymmetric(s); err == nil {
			if again, err := ParseSymmetric(sym.String()); err != nil || again != sym {
				t.Fatalf("ParseSymmetric(%q) = %v, whose name reads back as %v, %v", s, sym, again, err)
			}
		} else if !errors.Is(err, ErrSymmetricInvalid) {
			t.Fatalf("ParseSymmetric(%q): %v, want ErrSymmetricInvalid", s, err)
		}
		if r, err := ParseIndexRule(s); err == nil {
			if again, err := ParseIndexRule(r.String()); err != nil || again != r {
				t.Fatalf("ParseIndexRule(%q) = %v, whose name reads back as %v, %v", s, r, again, err)
			}
		} else if !errors.Is(err, ErrIndirection) {
			t.Fatalf("ParseIndexRule(%q): %v, want ErrIndirection", s, err)
		}
	})
}
