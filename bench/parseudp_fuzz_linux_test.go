//go:build linux

package bench

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// FuzzParseUDPFrame checks the AF_XDP data planes' frame parser against
// gopacket's decoders: what parseUDP accepts, gopacket decodes to the
// same source, destination port and payload; and every frame gopacket
// decodes as a whole, unfragmented Ethernet/IPv4-or-IPv6/UDP datagram
// with no error, parseUDP accepts.
func FuzzParseUDPFrame(f *testing.F) {
	for _, seed := range udpFrameSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		src, dport, payload, ok := parseUDP(frame)
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: false, NoCopy: true})
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		var gsrc netip.Addr
		// A UDP length under 8 is invalid (gopacket reads 0 as "the rest",
		// as for IPv6 jumbograms, which iperf3 never sends).
		whole := udp != nil && pkt.ErrorLayer() == nil && !pkt.Metadata().Truncated && udp.Length >= 8
		ls := pkt.Layers()
		if whole && len(ls) >= 3 {
			switch ip := ls[1].(type) {
			case *layers.IPv4:
				gsrc, _ = netip.AddrFromSlice(ip.SrcIP.To4())
				// gopacket reads a total length of 0 as "the rest" (TSO);
				// the kernel drops such a packet.
				whole = ls[2] == udp && ip.Version == 4 && ip.Flags&layers.IPv4MoreFragments == 0 && ip.FragOffset == 0 &&
					binary.BigEndian.Uint16(frame[16:]) != 0
			case *layers.IPv6:
				gsrc, _ = netip.AddrFromSlice(ip.SrcIP)
				whole = ls[2] == udp && ip.Version == 6 && ip.NextHeader == layers.IPProtocolUDP && ip.Length != 0
			default:
				whole = false
			}
		} else {
			whole = false
		}
		if ok {
			if udp == nil && binary.BigEndian.Uint16(frame[12:]) == uint16(layers.EthernetTypeIPv4) && frame[14]&0xf > 5 {
				// parseUDP skips IPv4 options without reading them;
				// gopacket rejects malformed ones.
				return
			}
			if udp == nil {
				t.Fatalf("parseUDP accepted a frame gopacket finds no UDP in: %x", frame)
			}
			if uint16(udp.SrcPort) != src.Port() || uint16(udp.DstPort) != dport || !bytes.Equal(udp.Payload, payload) {
				t.Fatalf("parseUDP: %v → port %d, %d payload bytes; gopacket: %d → %d, %d payload bytes; frame %x",
					src, dport, len(payload), udp.SrcPort, udp.DstPort, len(udp.Payload), frame)
			}
			if gsrc.IsValid() && gsrc != src.Addr() {
				t.Fatalf("parseUDP source %v, gopacket %v", src.Addr(), gsrc)
			}
		}
		if whole && !ok {
			t.Fatalf("gopacket decodes a whole UDP datagram (%v → %d) that parseUDP rejects: %x", gsrc, udp.DstPort, frame)
		}
	})
}

// udpFrameSeeds are well-formed frames (IPv4, IPv6, with IPv4 options)
// and broken ones (truncated, wrong lengths, fragments, wrong version).
func udpFrameSeeds(f *testing.F) [][]byte {
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}}
	build := func(ip gopacket.NetworkLayer, payload []byte) []byte {
		udp := &layers.UDP{SrcPort: 40000, DstPort: 5201}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		ls := []gopacket.SerializableLayer{eth, ip.(gopacket.SerializableLayer), udp, gopacket.Payload(payload)}
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			f.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	v4 := func() *layers.IPv4 {
		eth.EthernetType = layers.EthernetTypeIPv4
		return &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{198, 18, 0, 1}, DstIP: []byte{198, 18, 0, 2}}
	}
	ok4 := build(v4(), []byte("hello"))
	opt := v4()
	opt.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	ok4opt := build(opt, []byte("options"))
	frag := v4()
	frag.Flags = layers.IPv4MoreFragments
	frag4 := build(frag, []byte("first fragment"))
	eth.EthernetType = layers.EthernetTypeIPv6
	ok6 := build(&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: netip.MustParseAddr("2001:db8::1").AsSlice(), DstIP: netip.MustParseAddr("2001:db8::2").AsSlice()}, []byte("hello6"))
	badVer := append([]byte(nil), ok4...)
	badVer[14] = 0x65
	padded := append(append([]byte(nil), ok4...), 0, 0, 0, 0)
	return [][]byte{ok4, ok4opt, frag4, ok6, badVer, padded, ok4[:20], ok6[:50], nil}
}
