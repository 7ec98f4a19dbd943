package xdpnet

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/gopacket/gopacket"

	"github.com/gopacket/gopacket/layers"
	"github.com/xdpio/xdpio/offload"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
	ap4  = netip.MustParseAddrPort("198.18.0.1:40000")
	bp4  = netip.MustParseAddrPort("198.18.0.2:9000")
	ap6  = netip.MustParseAddrPort("[2001:db8::1]:40000")
	bp6  = netip.MustParseAddrPort("[2001:db8::2]:9000")
)

// gopacketFrame builds an Ethernet/IP/UDP frame with gopacket, which
// computes the lengths and checksums: an oracle nobody here wrote.
func gopacketFrame(t testing.TB, src, dst netip.AddrPort, payload []byte, ttl, tos uint8) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ls []gopacket.SerializableLayer
	if dst.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, TTL: ttl, TOS: tos, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{eth, ip, udp, gopacket.Payload(payload)}
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: ttl, TrafficClass: tos, NextHeader: layers.IPProtocolUDP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{eth, ip, udp, gopacket.Payload(payload)}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// offload.Headers.BuildUDP, which the conn sends with, writes what gopacket writes, byte for byte (with the IPv4
// ID gopacket leaves 0), for both families, odd and even payloads, TTL and
// TOS.
func TestWriteDatagramMatchesGopacket(t *testing.T) {
	for _, tc := range []struct {
		src, dst netip.AddrPort
	}{{ap4, bp4}, {ap6, bp6}} {
		for _, n := range []int{0, 1, 17, 64, 1472} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i*7 + 3)
			}
			want := gopacketFrame(t, tc.src, tc.dst, payload, 33, 0xb8)
			h := offload.Headers{SrcMAC: macA, DstMAC: macB, Src: tc.src, Dst: tc.dst, TTL: 33, TOS: 0xb8}
			frame := make([]byte, 2048)
			n, err := h.BuildUDP(frame, 0, payload)
			if err != nil {
				t.Fatal(err)
			}
			got := frame[:n]
			// gopacket pads to Ethernet's 60-byte minimum; a NIC does that
			// (veth needs none).
			if len(want) == 60 && len(got) < 60 && bytes.Equal(want[len(got):], make([]byte, 60-len(got))) {
				want = want[:len(got)]
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%v→%v %d bytes:\n got %x\nwant %x", tc.src, tc.dst, n, got, want)
			}
		}
	}
}

