package rss

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DefaultKeyHex is the 40-byte Toeplitz key that Microsoft publishes with
// its RSS verification suite, the key of NIC datasheets' examples and of
// many drivers' and DPDK's defaults. Most Linux drivers instead fill a
// random key at boot (netdev_rss_key_fill), so predict with the device's
// key (Table, `xdpio rss show`) when one is at hand.
const DefaultKeyHex = "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"

// defaultKey is DefaultKeyHex decoded.
var defaultKey = [40]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// DefaultKey returns a copy of the 40-byte default key (DefaultKeyHex).
func DefaultKey() []byte {
	k := defaultKey
	return k[:]
}

// SymmetricKey returns a key of n bytes made of the 16-bit pattern 0x6d5a
// repeated (Woo and Park, "Scalable TCP Session Monitoring with Symmetric
// Receive-side Scaling"). With such a key the plain Toeplitz hash of a flow
// equals the hash of its reverse direction, for IPv4 and IPv6, with and
// without ports, on any NIC that takes a key: the "symmetric key" way to
// get symmetric RSS without an input transformation. n must be at least 4;
// NewToeplitz reports a shorter key.
func SymmetricKey(n int) []byte {
	if n < 0 {
		n = 0
	}
	k := make([]byte, n)
	for i := range k {
		if i%2 == 0 {
			k[i] = 0x6d
		} else {
			k[i] = 0x5a
		}
	}
	return k
}

// ParseKey decodes a hash key written as hex digits, with or without a
// 0x prefix and with optional ':' separators between bytes (the form
// `ethtool -x` prints): "6d:5a:56:da:…" and "6d5a56da…" are both accepted.
func ParseKey(s string) ([]byte, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	t = strings.ReplaceAll(t, ":", "")
	k, err := hex.DecodeString(t)
	if err != nil {
		return nil, fmt.Errorf("parse key %q: %w: %w", s, ErrKeyInvalid, err)
	}
	if len(k) < MinKeyLen {
		return nil, fmt.Errorf("parse key %q: %d bytes, need at least %d: %w", s, len(k), MinKeyLen, ErrKeyInvalid)
	}
	return k, nil
}

// MinKeyLen is the shortest key NewToeplitz accepts: one 32-bit window.
const MinKeyLen = 4

// ErrKeyInvalid reports a hash key that is not usable: too short, or not
// hex where hex was expected.
var ErrKeyInvalid = errors.New("invalid RSS hash key")

// tablePositions caps the number of input byte positions that get a
// precomputed lookup table. Flow inputs are at most 36 bytes (IPv6 with
// ports), so 64 covers every real key; a longer key still hashes longer
// inputs correctly, bit by bit past the cap.
const tablePositions = 64

// Toeplitz computes the Toeplitz hash, the hash RSS NICs use, with one key.
//
// The hash of an input bit string is the XOR, over every set input bit i
// (most significant bit of the first byte is bit 0), of the 32 key bits
// starting at key bit i. Key bits past the end of the key count as zero, so
// a key of n bytes fully covers inputs of n-4 bytes; MaxInput reports that.
//
// NewToeplitz precomputes, for each input byte position, a table of the
// 256 values one byte can contribute, so a hash costs one load and one XOR
// per input byte. A Toeplitz is immutable and safe for concurrent use.
type Toeplitz struct {
	key []byte
	// tab[p*256+v] is the contribution of byte value v at input position p.
	tab []uint32
}

// NewToeplitz returns a hasher for key (nil means DefaultKey). The key is
// copied. Keys shorter than MinKeyLen bytes are refused with ErrKeyInvalid.
func NewToeplitz(key []byte) (*Toeplitz, error) {
	if key == nil {
		key = defaultKey[:]
	}
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("new Toeplitz hasher: key of %d bytes, need at least %d: %w", len(key), MinKeyLen, ErrKeyInvalid)
	}
	t := &Toeplitz{key: append([]byte(nil), key...)}
	// A byte at position p meets key bits 8p..8p+38; from p = len(key) on
	// they are all zero, so such positions contribute nothing.
	npos := min(len(key), tablePositions)
	// Enough positions for the fixed-layout fast paths (IPv6 with ports is
	// 36 bytes) even when the key is shorter: those tables are simply zero
	// past the key, and the fast paths need no length checks.
	t.tab = make([]uint32, max(npos, ipv6PortsLen)*256)
	for p := 0; p < npos; p++ {
		var w [8]uint32 // w[b]: key window for bit b (MSB first) of the byte
		for b := range w {
			w[b] = t.window(8*p + b)
		}
		row := t.tab[p*256 : p*256+256]
		for v := 1; v < 256; v++ {
			low := v & -v // lowest set bit
			row[v] = row[v^low] ^ w[7-bitIndex(low)]
		}
	}
	return t, nil
}

