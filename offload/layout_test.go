package offload

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestParse: Parse finds every header of every shape the test frames
// take, and gopacket finds the transport header at the same place.
func TestParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		name                string
		o                   frameOpts
		tags, ext           int
		frag, payload, skip bool
	}{
		{name: "ipv4 udp", o: frameOpts{proto: ProtoUDP, payload: 10}, payload: true},
		{name: "ipv4 tcp options", o: frameOpts{proto: ProtoTCP, ipOpts: 8, tcpOpts: 12, payload: 3}, payload: true},
		{name: "qinq ipv4 tcp", o: frameOpts{proto: ProtoTCP, vlans: []uint16{EtherTypeQinQ, EtherTypeVLAN}, payload: 5, pad: 4}, tags: 2, payload: true},
		{name: "ipv4 first fragment", o: frameOpts{proto: ProtoUDP, fragMore: true, payload: 8}, frag: true, payload: true, skip: true},
		{name: "ipv4 later fragment", o: frameOpts{proto: ProtoUDP, fragOff: 3, payload: 8}, frag: true, skip: true},
		{name: "ipv6 udp", o: frameOpts{v6: true, proto: ProtoUDP, payload: 9}, payload: true},
		{name: "ipv6 ext tcp", o: frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoHopByHop, ProtoDstOpts, ProtoRouting}, rtType: 4, rtAddrs: 2, rtLeft: 1, payload: 9}, ext: 3, payload: true},
		{name: "ipv6 atomic fragment", o: frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoFragment}, payload: 12}, ext: 1, frag: true, payload: true},
		{name: "ipv6 later fragment", o: frameOpts{v6: true, proto: ProtoUDP, ext: []uint8{ProtoFragment}, fragOff: 3, payload: 12}, ext: 1, frag: true, skip: true},
		{name: "ipv6 icmpv6", o: frameOpts{v6: true, proto: ProtoICMPv6, payload: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := buildFrame(rng, c.o)
			lo, r := Parse(f)
			if r != ReasonNone {
				t.Fatalf("Parse: %v", r)
			}
			l3 := EthernetLen + VLANLen*len(c.o.vlans)
			if lo.L3 != l3 || lo.IPv6 != c.o.v6 || lo.Proto != c.o.proto || int(lo.VLANTags) != c.tags || int(lo.ExtHeaders) != c.ext ||
				lo.Fragment != c.frag || (lo.Payload != 0) != c.payload || (lo.Skip == ReasonFragment) != c.skip || lo.End != len(f)-c.o.pad {
				t.Fatalf("layout %+v of a %d-byte frame", lo, len(f))
			}
			if lo.HasIPv4Options() != (c.o.ipOpts > 0) {
				t.Errorf("HasIPv4Options %v", lo.HasIPv4Options())
			}
			if c.payload {
				want := lo.L4 + UDPLen
				if lo.Proto == ProtoTCP {
					want = lo.L4 + TCPMinLen + c.o.tcpOpts
				}
				if lo.Payload != want || lo.End-lo.Payload != c.o.payload {
					t.Errorf("Payload at %d, want %d (payload %d bytes)", lo.Payload, want, lo.End-lo.Payload)
				}
			}
			if c.skip || c.o.vlans != nil {
				return // gopacket decodes neither fragments' payloads nor 802.1ad as we do
			}
			p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
			if tl := p.TransportLayer(); tl != nil {
				if off := len(f) - c.o.pad - len(tl.LayerContents()) - len(tl.LayerPayload()); off != lo.L4 {
					t.Errorf("gopacket's transport header at %d, Parse's at %d", off, lo.L4)
				}
			}
		})
	}
}