// parseRX reads back what gopacket built, and refuses each kind of
// damage with its own cause.
func TestParseRX(t *testing.T) {
	payload := []byte("a datagram for the test")
	for _, tc := range []struct{ src, dst netip.AddrPort }{{ap4, bp4}, {ap6, bp6}} {
		good := gopacketFrame(t, tc.src, tc.dst, payload, 64, 0)
		d, c := parseRX(good, tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify)
		if c != causeOK || d.src != tc.src || d.dst != tc.dst || !bytes.Equal(d.payload, payload) {
			t.Fatalf("%v: parseRX = %+v, %v", tc.dst, d, c)
		}
		l3 := ethLen
		udpOff := l3 + ipv4Len
		if tc.dst.Addr().Is6() {
			udpOff = l3 + ipv6Len
		}
		mod := func(f func(b []byte)) []byte {
			b := append([]byte(nil), good...)
			f(b)
			return b
		}
		unspec := netip.IPv4Unspecified()
		if tc.dst.Addr().Is6() {
			unspec = netip.IPv6Unspecified()
		}
		for _, bad := range []struct {
			name  string
			frame []byte
			local netip.Addr
			port  uint16
			mode  RXChecksum
			want  cause
		}{
			{"unspecified local", good, unspec, tc.dst.Port(), RXChecksumVerify, causeOK},
			{"any local", good, netip.Addr{}, tc.dst.Port(), RXChecksumVerify, causeOK},
			{"other address", good, netip.MustParseAddr("198.18.9.9"), tc.dst.Port(), RXChecksumVerify, causeNotForUs},
			{"other port", good, tc.dst.Addr(), tc.dst.Port() + 1, RXChecksumVerify, causeNotForUs},
			{"short", good[:udpOff+4], tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify, causeMalformed},
			{"empty", nil, tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify, causeMalformed},
			{"vlan", mod(func(b []byte) { b[12], b[13] = 0x81, 0 }), tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify, causeNotIP},
			{"udp length beyond", mod(func(b []byte) { binary.BigEndian.PutUint16(b[udpOff+4:], 2000) }), tc.dst.Addr(), tc.dst.Port(), RXChecksumNone, causeMalformed},
			{"udp length below 8", mod(func(b []byte) { binary.BigEndian.PutUint16(b[udpOff+4:], 7) }), tc.dst.Addr(), tc.dst.Port(), RXChecksumNone, causeMalformed},
			{"payload flipped", mod(func(b []byte) { b[len(b)-1] ^= 1 }), tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify, causeBadChecksum},
			{"payload flipped, unverified", mod(func(b []byte) { b[len(b)-1] ^= 1 }), tc.dst.Addr(), tc.dst.Port(), RXChecksumNone, causeOK},
			{"not udp", mod(func(b []byte) {
				if tc.dst.Addr().Is4() {
					b[l3+9] = 6
				} else {
					b[l3+6] = 6
				}
			}), tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify, causeNotUDP},
		} {
			if _, c := parseRX(bad.frame, bad.local, bad.port, bad.mode); c != bad.want {
				t.Errorf("%v %s: cause %d, want %d", tc.dst, bad.name, c, bad.want)
			}
		}
		// The checksum a veth sender leaves for an offload: the
		// pseudo-header sum alone.
		partial := append([]byte(nil), good...)
		ulen := len(good) - udpOff
		var ph uint16
		if tc.dst.Addr().Is4() {
			ph = pseudo4(partial[l3+12:l3+16], partial[l3+16:l3+20], ulen)
		} else {
			ph = pseudo6(partial[l3+8:l3+24], partial[l3+24:l3+40], ulen)
		}
		binary.BigEndian.PutUint16(partial[udpOff+6:], ph)
		if _, c := parseRX(partial, tc.dst.Addr(), tc.dst.Port(), RXChecksumVerify); c != causePartialChecksum {
			t.Errorf("%v: partial checksum: cause %d, want %d", tc.dst, c, causePartialChecksum)
		}
		if d, c := parseRX(partial, tc.dst.Addr(), tc.dst.Port(), RXChecksumAcceptPartial); c != causeOK || !bytes.Equal(d.payload, payload) {
			t.Errorf("%v: partial checksum accepted: cause %d", tc.dst, c)
		}
	}
	// IPv4 specifics: fragments, a zero checksum (none), a bad header.
	good := gopacketFrame(t, ap4, bp4, payload, 64, 0)
	frag := append([]byte(nil), good...)
	frag[ethLen+6] |= 0x20 // MF
	if _, c := parseRX(frag, bp4.Addr(), bp4.Port(), RXChecksumNone); c != causeFragment {
		t.Errorf("first fragment: cause %d, want fragment", c)
	}
	zero := append([]byte(nil), good...)
	zero[ethLen+ipv4Len+6], zero[ethLen+ipv4Len+7] = 0, 0
	if _, c := parseRX(zero, bp4.Addr(), bp4.Port(), RXChecksumVerify); c != causeOK {
		t.Errorf("IPv4 UDP checksum 0: cause %d, want ok (no checksum)", c)
	}
	hdr := append([]byte(nil), good...)
	hdr[ethLen+8]-- // TTL changed, header checksum not
	if _, c := parseRX(hdr, bp4.Addr(), bp4.Port(), RXChecksumVerify); c != causeBadChecksum {
		t.Errorf("IPv4 header checksum wrong: cause %d, want bad checksum", c)
	}
	// IPv6 specifics: a zero checksum is discarded.
	good6 := gopacketFrame(t, ap6, bp6, payload, 64, 0)
	zero6 := append([]byte(nil), good6...)
	zero6[ethLen+ipv6Len+6], zero6[ethLen+ipv6Len+7] = 0, 0
	if _, c := parseRX(zero6, bp6.Addr(), bp6.Port(), RXChecksumVerify); c != causeZeroChecksum6 {
		t.Errorf("IPv6 UDP checksum 0: cause %d, want zero-checksum", c)
	}
	// A dual-stack (unspecified IPv6) local address takes IPv4 too; an
	// unspecified IPv4 one does not take IPv6.
	if _, c := parseRX(good, netip.IPv6Unspecified(), bp4.Port(), RXChecksumVerify); c != causeOK {
		t.Errorf("IPv4 to [::]: cause %d", c)
	}
	if _, c := parseRX(good6, netip.IPv4Unspecified(), bp6.Port(), RXChecksumVerify); c != causeNotForUs {
		t.Errorf("IPv6 to 0.0.0.0: cause %d, want not for us", c)
	}
}