// bitIndex returns log2 of a power of two below 256.
func bitIndex(v int) int {
	n := 0
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}

// window returns the 32 key bits starting at key bit j, zero past the end.
func (t *Toeplitz) window(j int) uint32 {
	var w uint64
	for i := range 5 {
		w <<= 8
		if p := j/8 + i; p < len(t.key) {
			w |= uint64(t.key[p])
		}
	}
	return uint32(w >> (8 - j%8))
}

// Key returns a copy of the key.
func (t *Toeplitz) Key() []byte { return append([]byte(nil), t.key...) }

// MaxInput returns the longest input, in bytes, the key covers with real
// key bits (len(key)-4). IPv4 with ports needs 12, IPv6 with ports 36.
func (t *Toeplitz) MaxInput() int { return len(t.key) - 4 }

// Hash returns the Toeplitz hash of input.
func (t *Toeplitz) Hash(input []byte) uint32 {
	n := min(len(input), len(t.key), tablePositions)
	tab := t.tab[:n*256]
	var h uint32
	for p, v := range input[:n] {
		h ^= tab[p*256+int(v)]
	}
	// Only keys longer than tablePositions reach here with work left.
	for p := n; p < len(input) && p < len(t.key); p++ {
		for b := range 8 {
			if input[p]&(0x80>>b) != 0 {
				h ^= t.window(8*p + b)
			}
		}
	}
	return h
}

const (
	ipv4Len      = 8  // src, dst
	ipv4PortsLen = 12 // src, dst, sport, dport
	ipv6Len      = 32
	ipv6PortsLen = 36
)

// HashIPv4 returns the hash of an IPv4 address pair (Microsoft's
// NDIS_HASH_IPV4 input: source address, destination address).
func (t *Toeplitz) HashIPv4(src, dst [4]byte) uint32 {
	tab := (*[ipv4Len * 256]uint32)(t.tab)
	return tab[0*256+int(src[0])] ^ tab[1*256+int(src[1])] ^
		tab[2*256+int(src[2])] ^ tab[3*256+int(src[3])] ^
		tab[4*256+int(dst[0])] ^ tab[5*256+int(dst[1])] ^
		tab[6*256+int(dst[2])] ^ tab[7*256+int(dst[3])]
}

// HashIPv4Ports returns the hash of an IPv4 4-tuple (NDIS_HASH_TCP_IPV4 and
// NDIS_HASH_UDP_IPV4: source address, destination address, source port,
// destination port, all in network byte order).
func (t *Toeplitz) HashIPv4Ports(src, dst [4]byte, sport, dport uint16) uint32 {
	tab := (*[ipv4PortsLen * 256]uint32)(t.tab)
	return tab[0*256+int(src[0])] ^ tab[1*256+int(src[1])] ^
		tab[2*256+int(src[2])] ^ tab[3*256+int(src[3])] ^
		tab[4*256+int(dst[0])] ^ tab[5*256+int(dst[1])] ^
		tab[6*256+int(dst[2])] ^ tab[7*256+int(dst[3])] ^
		tab[8*256+int(sport>>8)] ^ tab[9*256+int(sport&0xff)] ^
		tab[10*256+int(dport>>8)] ^ tab[11*256+int(dport&0xff)]
}

// HashIPv6 returns the hash of an IPv6 address pair (NDIS_HASH_IPV6).
func (t *Toeplitz) HashIPv6(src, dst [16]byte) uint32 {
	tab := (*[ipv6Len * 256]uint32)(t.tab)
	var h uint32
	for i := range 16 {
		h ^= tab[i*256+int(src[i])] ^ tab[(16+i)*256+int(dst[i])]
	}
	return h
}

