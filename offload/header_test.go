package offload

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestHeaderViewsGopacket reads frames serialized by gopacket through the
// views and compares every field with what gopacket put there.
func TestHeaderViewsGopacket(t *testing.T) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeDot1Q}
	vlan := &layers.Dot1Q{Priority: 5, VLANIdentifier: 0x123, Type: layers.EthernetTypeIPv4}
	ip4 := &layers.IPv4{Version: 4, TOS: 0xb8, Id: 0xbeef, Flags: layers.IPv4DontFragment, TTL: 63, Protocol: layers.IPProtocolTCP,
		SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2},
		Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 0xdeadbeef, Ack: 0x01020304, DataOffset: 6, SYN: true, ACK: true, ECE: true, CWR: true,
		Window: 4096, Urgent: 7, Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}}
	if err := tcp.SetNetworkLayerForChecksum(ip4); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, vlan, ip4, tcp, gopacket.Payload("abc")); err != nil {
		t.Fatal(err)
	}
	f := buf.Bytes()

	e := Ethernet(f)
	if e.Type() != EtherTypeVLAN || e.Src() != [6]byte(eth.SrcMAC) || e.Dst() != [6]byte(eth.DstMAC) {
		t.Errorf("Ethernet view: type %#x src %x dst %x", e.Type(), e.Src(), e.Dst())
	}
	e2 := Ethernet(append([]byte(nil), f[:EthernetLen]...))
	e2.SetSrc([6]byte{1, 2, 3, 4, 5, 6})
	e2.SetDst(e.Src())
	if e2.Src() != [6]byte{1, 2, 3, 4, 5, 6} || e2.Dst() != [6]byte(eth.SrcMAC) || e2.Type() != EtherTypeVLAN {
		t.Errorf("Ethernet setters: % x", []byte(e2))
	}
	v := VLAN(f[EthernetLen:])
	if v.ID() != 0x123 || v.TCI()>>13 != 5 || v.Type() != EtherTypeIPv4 {
		t.Errorf("VLAN view: tci %#x type %#x", v.TCI(), v.Type())
	}
	ip := IPv4(f[EthernetLen+VLANLen:])
	if ip.Version() != 4 || ip.HeaderLength() != 24 || ip.TOS() != 0xb8 || ip.ID() != 0xbeef || ip.TTL() != 63 ||
		ip.Protocol() != ProtoTCP || ip.FlagsFragment() != IPv4DontFragment || ip.IsFragment() || ip.MoreFragments() || ip.FragmentOffset() != 0 ||
		int(ip.TotalLength()) != len(f)-EthernetLen-VLANLen || ip.Src() != [4]byte{198, 18, 0, 1} || ip.Dst() != [4]byte{198, 18, 0, 2} {
		t.Errorf("IPv4 view disagrees with gopacket: % x", ip[:24])
	}
	if !ip.ChecksumValid() || ip.CalculateChecksum() != ip.Checksum() {
		t.Errorf("IPv4 checksum %#04x, calculated %#04x", ip.Checksum(), ip.CalculateChecksum())
	}
	th := TCP(f[EthernetLen+VLANLen+24:])
	if th.SrcPort() != 40000 || th.DstPort() != 443 || th.Seq() != 0xdeadbeef || th.Ack() != 0x01020304 || th.DataOffset() != 24 ||
		th.Flags() != TCPFlagSYN|TCPFlagACK|TCPFlagECE|TCPFlagCWR || th.Window() != 4096 || th.UrgentPointer() != 7 ||
		string(th.Options()) != "\x02\x04\x05\xb4" {
		t.Errorf("TCP view disagrees with gopacket: % x", th[:24])
	}
	ph := ip.PseudoHeaderSum(ProtoTCP, uint16(len(th)))
	if Combine(Checksum(th, 0), ph) != 0xffff {
		t.Errorf("TCP checksum by gopacket does not verify with the view's pseudo-header")
	}

	ip6 := &layers.IPv6{Version: 6, TrafficClass: 0xa5, FlowLabel: 0xabcde, HopLimit: 9, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	udp := &layers.UDP{SrcPort: 53, DstPort: 5353}
	if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	eth.EthernetType = layers.EthernetTypeIPv6
	buf = gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip6, udp, gopacket.Payload("hello")); err != nil {
		t.Fatal(err)
	}
	f = buf.Bytes()
	i6 := IPv6(f[EthernetLen:])
	if i6.Version() != 6 || i6.TrafficClass() != 0xa5 || i6.FlowLabel() != 0xabcde || i6.HopLimit() != 9 || i6.NextHeader() != ProtoUDP ||
		int(i6.PayloadLength()) != len(f)-EthernetLen-IPv6Len || i6.Src() != [16]byte(ip6.SrcIP.To16()) || i6.Dst() != [16]byte(ip6.DstIP.To16()) {
		t.Errorf("IPv6 view disagrees with gopacket: % x", i6[:IPv6Len])
	}
	u := UDP(f[EthernetLen+IPv6Len:])
	if u.SrcPort() != 53 || u.DstPort() != 5353 || int(u.Length()) != len(u) || u.Checksum() != udp.Checksum {
		t.Errorf("UDP view disagrees with gopacket: % x", u[:UDPLen])
	}
	if off, ok := L4ChecksumOffset(ProtoUDP); !ok || off != UDPChecksumOffset {
		t.Errorf("L4ChecksumOffset(UDP) = %d, %v", off, ok)
	}
	if _, ok := L4ChecksumOffset(ProtoESP); ok {
		t.Error("L4ChecksumOffset(ESP) reports a checksum")
	}

	// Setters write where the getters read.
	ip.SetTotalLength(1234)
	ip.SetID(77)
	ip.SetChecksum(0x1111)
	th.SetSeq(99)
	th.SetFlags(TCPFlagFIN)
	th.SetChecksum(0x2222)
	u.SetLength(9)
	u.SetChecksum(0x3333)
	i6.SetPayloadLength(555)
	e.SetType(0x88b5)
	if ip.TotalLength() != 1234 || ip.ID() != 77 || ip.Checksum() != 0x1111 || th.Seq() != 99 || th.Flags() != TCPFlagFIN ||
		th.Checksum() != 0x2222 || u.Length() != 9 || u.Checksum() != 0x3333 || i6.PayloadLength() != 555 || e.Type() != 0x88b5 {
		t.Error("a setter does not round-trip")
	}
	ic := ICMP([]byte{8, 0, 0, 0})
	ic.SetChecksum(0xf7ff)
	if ic.Type() != 8 || ic.Code() != 0 || ic.Checksum() != 0xf7ff {
		t.Error("ICMP view")
	}
}
