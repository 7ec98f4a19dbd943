package capset

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Addresses the frames use, for expressions to match.
var (
	MAC1  = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	MAC2  = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
	Bcast = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	Mcast = []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}

	A4 = netip.MustParseAddr("198.18.0.1")
	B4 = netip.MustParseAddr("198.18.0.2")
	C4 = netip.MustParseAddr("198.19.1.1")
	D4 = netip.MustParseAddr("10.1.2.3")
	M4 = netip.MustParseAddr("224.0.0.251")
	A6 = netip.MustParseAddr("2001:db8::1")
	B6 = netip.MustParseAddr("2001:db8::2")
	C6 = netip.MustParseAddr("2001:db8:1::5")
	M6 = netip.MustParseAddr("ff02::fb")
)

func eth(dst, src []byte, typ uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), byte(typ>>8), byte(typ))
	return append(f, payload...)
}

// tag inserts an 802.1Q-style tag (tpid, vid) after the MAC addresses.
func tag(f []byte, tpid uint16, vid uint16) []byte {
	out := append([]byte{}, f[:12]...)
	out = append(out, byte(tpid>>8), byte(tpid), byte(vid>>8), byte(vid))
	return append(out, f[12:]...)
}

func csum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// ipv4 builds an IPv4 packet; frag holds the flags and fragment offset
// field (0x2000 MF, low 13 bits offset in 8-byte units).
func ipv4(src, dst netip.Addr, proto byte, opts []byte, frag uint16, payload []byte) []byte {
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	h := make([]byte, 20, 20+len(opts))
	h[0] = 0x40 | byte((20+len(opts))/4)
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(opts)+len(payload)))
	binary.BigEndian.PutUint16(h[4:], 0x1234)
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8] = 64
	h[9] = proto
	copy(h[12:], src.AsSlice())
	copy(h[16:], dst.AsSlice())
	h = append(h, opts...)
	binary.BigEndian.PutUint16(h[10:], csum(h))
	return append(h, payload...)
}

func ipv6(src, dst netip.Addr, nh byte, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6] = nh
	h[7] = 64
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	return append(h, payload...)
}

// ext6 is an 8-byte IPv6 extension header (hop-by-hop, routing,
// destination options) with next header nh.
func ext6(nh byte, payload []byte) []byte {
	return append([]byte{nh, 0, 1, 4, 0, 0, 0, 0}, payload...)
}

func frag6(nh byte, offset uint16, more bool, payload []byte) []byte {
	v := offset << 3
	if more {
		v |= 1
	}
	return append([]byte{nh, 0, byte(v >> 8), byte(v), 0, 0, 0x12, 0x34}, payload...)
}

func tcp(sport, dport uint16, flags byte, payload []byte) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 1000)
	h[12] = 5 << 4
	h[13] = flags
	binary.BigEndian.PutUint16(h[14:], 65535)
	return append(h, payload...)
}

func udp(sport, dport uint16, payload []byte) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+len(payload)))
	return append(h, payload...)
}

func icmp(typ, code byte) []byte { return []byte{typ, code, 0, 0, 0, 1, 0, 1, 'p', 'i', 'n', 'g'} }

func sctp(sport, dport uint16) []byte {
	h := make([]byte, 12)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	return h
}

func arp(op uint16, sha []byte, spa netip.Addr, tha []byte, tpa netip.Addr) []byte {
	b := []byte{0, 1, 8, 0, 6, 4, byte(op >> 8), byte(op)}
	b = append(b, sha...)
	b = append(b, spa.AsSlice()...)
	b = append(b, tha...)
	return append(b, tpa.AsSlice()...)
}

