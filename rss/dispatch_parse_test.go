package rss

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/xdpio/xdpio/offload"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

// build serializes layers into a frame with lengths fixed by gopacket.
func build(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		tb.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// raw serializes one layer on its own (an L4 header to put behind
// extension headers written by hand).
func raw(tb testing.TB, l gopacket.SerializableLayer) []byte {
	return build(tb, l)
}

func eth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: t}
}

func ip4(proto layers.IPProtocol, src, dst string) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
}

func ip6(next layers.IPProtocol, src, dst string) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
}

type frameCase struct {
	name      string
	frame     []byte
	ports     bool  // want ports in the key
	wantErr   error // nil, ErrNotIP or ErrMalformed
	wantProto uint8
}

// frameCases builds frames of every shape the parser handles, and broken
// ones. They are also the fuzz seeds.
func frameCases(tb testing.TB) []frameCase {
	payload := gopacket.Payload("0123456789abcdef")
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: 1, DataOffset: 5, ACK: true, Window: 1000}
	udp := &layers.UDP{SrcPort: 5353, DstPort: 53}
	v4 := func(p layers.IPProtocol) *layers.IPv4 { return ip4(p, "198.18.0.1", "198.19.255.2") }
	v6 := func(p layers.IPProtocol) *layers.IPv6 { return ip6(p, "2001:db8::1", "2001:db8:ffff::2") }

	withOpts := v4(layers.IPProtocolTCP)
	withOpts.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}} // NOP NOP NOP EOL
	frag := v4(layers.IPProtocolTCP)
	frag.Flags = layers.IPv4MoreFragments
	laterFrag := v4(layers.IPProtocolUDP)
	laterFrag.FragOffset = 100

	tcpBytes := raw(tb, tcp)
	// Hop-by-hop (8 bytes: next, len 0, PadN of 4) then destination
	// options (8 bytes), then TCP.
	ext := append([]byte{60, 0, 1, 4, 0, 0, 0, 0}, []byte{6, 0, 1, 4, 0, 0, 0, 0}...)
	v6ext := build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolIPv6HopByHop), gopacket.Payload(append(ext, tcpBytes...)))
	// AH (RFC 4302: length in 4-byte units minus 2): 12 bytes of header
	// and a 12-byte ICV, then TCP.
	ah := append([]byte{6, 4, 0, 0}, make([]byte, 20)...)
	v6ah := build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolAH), gopacket.Payload(append(ah, tcpBytes...)))
	// MaxExtHeaders+1 destination options headers: longer than the
	// parser follows.
	var chain []byte
	for i := range offload.MaxExtHeaders + 1 {
		next := byte(60)
		if i == offload.MaxExtHeaders {
			next = 6
		}
		chain = append(chain, next, 0, 1, 4, 0, 0, 0, 0)
	}
	v6chain := build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolIPv6Destination), gopacket.Payload(append(chain, tcpBytes...)))
	v6frag := build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolIPv6Fragment),
		gopacket.Payload(append([]byte{6, 0, 0, 1, 0, 0, 0, 7}, tcpBytes...))) // first fragment, M=1

	cases := []frameCase{
		{name: "ipv4 tcp", frame: build(tb, eth(layers.EthernetTypeIPv4), v4(layers.IPProtocolTCP), tcp, payload), ports: true, wantProto: 6},
		{name: "ipv4 udp", frame: build(tb, eth(layers.EthernetTypeIPv4), v4(layers.IPProtocolUDP), udp, payload), ports: true, wantProto: 17},
		{name: "ipv4 options", frame: build(tb, eth(layers.EthernetTypeIPv4), withOpts, tcp, payload), ports: true, wantProto: 6},
		{name: "ipv4 first fragment", frame: build(tb, eth(layers.EthernetTypeIPv4), frag, tcp, payload), wantProto: 6},
		{name: "ipv4 later fragment", frame: build(tb, eth(layers.EthernetTypeIPv4), laterFrag, payload), wantProto: 17},
		{name: "ipv4 icmp", frame: build(tb, eth(layers.EthernetTypeIPv4), v4(layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}, payload), wantProto: 1},
		{name: "vlan ipv4 tcp", frame: build(tb, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4}, v4(layers.IPProtocolTCP), tcp, payload), ports: true, wantProto: 6},
		{name: "qinq ipv6 udp", frame: build(tb, eth(layers.EthernetTypeQinQ), &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeDot1Q}, &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv6}, v6(layers.IPProtocolUDP), udp, payload), ports: true, wantProto: 17},
		{name: "ipv6 tcp", frame: build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolTCP), tcp, payload), ports: true, wantProto: 6},
		{name: "ipv6 hop-by-hop dstopts tcp", frame: v6ext, ports: true, wantProto: 6},
		{name: "ipv6 fragment", frame: v6frag, wantProto: 6},
		{name: "ipv6 ah tcp", frame: v6ah, ports: true, wantProto: 6},
		{name: "ipv6 long extension chain", frame: v6chain, wantProto: 60},
		{name: "ipv6 icmp", frame: build(tb, eth(layers.EthernetTypeIPv6), v6(layers.IPProtocolICMPv6), payload), wantProto: 58},
		{name: "arp", frame: build(tb, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: macA, SourceProtAddress: []byte{198, 18, 0, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{198, 18, 0, 2}}), wantErr: ErrNotIP},
	}
	good := cases[0].frame
	short := func(n int) []byte { return append([]byte(nil), good[:n]...) }
	badIHL := append([]byte(nil), good...)
	badIHL[14] = 0x44
	badVer := append([]byte(nil), good...)
	badVer[14] = 0x65
	longTotal := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(longTotal[16:], 1500)
	v6short := append([]byte(nil), cases[8].frame...)
	binary.BigEndian.PutUint16(v6short[18:], 9000)
	v6badExt := append([]byte(nil), v6ext...)
	v6badExt[14+40+1] = 200 // hop-by-hop length past the payload
	cases = append(cases,
		frameCase{name: "runt", frame: short(10), wantErr: ErrMalformed},
		frameCase{name: "ipv4 cut in header", frame: short(14 + 12), wantErr: ErrMalformed},
		frameCase{name: "ipv4 cut in tcp", frame: short(14 + 20 + 2), wantErr: ErrMalformed},
		frameCase{name: "ipv4 ihl 4", frame: badIHL, wantErr: ErrMalformed},
		frameCase{name: "ipv4 version 6", frame: badVer, wantErr: ErrMalformed},
		frameCase{name: "ipv4 total length past frame", frame: longTotal, wantErr: ErrMalformed},
		frameCase{name: "ipv6 payload length past frame", frame: v6short, wantErr: ErrMalformed},
		frameCase{name: "ipv6 extension past payload", frame: v6badExt, wantErr: ErrMalformed},
		frameCase{name: "vlan cut", frame: build(tb, eth(layers.EthernetTypeDot1Q))[:16], wantErr: ErrMalformed},
	)
	return cases
}

