//go:build linux

package asavieplane

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdpio/xdpio/offload"
)

// gopacketFrame builds a UDP frame with gopacket (an oracle nobody here
// wrote).
func gopacketFrame(t *testing.T, src, dst netip.AddrPort, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.SerializableLayer
	if dst.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		l := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(l)
		ip = l
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		l := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(l)
		ip = l
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// parseFrame takes what xdpnet takes, with offload's parser: gopacket's
// frames, and a veth sender's unfinished checksum; not a wrong checksum,
// a VLAN tag or a fragment. buildFrame writes what gopacket writes.
func TestParseAndBuildFrame(t *testing.T) {
	for _, c := range []struct{ src, dst netip.AddrPort }{
		{netip.MustParseAddrPort("198.18.0.1:40000"), netip.MustParseAddrPort("198.18.0.2:5201")},
		{netip.MustParseAddrPort("[2001:db8::1]:40000"), netip.MustParseAddrPort("[2001:db8::2]:5201")},
	} {
		payload := []byte("iperf3-ish payload")
		good := gopacketFrame(t, c.src, c.dst, payload)
		d, ok := parseFrame(good)
		if !ok || d.src != c.src || d.dst != c.dst || string(d.payload) != string(payload) {
			t.Fatalf("%v: parseFrame = %+v, %v", c.dst, d, ok)
		}
		built := make([]byte, 200)
		n, err := buildFrame(built, good[6:12], good[0:6], c.src, c.dst, payload)
		if err != nil || string(built[:n]) != string(good[:n]) {
			t.Errorf("%v: buildFrame %x, %v; gopacket %x", c.dst, built[:n], err, good)
		}
		var lo offload.Layout
		lo.Parse(good)
		mod := func(f func(b []byte)) []byte {
			b := append([]byte(nil), good...)
			f(b)
			return b
		}
		ulen := len(good) - lo.L4
		partialSum := func(b []byte) uint16 {
			if c.dst.Addr().Is4() {
				return offload.PseudoHeaderIPv4(c.src.Addr().As4(), c.dst.Addr().As4(), offload.ProtoUDP, uint16(ulen))
			}
			return offload.PseudoHeaderIPv6(c.src.Addr().As16(), c.dst.Addr().As16(), offload.ProtoUDP, uint32(ulen))
		}
		for _, bad := range []struct {
			name string
			f    []byte
			want bool
		}{
			{"partial checksum", mod(func(b []byte) { binary.BigEndian.PutUint16(b[lo.L4+6:], partialSum(b)) }), true},
			{"wrong checksum", mod(func(b []byte) { b[len(b)-1] ^= 1 }), false},
			{"vlan tag", append(append(append([]byte(nil), good[:12]...), 0x81, 0, 0, 7), good[12:]...), false},
			{"short", good[:lo.L4+4], false},
		} {
			if _, ok := parseFrame(bad.f); ok != bad.want {
				t.Errorf("%v %s: parseFrame ok %v, want %v", c.dst, bad.name, ok, bad.want)
			}
		}
	}
}