// HashIPv6Ports returns the hash of an IPv6 4-tuple (NDIS_HASH_TCP_IPV6 and
// NDIS_HASH_UDP_IPV6).
func (t *Toeplitz) HashIPv6Ports(src, dst [16]byte, sport, dport uint16) uint32 {
	tab := (*[ipv6PortsLen * 256]uint32)(t.tab)
	h := t.HashIPv6(src, dst)
	return h ^ tab[32*256+int(sport>>8)] ^ tab[33*256+int(sport&0xff)] ^
		tab[34*256+int(dport>>8)] ^ tab[35*256+int(dport&0xff)]
}

// Symmetric selects how a flow's fields are transformed before hashing so
// that both directions of a flow hash alike. The values equal the kernel's
// RXH_XFRM_* bits (ETHTOOL_A_RSS_INPUT_XFRM), so a value read from a device
// can be passed on unchanged.
type Symmetric uint8

const (
	// SymmetricNone hashes the fields as they are (the default).
	SymmetricNone Symmetric = 0
	// SymmetricXOR is the kernel's "symmetric-xor" (RXH_XFRM_SYM_XOR): the
	// input is (SRC_IP^DST_IP, SRC_IP^DST_IP, SRC_PORT^DST_PORT,
	// SRC_PORT^DST_PORT), per Documentation/networking/scaling.rst.
	SymmetricXOR Symmetric = 1 << 0
	// SymmetricOrXOR is "symmetric-or-xor" (RXH_XFRM_SYM_OR_XOR): the input
	// is (SRC_IP|DST_IP, SRC_IP^DST_IP, SRC_PORT|DST_PORT, SRC_PORT^DST_PORT).
	SymmetricOrXOR Symmetric = 1 << 1
)

// String returns the name ethtool uses for the transformation.
func (s Symmetric) String() string {
	switch s {
	case SymmetricNone:
		return "none"
	case SymmetricXOR:
		return "symmetric-xor"
	case SymmetricOrXOR:
		return "symmetric-or-xor"
	}
	return fmt.Sprintf("Symmetric(%#x)", uint8(s))
}

// ParseSymmetric maps a name to a Symmetric value. It accepts the ethtool
// names ("symmetric-xor", "symmetric-or-xor", "none"), the short forms
// "xor" and "or-xor", and "" for none.
func ParseSymmetric(s string) (Symmetric, error) {
	switch strings.ToLower(s) {
	case "", "none", "off":
		return SymmetricNone, nil
	case "xor", "symmetric-xor", "sym-xor":
		return SymmetricXOR, nil
	case "or-xor", "symmetric-or-xor", "sym-or-xor":
		return SymmetricOrXOR, nil
	}
	return 0, fmt.Errorf("parse input transformation %q: want none, symmetric-xor or symmetric-or-xor: %w", s, ErrSymmetricInvalid)
}

// ErrSymmetricInvalid reports an input transformation this package does
// not know.
var ErrSymmetricInvalid = errors.New("unknown RSS input transformation")

// valid reports whether s is one of the known transformations.
func (s Symmetric) valid() bool {
	return s == SymmetricNone || s == SymmetricXOR || s == SymmetricOrXOR
}

// FlowKey is what RSS hashes of a packet: its addresses and, for TCP and
// UDP packets that are not IP fragments, its ports.
type FlowKey struct {
	// Src and Dst are both IPv4 or both IPv6 addresses (an IPv4-mapped IPv6
	// address counts as IPv6, as on the wire).
	Src, Dst netip.Addr
	// SrcPort and DstPort count only when Ports is true.
	SrcPort, DstPort uint16
	// Proto is the IP protocol number (6 TCP, 17 UDP; 0 when unknown). The
	// hash does not use it.
	Proto uint8
	// Ports says whether the ports are part of the hash input (a 4-tuple
	// hash rather than a 2-tuple hash). NICs hash TCP (and, if configured
	// with `ethtool -N DEV rx-flow-hash udp4 sdfn`, UDP) with ports, and
	// fragments and other protocols without.
	Ports bool
}

// ErrFlowKey reports a FlowKey that cannot be hashed: addresses missing or
// of different families.
var ErrFlowKey = errors.New("invalid flow key")

// Reverse returns the key of the other direction of the flow.
func (k FlowKey) Reverse() FlowKey {
	k.Src, k.Dst = k.Dst, k.Src
	k.SrcPort, k.DstPort = k.DstPort, k.SrcPort
	return k
}