// gopacketKey decodes frame with gopacket and returns the flow fields it
// sees; ok is false when gopacket finds no complete IP layer.
func gopacketKey(frame []byte) (k FlowKey, l4 bool, ok bool) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	if p.Metadata().Truncated {
		return k, false, false
	}
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		k.Src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		k.Dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		k.Src, _ = netip.AddrFromSlice(ip.SrcIP.To16())
		k.Dst, _ = netip.AddrFromSlice(ip.DstIP.To16())
	default:
		return k, false, false
	}
	if !k.Src.IsValid() || !k.Dst.IsValid() {
		// gopacket gave up inside the IP header (e.g. on IPv4 options,
		// which the parser skips without reading, as NICs do).
		return k, false, false
	}
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		k.SrcPort, k.DstPort, l4 = uint16(l.SrcPort), uint16(l.DstPort), true
	case *layers.UDP:
		k.SrcPort, k.DstPort, l4 = uint16(l.SrcPort), uint16(l.DstPort), true
	}
	return k, l4, true
}

func TestParseFlowKey(t *testing.T) {
	for _, c := range frameCases(t) {
		t.Run(c.name, func(t *testing.T) {
			k, err := ParseFlowKey(c.frame)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("error = %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Ports != c.ports || k.Proto != c.wantProto {
				t.Errorf("key %v: Ports %v Proto %d, want %v %d", k, k.Ports, k.Proto, c.ports, c.wantProto)
			}
			g, l4, ok := gopacketKey(c.frame)
			if !ok {
				t.Fatalf("gopacket decodes no IP layer from the test frame")
			}
			if k.Src != g.Src || k.Dst != g.Dst {
				t.Errorf("addresses %v > %v, gopacket %v > %v", k.Src, k.Dst, g.Src, g.Dst)
			}
			if k.Ports && (!l4 || k.SrcPort != g.SrcPort || k.DstPort != g.DstPort) {
				t.Errorf("ports %d > %d, gopacket %d > %d (transport layer %v)", k.SrcPort, k.DstPort, g.SrcPort, g.DstPort, l4)
			}
		})
	}
}