// TestParseErrors: each broken shape gets its reason, and a frame of
// another EtherType is ReasonNotIP with the EtherType.
func TestParseErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	good := buildFrame(rng, frameOpts{proto: ProtoTCP, payload: 4})
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	arp := mod(func(b []byte) []byte { Ethernet(b).SetType(0x0806); return b })
	if lo, r := Parse(arp); r != ReasonNotIP || lo.EtherType != 0x0806 || lo.L3 != EthernetLen {
		t.Errorf("ARP: %+v %v", lo, r)
	}
	tags := buildFrame(rng, frameOpts{proto: ProtoUDP, vlans: []uint16{EtherTypeVLAN, EtherTypeVLAN, EtherTypeVLAN, EtherTypeVLAN, EtherTypeVLAN}})
	chain := make([]uint8, MaxExtHeaders+1)
	for i := range chain {
		chain[i] = ProtoDstOpts
	}
	long := buildFrame(rng, frameOpts{v6: true, proto: ProtoUDP, ext: chain})
	for _, c := range []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"runt", good[:10], ReasonShortEthernet},
		{"ihl 4", mod(func(b []byte) []byte { b[EthernetLen] = 0x44; return b }), ReasonIHL},
		{"version", mod(func(b []byte) []byte { b[EthernetLen] = 0x65; return b }), ReasonIPVersion},
		{"total length", mod(func(b []byte) []byte { IPv4(b[EthernetLen:]).SetTotalLength(1500); return b }), ReasonIPLength},
		{"cut ip", good[:EthernetLen+12], ReasonShortIPHeader},
		{"vlan tags", tags, ReasonVLANTags},
		{"ext chain", long, ReasonExtHeaderChain},
	} {
		if _, r := Parse(c.frame); r != c.want || !r.Malformed() {
			t.Errorf("%s: %v, want %v", c.name, r, c.want)
		}
	}
	// Cut in the TCP header: the IP header is fine, Payload says no.
	cut := mod(func(b []byte) []byte {
		b = b[:EthernetLen+IPv4MinLen+10]
		IPv4(b[EthernetLen:]).SetTotalLength(IPv4MinLen + 10)
		return b
	})
	if lo, r := Parse(cut); r != ReasonNone || lo.Payload != 0 || lo.L4 != EthernetLen+IPv4MinLen {
		t.Errorf("cut TCP header: %+v %v", lo, r)
	}
}

// TestParseAllocs: Parse allocates nothing, also for broken frames.
func TestParseAllocs(t *testing.T) {
	for _, f := range seedFrames() {
		if n := testing.AllocsPerRun(100, func() { Parse(f) }); n != 0 {
			t.Errorf("Parse of a %d-byte frame: %v allocations", len(f), n)
		}
	}
}

// FuzzParse: Parse never panics nor writes; its offsets are ordered and
// within the frame; VerifyRX, which uses it, reports the same offsets and
// malformation; the views at its offsets agree with it; and what
// segmentation accepts, Parse accepts.
func FuzzParse(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := append([]byte(nil), frame...)
		lo, r := Parse(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatal("Parse modified the frame")
		}
		v := VerifyRX(frame)
		l4Fault := v.Reason == ReasonShortL4Header || v.Reason == ReasonL4Length
		if (r.Malformed() && (!v.Malformed() || v.Reason != r)) || (!r.Malformed() && v.Malformed() && !l4Fault) || v.L3Offset != lo.L3 {
			t.Fatalf("Parse %+v %v, VerifyRX %+v", lo, r, v)
		}
		var seg Layout
		if e := parseLayout(&seg, frame, ProtoTCP); e.kind == nil && r != ReasonNone {
			t.Fatalf("segmentation parses what Parse calls %v", r)
		}
		if r != ReasonNone {
			return
		}
		if v.L4Offset != lo.L4 || v.Proto != lo.Proto || v.EtherType != lo.EtherType {
			t.Fatalf("Parse %+v, VerifyRX %+v", lo, v)
		}
		if !(EthernetLen <= lo.L3 && lo.L3 < lo.L4 && lo.L4 <= lo.End && lo.End <= len(frame)) {
			t.Fatalf("offsets out of order: %+v in %d bytes", lo, len(frame))
		}
		if lo.L3 != EthernetLen+VLANLen*int(lo.VLANTags) {
			t.Fatalf("L3 %d after %d tags", lo.L3, lo.VLANTags)
		}
		if lo.Payload != 0 && (lo.Payload <= lo.L4 || lo.Payload > lo.End || (lo.Proto != ProtoTCP && lo.Proto != ProtoUDP)) {
			t.Fatalf("Payload %d: %+v", lo.Payload, lo)
		}
		if lo.IPv6 {
			if lo.FinalDst < lo.L3+24 || lo.FinalDst+16 > lo.L4 || lo.HasIPv4Options() {
				t.Fatalf("FinalDst %d: %+v", lo.FinalDst, lo)
			}
			if ip := IPv6(frame[lo.L3:]); ip.Version() != 6 || lo.L3+IPv6Len+int(ip.PayloadLength()) != lo.End {
				t.Fatalf("IPv6 header disagrees: %+v", lo)
			}
			return
		}
		ip := IPv4(frame[lo.L3:])
		if ip.Version() != 4 || ip.HeaderLength() != lo.L4-lo.L3 || int(ip.TotalLength()) != lo.End-lo.L3 || ip.Protocol() != lo.Proto || ip.IsFragment() != lo.Fragment {
			t.Fatalf("IPv4 header disagrees: %+v", lo)
		}
	})
}

