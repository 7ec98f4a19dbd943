package labctl

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	testSrcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	testDstMAC = net.HardwareAddr{0x52, 0x54, 0, 0x1a, 0xb0, 0x02}
)

// TestFrameGopacket builds frames of every kind and decodes them with
// gopacket: addresses, ports, protocol and every checksum must verify.
func TestFrameGopacket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var flows []Flow
	for _, v6 := range []bool{false, true} {
		flows = append(flows, Flows(rng, 8, ProtoUDP, v6, 9000)...)
		flows = append(flows, Flows(rng, 8, ProtoTCP, v6, 9100)...)
	}
	for _, f := range flows {
		b, err := Frame(f, testSrcMAC, testDstMAC, 7)
		if err != nil {
			t.Fatalf("Frame(%v): %v", f, err)
		}
		p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
		if el := p.ErrorLayer(); el != nil {
			t.Fatalf("%v: gopacket: %v", f, el.Error())
		}
		eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth.SrcMAC.String() != testSrcMAC.String() || eth.DstMAC.String() != testDstMAC.String() {
			t.Errorf("%v: MACs %v > %v", f, eth.SrcMAC, eth.DstMAC)
		}
		var src, dst netip.Addr
		var pseudo gopacket.NetworkLayer
		if ip4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			src, _ = netip.AddrFromSlice(ip4.SrcIP)
			dst, _ = netip.AddrFromSlice(ip4.DstIP)
			pseudo = ip4
			// The header checksum sums to zero over a valid header.
			if fold(sum(0, b[14:34])) != 0 {
				t.Errorf("%v: bad IPv4 header checksum %#04x", f, ip4.Checksum)
			}
		} else if ip6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			src, _ = netip.AddrFromSlice(ip6.SrcIP)
			dst, _ = netip.AddrFromSlice(ip6.DstIP)
			pseudo = ip6
		} else {
			t.Fatalf("%v: no IP layer", f)
		}
		if src != f.Src || dst != f.Dst {
			t.Errorf("%v: addresses %v > %v", f, src, dst)
		}
		var sport, dport uint16
		var l4 []byte
		switch f.Proto {
		case ProtoUDP:
			u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if !ok {
				t.Fatalf("%v: no UDP layer", f)
			}
			sport, dport = uint16(u.SrcPort), uint16(u.DstPort)
			l4 = append(u.Contents, u.Payload...)
		case ProtoTCP:
			tc, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if !ok {
				t.Fatalf("%v: no TCP layer", f)
			}
			if !tc.SYN || tc.ACK {
				t.Errorf("%v: TCP flags SYN %v ACK %v, want a SYN", f, tc.SYN, tc.ACK)
			}
			sport, dport = uint16(tc.SrcPort), uint16(tc.DstPort)
			l4 = append(tc.Contents, tc.Payload...)
		}
		if sport != f.SPort || dport != f.DPort {
			t.Errorf("%v: ports %d > %d", f, sport, dport)
		}
		// The L4 checksum verifies: pseudo-header plus segment sums to zero.
		var ps uint32
		fl := pseudo.NetworkFlow()
		ps = sum(ps, fl.Src().Raw())
		ps = sum(ps, fl.Dst().Raw())
		ps += uint32(f.Proto) + uint32(len(l4))
		if c := fold(sum(ps, l4)); c != 0 {
			t.Errorf("%v: L4 checksum does not verify (residue %#04x)", f, c)
		}
		got, err := ParseFlow(b)
		if err != nil || got != f {
			t.Errorf("ParseFlow(Frame(%v)) = %v, %v", f, got, err)
		}
	}
}

func TestFrameRefuses(t *testing.T) {
	good := Flow{Src: PeerIP4, Dst: GuestIP4, SPort: 1, DPort: 2, Proto: ProtoUDP}
	for _, f := range []Flow{
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: GuestIP4, Proto: ProtoUDP},
		{Src: PeerIP4, Dst: GuestIP6, Proto: ProtoUDP},
		{Src: netip.MustParseAddr("2001:db9::1"), Dst: GuestIP6, Proto: ProtoTCP},
		{Src: PeerIP4, Dst: GuestIP4, Proto: 1},
		{Dst: GuestIP4, Proto: ProtoUDP},
	} {
		if _, err := Frame(f, testSrcMAC, testDstMAC, 0); !errors.Is(err, ErrFlow) {
			t.Errorf("Frame(%v): %v, want ErrFlow", f, err)
		}
	}
	if _, err := Frame(good, testSrcMAC[:4], testDstMAC, 0); !errors.Is(err, ErrFlow) {
		t.Errorf("short MAC: %v, want ErrFlow", err)
	}
	for _, b := range [][]byte{nil, make([]byte, 14), append(make([]byte, 12), 0x08, 0x00, 0x45)} {
		if _, err := ParseFlow(b); !errors.Is(err, ErrFlow) {
			t.Errorf("ParseFlow(%x): %v, want ErrFlow", b, err)
		}
	}
}

func TestParseStats(t *testing.T) {
	out := []byte("NIC statistics:\n     rx0_drops: 3\n     rx_queue_1_packets: 42\n     tx0_kicks: 7\n")
	m, err := ParseStats(out)
	if err != nil {
		t.Fatal(err)
	}
	if m["rx0_drops"] != 3 || m["rx_queue_1_packets"] != 42 || m["tx0_kicks"] != 7 || len(m) != 3 {
		t.Errorf("ParseStats = %v", m)
	}
	if _, err := ParseStats([]byte("NIC statistics:\n  x: notanumber\n")); err == nil {
		t.Error("ParseStats accepted a non-number")
	}
}

// FuzzParseStats: any `ethtool -S` output is a map or an error, never a
// panic; a map written back out in ethtool's format parses to itself.
func FuzzParseStats(f *testing.F) {
	f.Add([]byte("NIC statistics:\n     rx0_drops: 3\n     rx_queue_1_packets: 42\n"))
	f.Add([]byte("x: 18446744073709551615\n"))
	f.Add([]byte("x: 18446744073709551616\n"))
	f.Add([]byte(":\n: 1\n a : 2 \n"))
	f.Add([]byte("no colon\n\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		m, err := ParseStats(out)
		if err != nil {
			return
		}
		var b []byte
		b = append(b, "NIC statistics:\n"...)
		for k, v := range m {
			if strings.ContainsAny(k, ":\n\r") {
				return // a name ethtool never prints
			}
			b = fmt.Appendf(b, "     %s: %d\n", k, v)
		}
		again, err := ParseStats(b)
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("ParseStats = %v, which reads back as %v, %v", m, again, err)
		}
	})
}

// FuzzParseFlow: no panic on any input, and a parsed flow re-encodes to a
// frame that parses to the same flow when it is a lab flow.
func FuzzParseFlow(f *testing.F) {
	b, _ := Frame(Flow{Src: PeerIP4, Dst: GuestIP4, SPort: 5, DPort: 9000, Proto: ProtoUDP}, testSrcMAC, testDstMAC, 1)
	f.Add(b)
	b, _ = Frame(Flow{Src: PeerIP6, Dst: GuestIP6, SPort: 5, DPort: 9000, Proto: ProtoTCP}, testSrcMAC, testDstMAC, 1)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := ParseFlow(b)
		if err != nil || fl.Validate() != nil {
			return
		}
		b2, err := Frame(fl, testSrcMAC, testDstMAC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParseFlow(b2); err != nil || got != fl {
			t.Fatalf("re-encoded %v parses as %v, %v", fl, got, err)
		}
	})
}
