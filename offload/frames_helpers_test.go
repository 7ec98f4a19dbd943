package offload

import (
	"encoding/binary"
	"math/rand/v2"
)

// Test frames for the checksum code, built byte by byte so that every
// header shape the parser walks can be produced (VLAN stacks, IPv4
// options, IPv6 extension header chains with routing headers, UDP-Lite),
// with random checksum fields. The oracles (gopacket, tshark, the kernel)
// then judge what VerifyRX and FillChecksum make of them.

// frameOpts selects the shape of a test frame. Zero values mean: no VLAN,
// IPv4 without options, UDP, no payload, no padding.
type frameOpts struct {
	vlans    []uint16 // TPIDs, outermost first
	v6       bool
	ipOpts   int     // IPv4 option bytes (multiple of 4, ≤ 40)
	ext      []uint8 // IPv6 extension headers in order: ProtoHopByHop, ProtoDstOpts, ProtoRouting, ProtoFragment
	rtType   uint8   // routing header type (0, 2, 4 or other)
	rtLeft   uint8   // segments left
	rtAddrs  int     // addresses in the routing header
	fragOff  uint16  // IPv4/IPv6 fragment offset in 8-byte units
	fragMore bool    // MF / M flag
	proto    uint8
	tcpOpts  int // TCP option bytes (multiple of 4, ≤ 40)
	payload  int
	pad      int // link padding after the IP packet
}

// srcIPv4 etc. are the test addresses (RFC 2544 / RFC 3849 ranges).
var (
	srcIPv4 = [4]byte{198, 18, 0, 1}
	dstIPv4 = [4]byte{198, 18, 0, 2}
	srcIPv6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	dstIPv6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
)

// buildFrame lays out a frame as o says, with payload and option bytes
// from rng and the checksum fields left random. Lengths are consistent.
func buildFrame(rng *rand.Rand, o frameOpts) []byte {
	f := make([]byte, 0, 2048)
	f = append(f, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1)
	for _, tpid := range o.vlans {
		f = binary.BigEndian.AppendUint16(f, tpid)
		f = binary.BigEndian.AppendUint16(f, uint16(rng.IntN(4096)))
	}
	if o.v6 {
		f = binary.BigEndian.AppendUint16(f, EtherTypeIPv6)
	} else {
		f = binary.BigEndian.AppendUint16(f, EtherTypeIPv4)
	}
	l3 := len(f)
	if o.v6 {
		f = append(f, 0x60, 0, 0, 0, 0, 0, 0, 64)
		f = append(f, srcIPv6[:]...)
		f = append(f, dstIPv6[:]...)
		nhAt := l3 + 6
		for _, e := range o.ext {
			f[nhAt] = e
			nhAt = len(f)
			switch e {
			case ProtoFragment:
				fo := o.fragOff << 3
				if o.fragMore {
					fo |= 1
				}
				f = append(f, 0, 0)
				f = binary.BigEndian.AppendUint16(f, fo)
				f = binary.BigEndian.AppendUint32(f, rng.Uint32())
			case ProtoRouting:
				n := o.rtAddrs
				f = append(f, 0, byte(2*n), o.rtType, o.rtLeft, 0, 0, 0, 0)
				if o.rtType == 4 && n > 0 {
					f[len(f)-4] = byte(n - 1) // last entry
				}
				for i := 0; i < n; i++ {
					a := dstIPv6
					a[14] = byte(i + 1)
					a[15] = 0x99
					f = append(f, a[:]...)
				}
			default:
				// Hop-by-hop or destination options of 8 or 16 bytes: one
				// experimental option (RFC 4727 type 0x1e, "skip if
				// unknown") fills them. Not padding: Linux drops more than
				// 7 bytes of consecutive Pad1/PadN.
				size := 8 * (1 + rng.IntN(2))
				f = append(f, 0, byte(size/8-1), 0x1e, byte(size-4))
				for i := 0; i < size-4; i++ {
					f = append(f, byte(rng.Uint32()))
				}
			}
		}
		f[nhAt] = o.proto
	} else {
		ihl := (IPv4MinLen + o.ipOpts) / 4
		f = append(f, 0x40|byte(ihl), 0, 0, 0)
		f = binary.BigEndian.AppendUint32(f, rng.Uint32()&0xffff0000) // ID, flags/offset below
		fo := o.fragOff
		if o.fragMore {
			fo |= IPv4MoreFragments
		}
		binary.BigEndian.PutUint16(f[l3+6:], fo)
		f = append(f, 64, o.proto, byte(rng.Uint32()), byte(rng.Uint32()))
		f = append(f, srcIPv4[:]...)
		f = append(f, dstIPv4[:]...)
		for i := 0; i < o.ipOpts; i++ {
			f = append(f, 1) // NOP
		}
	}
	l4 := len(f)
	switch o.proto {
	case ProtoTCP:
		f = binary.BigEndian.AppendUint16(f, uint16(rng.Uint32()))
		f = binary.BigEndian.AppendUint16(f, uint16(rng.Uint32()))
		f = binary.BigEndian.AppendUint64(f, rng.Uint64())
		f = append(f, byte((TCPMinLen+o.tcpOpts)/4)<<4, TCPFlagACK|TCPFlagPSH)
		f = binary.BigEndian.AppendUint16(f, uint16(rng.Uint32()))
		f = binary.BigEndian.AppendUint32(f, rng.Uint32()) // checksum, urgent
		for i := 0; i < o.tcpOpts; i++ {
			f = append(f, 1) // NOP
		}
	case ProtoUDP, ProtoUDPLite:
		f = binary.BigEndian.AppendUint32(f, rng.Uint32())
		f = binary.BigEndian.AppendUint32(f, rng.Uint32()) // length set below
	case ProtoICMP, ProtoICMPv6:
		f = append(f, 8, 0, byte(rng.Uint32()), byte(rng.Uint32()))
		f = binary.BigEndian.AppendUint32(f, rng.Uint32())
		if o.proto == ProtoICMPv6 {
			f[l4] = 128 // echo request
		}
	}
	for i := 0; i < o.payload; i++ {
		f = append(f, byte(rng.Uint32()))
	}
	end := len(f)
	switch o.proto {
	case ProtoUDP:
		binary.BigEndian.PutUint16(f[l4+4:], uint16(end-l4))
	case ProtoUDPLite:
		binary.BigEndian.PutUint16(f[l4+4:], 0) // full coverage
	}
	if o.v6 {
		binary.BigEndian.PutUint16(f[l3+4:], uint16(end-l3-IPv6Len))
	} else {
		binary.BigEndian.PutUint16(f[l3+2:], uint16(end-l3))
	}
	for i := 0; i < o.pad; i++ {
		f = append(f, byte(rng.Uint32()))
	}
	return f
}