// FuzzFlowKey feeds arbitrary frames to the dispatch parser: it never
// panics, a parsed key is valid and agrees with gopacket's decoding of the
// same bytes, and the dispatcher's in-place hash equals HashFlow of the key.
func FuzzFlowKey(f *testing.F) {
	for _, c := range frameCases(f) {
		f.Add(c.frame)
	}
	h := newT(f, nil)
	d, err := NewDispatcher(DispatchOptions{Workers: 5}, func(int, [][]byte) {})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	f.Fuzz(func(t *testing.T, frame []byte) {
		k, err := ParseFlowKey(frame)
		// The dispatcher's choice of worker (fast path included) follows
		// the documented rule.
		want := 0
		switch {
		case err == nil:
			hf, _ := h.HashFrame(frame, SymmetricNone)
			want = int(uint64(hf) * 5 >> 32)
		case errors.Is(err, ErrNotIP):
			want = int(uint64(h.Hash(frame[:12])) * 5 >> 32)
		}
		if got := d.Worker(frame); got != want {
			t.Fatalf("Worker = %d, want %d (parse error %v)", got, want, err)
		}
		if _, herr := h.HashFrame(frame, SymmetricNone); (herr == nil) != (err == nil) {
			t.Fatalf("ParseFlowKey error %v, HashFrame error %v", err, herr)
		}
		if err != nil {
			if !errors.Is(err, ErrNotIP) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps neither ErrNotIP nor ErrMalformed", err)
			}
			return
		}
		if err := k.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, s := range []Symmetric{SymmetricNone, SymmetricXOR, SymmetricOrXOR} {
			a, err := h.HashFrame(frame, s)
			if err != nil {
				t.Fatalf("HashFrame fails where ParseFlowKey succeeds: %v", err)
			}
			if b := h.HashFlow(k, s); a != b {
				t.Fatalf("%v: HashFrame %#x, HashFlow %#x", s, a, b)
			}
		}
		g, l4, ok := gopacketKey(frame)
		if !ok {
			return // e.g. 0x9100 tags, which gopacket does not decode
		}
		if k.Src != g.Src || k.Dst != g.Dst {
			t.Fatalf("addresses %v > %v, gopacket %v > %v", k.Src, k.Dst, g.Src, g.Dst)
		}
		if k.Ports && l4 && (k.SrcPort != g.SrcPort || k.DstPort != g.DstPort) {
			t.Fatalf("ports %d > %d, gopacket %d > %d", k.SrcPort, k.DstPort, g.SrcPort, g.DstPort)
		}
	})
}