// testView is a conn's view of host B: its MAC, its two addresses, and
// another IPv4 address of its namespace.
func testView() *atomic.Pointer[localView] {
	v := &atomic.Pointer[localView]{}
	v.Store(newLocalView(macB, []netip.Addr{bp4.Addr(), bp6.Addr()}, []netip.Addr{bp4.Addr(), bp6.Addr(), netip.MustParseAddr("198.19.77.1")}))
	return v
}

// The frame checks of a conn bound to the unspecified address: only to
// the interface's MAC and addresses, never from a martian source; the
// kernel's own verdicts on these are in TestKernelReceiveChecks.
func TestParseMartiansAndDestinations(t *testing.T) {
	payload := []byte("martian?")
	for _, tc := range []struct {
		name     string
		src, dst netip.AddrPort
		mac      net.HardwareAddr
		want     cause
	}{
		{"peer", ap4, bp4, macB, causeOK},
		{"peer v6", ap6, bp6, macB, causeOK},
		{"127.0.0.1", netip.MustParseAddrPort("127.0.0.1:9"), bp4, macB, causeMartian},
		{"0.0.0.0", netip.MustParseAddrPort("0.0.0.0:9"), bp4, macB, causeMartian},
		{"0.1.2.3 (the kernel takes it)", netip.MustParseAddrPort("0.1.2.3:9"), bp4, macB, causeOK},
		{"255.255.255.255", netip.MustParseAddrPort("255.255.255.255:9"), bp4, macB, causeMartian},
		{"224.0.0.1", netip.MustParseAddrPort("224.0.0.1:9"), bp4, macB, causeMartian},
		{"240.0.0.1 (the kernel takes it)", netip.MustParseAddrPort("240.0.0.1:9"), bp4, macB, causeOK},
		{"own address", bp4, bp4, macB, causeMartian},
		{"another of the host's", netip.MustParseAddrPort("198.19.77.1:9"), bp4, macB, causeMartian},
		{"::1", netip.MustParseAddrPort("[::1]:9"), bp6, macB, causeMartian},
		{"ff02::1", netip.MustParseAddrPort("[ff02::1]:9"), bp6, macB, causeMartian},
		{":: (the kernel takes it)", netip.MustParseAddrPort("[::]:9"), bp6, macB, causeOK},
		{"other host", ap4, netip.MustParseAddrPort("198.18.0.99:9000"), macB, causeNotForUs},
		{"other host v6", ap6, netip.MustParseAddrPort("[2001:db8::99]:9000"), macB, causeNotForUs},
		{"other MAC", ap4, bp4, macA, causeNotForUs},
	} {
		f := gopacketFrame(t, tc.src, tc.dst, payload, 64, 0)
		copy(f[0:6], tc.mac)
		p := newRXParser(netip.IPv6Unspecified(), 9000, 1, RXChecksumVerify)
		p.view = testView()
		var d rxDatagram
		if c := p.parse(f, &d); c != tc.want {
			t.Errorf("%s: cause %d, want %d", tc.name, c, tc.want)
		}
	}
	// A link-local source carries the interface as its zone.
	ll := netip.MustParseAddrPort("[fe80::1]:7")
	p := newRXParser(netip.IPv6Unspecified(), 9000, 1, RXChecksumVerify)
	p.view, p.zone = testView(), "vb"
	var d rxDatagram
	if c := p.parse(gopacketFrame(t, ll, bp6, payload, 64, 0), &d); c != causeOK || d.src.Addr().Zone() != "vb" || d.src.Addr().WithZone("") != ll.Addr() {
		t.Errorf("link-local source: %v, cause %d", d.src, c)
	}
}

// pseudo4 and pseudo6 are the pseudo-header sums, computed here by hand.
func pseudo4(src, dst []byte, ulen int) uint16 {
	b := append(append(append([]byte{}, src...), dst...), 0, protoUDP, byte(ulen>>8), byte(ulen))
	return refFold(b)
}

func pseudo6(src, dst []byte, ulen int) uint16 {
	b := append(append(append([]byte{}, src...), dst...), 0, 0, byte(ulen>>8), byte(ulen), 0, 0, 0, protoUDP)
	return refFold(b)
}