// Frames returns the capture set: every frame at least 14 bytes (an
// Ethernet header; the kernel's test run needs one).
func Frames() [][]byte {
	var fs [][]byte
	add := func(f ...[]byte) { fs = append(fs, f...) }
	data := []byte("0123456789abcdef")
	ports := []uint16{53, 80, 443, 4789, 9000, 22, 1024, 65535}
	tcpFlags := []byte{0x02, 0x12, 0x10, 0x11, 0x04, 0x18, 0x29, 0xc2, 0xff, 0x00}

	// IPv4 UDP and TCP, both directions, several ports.
	for i, p := range ports {
		src, dst := A4, B4
		if i%3 == 1 {
			src, dst = C4, D4
		}
		add(eth(MAC2, MAC1, 0x0800, ipv4(src, dst, 17, nil, 0, udp(40000+uint16(i), p, data))))
		add(eth(MAC1, MAC2, 0x0800, ipv4(dst, src, 17, nil, 0x4000, udp(p, 40000+uint16(i), data))))
		add(eth(MAC2, MAC1, 0x0800, ipv4(src, dst, 6, nil, 0x4000, tcp(50000, p, tcpFlags[i%len(tcpFlags)], nil))))
	}
	for _, fl := range tcpFlags {
		add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 6, nil, 0, tcp(443, 50001, fl, data))))
		add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 6, tcp(443, 50001, fl, nil))))
	}
	// IPv4 options: record route (7), router alert (148), NOPs; the
	// transport header moves.
	rr := []byte{7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, rr, 0, udp(1111, 53, data))))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 6, []byte{148, 4, 0, 0}, 0, tcp(22, 4789, 0x02, nil))))
	add(eth(MAC2, MAC1, 0x0800, ipv4(C4, B4, 1, []byte{1, 1, 1, 0}, 0, icmp(8, 0))))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, make([]byte, 40), 0, udp(9000, 9000, data))))
	// IPv4 fragments: first (MF), middle, last; DF.
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0x2000, udp(1234, 4789, data))))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0x2000|3, data)))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 6, []byte{0, 53, 0, 53, 0, 0, 0, 0})))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 6, nil, 0x2000|1, tcp(53, 53, 0x02, nil))))
	// ICMP, IGMP, SCTP, GRE, ESP, AH.
	for _, tc := range [][2]byte{{8, 0}, {0, 0}, {3, 3}, {11, 0}, {5, 1}, {13, 0}} {
		add(eth(MAC2, MAC1, 0x0800, ipv4(A4, D4, 1, nil, 0, icmp(tc[0], tc[1]))))
	}
	add(eth(Mcast, MAC1, 0x0800, ipv4(A4, M4, 2, []byte{148, 4, 0, 0}, 0, []byte{0x16, 0, 0, 0, 224, 0, 0, 251})))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 132, nil, 0, sctp(2905, 80))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 132, sctp(80, 2905))))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 47, nil, 0, []byte{0, 0, 0x08, 0, 1, 2, 3, 4})))
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 50, nil, 0, data)))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 51, append([]byte{17, 2, 0, 0}, make([]byte, 12)...))))
	add(eth(Mcast, MAC1, 0x0800, ipv4(A4, M4, 17, nil, 0, udp(5353, 5353, data))))
	// IPv6: plain, extension headers, fragments, ICMPv6.
	for i, p := range ports[:5] {
		src, dst := A6, B6
		if i%2 == 1 {
			src, dst = C6, A6
		}
		add(eth(MAC2, MAC1, 0x86dd, ipv6(src, dst, 17, udp(40000, p, data))))
		add(eth(MAC2, MAC1, 0x86dd, ipv6(dst, src, 6, tcp(p, 40000, 0x12, nil))))
	}
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 0, ext6(17, udp(1, 53, data)))))   // hop-by-hop
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 43, ext6(6, tcp(1, 80, 2, nil))))) // routing
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 60, ext6(58, icmp(128, 0)))))      // dest options
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 44, frag6(17, 0, true, udp(7, 4789, data)))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 44, frag6(17, 8, false, data))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 44, frag6(6, 0, false, tcp(9, 443, 0x02, nil)))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 0, ext6(44, frag6(17, 0, true, udp(1, 53, nil))))))
	for _, ty := range []byte{128, 129, 135, 136, 133, 1} {
		add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 58, icmp(ty, 0))))
	}
	add(eth([]byte{0x33, 0x33, 0, 0, 0, 0xfb}, MAC1, 0x86dd, ipv6(A6, M6, 17, udp(5353, 5353, data))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(netip.MustParseAddr("::ffff:198.18.0.1"), B6, 59, nil)))
	// ARP and RARP.
	add(eth(Bcast, MAC1, 0x0806, arp(1, MAC1, A4, make([]byte, 6), B4)))
	add(eth(MAC1, MAC2, 0x0806, arp(2, MAC2, B4, MAC1, A4)))
	add(eth(Bcast, MAC1, 0x0806, arp(1, MAC1, C4, make([]byte, 6), D4)))
	add(eth(Bcast, MAC1, 0x8035, arp(3, MAC1, D4, MAC1, C4)))
	// VLAN and QinQ.
	base := []([]byte){
		eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0, udp(40000, 4789, data))),
		eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 6, nil, 0, tcp(40000, 80, 0x02, nil))),
		eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 17, udp(40000, 53, data))),
		eth(Bcast, MAC1, 0x0806, arp(1, MAC1, A4, make([]byte, 6), B4)),
	}
	for i, f := range base {
		add(tag(f, 0x8100, 100+uint16(i)))
		add(tag(f, 0x8100, 0x2000|200))          // priority bits set
		add(tag(tag(f, 0x8100, 10), 0x88a8, 20)) // QinQ
		add(tag(f, 0x9100, 300))
	}
	add(tag(tag(tag(base[0], 0x8100, 1), 0x8100, 2), 0x88a8, 3))
	// Other EtherTypes and odd frames.
	add(eth(MAC2, MAC1, 0x88cc, data))                                   // LLDP
	add(eth(MAC2, MAC1, 0x0026, append([]byte{0x42, 0x42, 3}, data...))) // 802.3 length + LLC
	add(eth(Bcast, MAC2, 0x0800, ipv4(A4, netip.MustParseAddr("255.255.255.255"), 17, nil, 0, udp(68, 67, data))))
	add(eth(MAC2, MAC1, 0x0800, []byte{0x46, 0, 0, 20})) // IPv4 claiming options, cut
	add(eth(MAC2, MAC1, 0x0800, append([]byte{0x4f}, make([]byte, 70)...)))
	add(eth(MAC2, MAC1, 0x0800, append([]byte{0x41}, make([]byte, 40)...))) // IHL 1
	add(eth(MAC2, MAC1, 0x86dd, []byte{0x60}))
	add(make([]byte, 14))
	// Truncated copies of fuller frames: cut inside every header.
	full := []([]byte){
		eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 6, rr, 0, tcp(22, 80, 0x12, data))),
		eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0, udp(53, 4789, data))),
		eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 44, frag6(6, 0, true, tcp(1, 2, 2, nil)))),
		eth(Bcast, MAC1, 0x0806, arp(1, MAC1, A4, make([]byte, 6), B4)),
		tag(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0, udp(53, 53, data))), 0x8100, 5),
	}
	for _, f := range full {
		for _, n := range []int{14, 15, 18, 23, 24, 27, 30, 34, 36, 38, 42, 48, 54, 55, 56, 58} {
			if n < len(f) {
				add(append([]byte{}, f[:n]...))
			}
		}
	}
	// Long frames: len comparisons.
	add(eth(MAC2, MAC1, 0x0800, ipv4(A4, B4, 17, nil, 0, udp(1, 9000, make([]byte, 1400)))))
	add(eth(MAC2, MAC1, 0x86dd, ipv6(A6, B6, 17, udp(1, 9000, make([]byte, 300)))))
	return fs
}

// WritePcap writes frames as a pcap file (Ethernet), frame i stamped i
// seconds after 1000 s.
func WritePcap(w io.Writer, frames [][]byte) error {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		return err
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1000+int64(i), 0), CaptureLength: len(f), Length: len(f)}
		if err := pw.WritePacket(ci, f); err != nil {
			return err
		}
	}
	return nil
}

// ReadPcap reads an Ethernet pcap file; with stamps, it returns the index
// each frame's timestamp encodes (as WritePcap writes them).
func ReadPcap(r io.Reader) (frames [][]byte, index []int, err error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, nil, err
	}
	if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
		return nil, nil, fmt.Errorf("link type %v: only Ethernet captures are supported", lt)
	}
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return frames, index, nil
		}
		if err != nil {
			return nil, nil, err
		}
		frames = append(frames, data)
		index = append(index, int(ci.Timestamp.Unix()-1000))
	}
}