// TestBuild: the builder's frames parse back to what was asked, verify,
// and a partial checksum completes to the full one; bad input is an
// error wrapping ErrInvalidHeaders, never a panic.
func TestBuild(t *testing.T) {
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	a4, b4 := netip.MustParseAddrPort("198.18.0.1:5000"), netip.MustParseAddrPort("198.18.0.2:53")
	a6, b6 := netip.MustParseAddrPort("[2001:db8::1]:5000"), netip.MustParseAddrPort("[2001:db8::2]:53")
	frame := make([]byte, 2048)
	for _, ends := range [][2]netip.AddrPort{{a4, b4}, {a6, b6}} {
		h := Headers{SrcMAC: macA, DstMAC: macB, Src: ends[0], Dst: ends[1], TOS: 0xb8}
		for _, n := range []int{0, 1, 17, 1400} {
			payload := bytes.Repeat([]byte{0x5a, 0xc3, 0x01}, n)[:n]
			for _, proto := range []uint8{ProtoUDP, ProtoTCP} {
				var fl int
				var err error
				if proto == ProtoUDP {
					fl, err = h.BuildUDP(frame, 7, payload)
				} else {
					fl, err = h.BuildTCP(frame, 7, TCPFields{Seq: 1e9, Ack: 3, Flags: TCPFlagACK | TCPFlagPSH, Window: 512}, payload)
				}
				if err != nil {
					t.Fatal(err)
				}
				f := frame[:fl]
				lo, r := Parse(f)
				if r != ReasonNone || lo.Proto != proto || lo.IPv6 != ends[1].Addr().Is6() || lo.End != fl || lo.Payload != h.Len(proto) {
					t.Fatalf("%v→%v proto %d: %+v %v", ends[0], ends[1], proto, lo, r)
				}
				if v := VerifyRX(f); !v.OK() || v.L4 != VerdictOK {
					t.Fatalf("%v→%v proto %d: %v", ends[0], ends[1], proto, v)
				}
				if !bytes.Equal(f[lo.Payload:], payload) || Ethernet(f).Src() != [6]byte(macA) || Ethernet(f).Dst() != [6]byte(macB) {
					t.Fatalf("payload or MACs differ")
				}
				src, _ := netip.AddrFromSlice(lo.Src(f))
				dst, _ := netip.AddrFromSlice(lo.Dst(f))
				if src != ends[0].Addr() || dst != ends[1].Addr() || UDP(f[lo.L4:]).SrcPort() != 5000 || UDP(f[lo.L4:]).DstPort() != 53 {
					t.Fatalf("addresses %v %v", src, dst)
				}
				if proto == ProtoTCP {
					tcp := TCP(f[lo.L4:])
					if tcp.Seq() != 1e9 || tcp.Ack() != 3 || tcp.Flags() != TCPFlagACK|TCPFlagPSH || tcp.Window() != 512 {
						t.Fatalf("TCP fields %x", []byte(tcp[:TCPMinLen]))
					}
				}
			}
			fl, err := h.BuildUDP(frame, 7, payload)
			if err != nil {
				t.Fatal(err)
			}
			full := append([]byte(nil), frame[:fl]...)
			fl, err = h.BuildUDPPartial(frame, 7, payload)
			if err != nil {
				t.Fatal(err)
			}
			if err := FillPartial(frame[:fl], h.Len(ProtoUDP)-UDPLen, UDPChecksumOffset); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(frame[:fl], full) {
				t.Fatalf("partial checksum completed to %x, BuildUDP wrote %x", frame[:fl], full)
			}
			if a := testing.AllocsPerRun(20, func() { h.BuildUDP(frame, 1, payload) }); a != 0 {
				t.Errorf("BuildUDP allocates %v times", a)
			}
		}
	}
	for _, c := range []struct {
		name  string
		h     Headers
		frame int
	}{
		{"families", Headers{SrcMAC: macA, DstMAC: macB, Src: a4, Dst: b6}, 100},
		{"no address", Headers{SrcMAC: macA, DstMAC: macB, Dst: b4}, 100},
		{"mac", Headers{SrcMAC: macA[:5], DstMAC: macB, Src: a4, Dst: b4}, 100},
		{"short frame", Headers{SrcMAC: macA, DstMAC: macB, Src: a4, Dst: b4}, 41},
	} {
		if _, err := c.h.BuildUDP(make([]byte, c.frame), 0, nil); !errors.Is(err, ErrInvalidHeaders) {
			t.Errorf("%s: BuildUDP: %v", c.name, err)
		}
		if _, err := c.h.BuildTCP(make([]byte, c.frame), 0, TCPFields{}, nil); !errors.Is(err, ErrInvalidHeaders) {
			t.Errorf("%s: BuildTCP: %v", c.name, err)
		}
	}
	h := Headers{SrcMAC: macA, DstMAC: macB, Src: a4, Dst: b4}
	if _, err := h.BuildUDP(make([]byte, 70000), 0, make([]byte, 65508)); !errors.Is(err, ErrInvalidHeaders) {
		t.Errorf("oversized payload: %v", err)
	}
}