// randomOpts picks a random frame shape that VerifyRX can fully verify
// (no fragments, known protocols) when verifiable is true, or any shape.
func randomOpts(rng *rand.Rand, verifiable bool) frameOpts {
	var o frameOpts
	switch rng.IntN(4) {
	case 1:
		o.vlans = []uint16{EtherTypeVLAN}
	case 2:
		o.vlans = []uint16{EtherTypeQinQ, EtherTypeVLAN}
	}
	o.v6 = rng.IntN(2) == 0
	protos4 := []uint8{ProtoTCP, ProtoUDP, ProtoICMP, ProtoUDPLite}
	protos6 := []uint8{ProtoTCP, ProtoUDP, ProtoICMPv6, ProtoUDPLite}
	if o.v6 {
		o.proto = protos6[rng.IntN(len(protos6))]
		if rng.IntN(2) == 0 {
			o.ext = append(o.ext, ProtoHopByHop)
		}
		if rng.IntN(3) == 0 {
			o.ext = append(o.ext, ProtoDstOpts)
		}
		if rng.IntN(3) == 0 {
			o.ext = append(o.ext, ProtoRouting)
			o.rtType = []uint8{0, 2, 4}[rng.IntN(3)]
			o.rtAddrs = 1 + rng.IntN(3)
			if o.rtType == 2 {
				o.rtAddrs = 1
			}
			o.rtLeft = uint8(rng.IntN(o.rtAddrs + 1))
		}
		if rng.IntN(4) == 0 {
			o.ext = append(o.ext, ProtoFragment) // atomic unless below
		}
	} else {
		o.proto = protos4[rng.IntN(len(protos4))]
		o.ipOpts = 4 * rng.IntN(11)
	}
	if o.proto == ProtoTCP {
		o.tcpOpts = 4 * rng.IntN(11)
	}
	switch rng.IntN(3) {
	case 0:
		o.payload = rng.IntN(20)
	case 1:
		o.payload = rng.IntN(1500)
	default:
		o.payload = rng.IntN(9000)
	}
	if rng.IntN(3) == 0 {
		o.pad = 1 + rng.IntN(30)
	}
	if !verifiable && rng.IntN(4) == 0 {
		o.fragMore = rng.IntN(2) == 0
		o.fragOff = uint16(rng.IntN(100))
		if o.v6 && len(o.ext) == 0 || o.v6 && o.ext[len(o.ext)-1] != ProtoFragment {
			o.ext = append(o.ext, ProtoFragment)
		}
	}
	return o
}