// Validate reports whether k can be hashed.
func (k FlowKey) Validate() error {
	switch {
	case !k.Src.IsValid() || !k.Dst.IsValid():
		return fmt.Errorf("flow key %v: source and destination address are required: %w", k, ErrFlowKey)
	case k.Src.Is4() != k.Dst.Is4():
		return fmt.Errorf("flow key %v: source %v and destination %v are of different address families: %w", k, k.Src, k.Dst, ErrFlowKey)
	}
	return nil
}

// String formats the key as "src:sport > dst:dport" (or "src > dst").
func (k FlowKey) String() string {
	if !k.Ports {
		return fmt.Sprintf("%v > %v", k.Src, k.Dst)
	}
	return fmt.Sprintf("%v > %v", netip.AddrPortFrom(k.Src, k.SrcPort), netip.AddrPortFrom(k.Dst, k.DstPort))
}

// Input appends the hash input of k under transformation s to b and
// returns it: the byte string a NIC feeds to the Toeplitz function. It is
// meant for tests and tools; HashFlow does not build it.
func (k FlowKey) Input(b []byte, s Symmetric) []byte {
	src, dst := k.Src.AsSlice(), k.Dst.AsSlice()
	sp, dp := k.SrcPort, k.DstPort
	switch s {
	case SymmetricXOR:
		x := make([]byte, len(src))
		for i := range x {
			x[i] = src[i] ^ dst[i]
		}
		src, dst = x, x
		sp, dp = sp^dp, sp^dp
	case SymmetricOrXOR:
		o, x := make([]byte, len(src)), make([]byte, len(src))
		for i := range x {
			o[i], x[i] = src[i]|dst[i], src[i]^dst[i]
		}
		src, dst = o, x
		sp, dp = sp|dp, sp^dp
	}
	b = append(b, src...)
	b = append(b, dst...)
	if k.Ports {
		b = append(b, byte(sp>>8), byte(sp), byte(dp>>8), byte(dp))
	}
	return b
}

// HashFlow returns the hash of k under transformation s, the value a NIC
// with this key would put in the RX descriptor. Keys that fail Validate
// hash as 0; check them first where the input is not trusted.
func (t *Toeplitz) HashFlow(k FlowKey, s Symmetric) uint32 {
	if s == SymmetricNone && k.Ports && k.Src.Is4() && k.Dst.Is4() {
		return t.HashIPv4Ports(k.Src.As4(), k.Dst.As4(), k.SrcPort, k.DstPort) // the common case
	}
	return t.hashFlow(k, s)
}

func (t *Toeplitz) hashFlow(k FlowKey, s Symmetric) uint32 {
	if k.Src.Is4() && k.Dst.Is4() {
		src, dst := k.Src.As4(), k.Dst.As4()
		sp, dp := symmetrize(src[:], dst[:], k.SrcPort, k.DstPort, s)
		if k.Ports {
			return t.HashIPv4Ports(src, dst, sp, dp)
		}
		return t.HashIPv4(src, dst)
	}
	if !k.Src.IsValid() || !k.Dst.IsValid() || k.Src.Is4() || k.Dst.Is4() {
		return 0
	}
	src, dst := k.Src.As16(), k.Dst.As16()
	sp, dp := symmetrize(src[:], dst[:], k.SrcPort, k.DstPort, s)
	if k.Ports {
		return t.HashIPv6Ports(src, dst, sp, dp)
	}
	return t.HashIPv6(src, dst)
}

// symmetrize applies the input transformation in place to the addresses
// and returns the transformed ports: symmetric-xor puts src^dst in both
// fields, symmetric-or-xor puts src|dst then src^dst (as Linux's
// RXH_XFRM_SYM_XOR and RXH_XFRM_SYM_OR_XOR do).
func symmetrize(src, dst []byte, sp, dp uint16, s Symmetric) (uint16, uint16) {
	switch s {
	case SymmetricXOR:
		for i := range src {
			src[i] ^= dst[i]
			dst[i] = src[i]
		}
		return sp ^ dp, sp ^ dp
	case SymmetricOrXOR:
		for i := range src {
			src[i], dst[i] = src[i]|dst[i], src[i]^dst[i]
		}
		return sp | dp, sp ^ dp
	}
	return sp, dp
}