func refFold(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// FuzzParseRX: no frame makes parseRX panic; a datagram it accepts lies
// inside the frame, has the ports and addresses gopacket decodes, and
// with verification on, a checksum gopacket's own serializer agrees with.
func FuzzParseRX(f *testing.F) {
	f.Add(gopacketFrame(f, ap4, bp4, []byte("seed"), 64, 0), true)
	f.Add(gopacketFrame(f, ap6, bp6, []byte("seed six"), 64, 0), true)
	f.Add([]byte{}, false)
	f.Add(make([]byte, 60), true)
	f.Add(gopacketFrame(f, netip.MustParseAddrPort("127.0.0.1:9000"), bp4, []byte("loop"), 64, 0), true)
	f.Add(gopacketFrame(f, netip.MustParseAddrPort("[fe80::1]:9000"), bp6, []byte("link-local"), 64, 0), true)
	f.Add(gopacketFrame(f, ap4, netip.MustParseAddrPort("198.18.0.99:9000"), []byte("transit"), 64, 0), true)
	f.Fuzz(func(t *testing.T, frame []byte, verify bool) {
		mode := RXChecksumNone
		if verify {
			mode = RXChecksumVerify
		}
		port := binary.BigEndian.Uint16(append(make([]byte, 0, 2), frameDstPort(frame)...))
		d, c := parseRX(frame, netip.Addr{}, port, mode)
		// The copying readers' deferred checksum, finished with the
		// payload's sum, gives the same verdict.
		dp := newRXParser(netip.Addr{}, port, 1, mode)
		dp.deferSum = true
		var dd rxDatagram
		dc := dp.parse(frame, &dd)
		if dc == causeOK {
			_, ps := offload.CopyChecksum(make([]byte, len(dd.payload)), dd.payload)
			dc = dp.finishSum(&dd, ps)
		}
		if dc != c {
			t.Fatalf("deferred checksum verdict %d, whole-frame verdict %d", dc, c)
		}
		// With the conn's view of the host: what it accepts is to B's MAC
		// and one of its addresses, from a source that is not martian.
		vp := newRXParser(netip.IPv6Unspecified(), port, 1, mode)
		vp.view, vp.zone, vp.wantDst = testView(), "vb", true
		var vd rxDatagram
		if vc := vp.parse(frame, &vd); vc == causeOK {
			src := vd.src.Addr()
			if !bytes.Equal(frame[:6], macB) || (vd.dst.Addr() != bp4.Addr() && vd.dst.Addr() != bp6.Addr()) {
				t.Fatalf("with a view: accepted a frame to %v at %x", vd.dst, frame[:6])
			}
			if src.IsLoopback() || src.IsMulticast() || src == bp4.Addr() || src == netip.IPv4Unspecified() || src == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
				t.Fatalf("with a view: accepted a datagram from the martian %v", src)
			}
			if src.IsLinkLocalUnicast() && src.Zone() != "vb" {
				t.Fatalf("link-local source %v without the interface's zone", src)
			}
		} else if c == causeOK && vc != causeMartian && vc != causeNotForUs {
			t.Fatalf("the view turned an accepted frame into cause %d", vc)
		}
		if c != causeOK {
			return
		}
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		ul, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if !ok {
			t.Fatalf("accepted a frame gopacket finds no UDP in: %v", pkt)
		}
		if uint16(ul.SrcPort) != d.src.Port() || uint16(ul.DstPort) != d.dst.Port() {
			t.Fatalf("ports %v→%v, gopacket %d→%d", d.src, d.dst, ul.SrcPort, ul.DstPort)
		}
		if !bytes.HasPrefix(ul.Payload, d.payload) {
			t.Fatalf("payload %x, gopacket %x", d.payload, ul.Payload)
		}
		if verify {
			// Rebuild with gopacket's checksum and compare the field.
			src, dst := d.src, d.dst
			re := gopacketFrame(t, src, dst, d.payload, 64, 0)
			var got, want uint16
			if dst.Addr().Is4() {
				got = binary.BigEndian.Uint16(frame[ethLen+int(frame[ethLen]&0xf)*4+6:])
				want = binary.BigEndian.Uint16(re[ethLen+ipv4Len+6:])
			} else {
				got = binary.BigEndian.Uint16(frame[ethLen+ipv6Len+6:])
				want = binary.BigEndian.Uint16(re[ethLen+ipv6Len+6:])
			}
			if got != 0 && got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
				t.Fatalf("accepted UDP checksum %#04x, gopacket computes %#04x", got, want)
			}
		}
	})
}

// frameDstPort returns the two bytes where a UDP destination port would
// be in an IPv4 (20-byte header) or IPv6 frame, so the fuzzer's frames
// can match the port asked for.
func frameDstPort(f []byte) []byte {
	if len(f) < ethLen {
		return []byte{0, 0}
	}
	off := ethLen + ipv6Len + 2
	if binary.BigEndian.Uint16(f[12:]) == etherIPv4 && len(f) > ethLen {
		off = ethLen + int(f[ethLen]&0xf)*4 + 2
	}
	if off+2 > len(f) {
		return []byte{0, 0}
	}
	return f[off : off+2]
}
