package offload

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// gopacketVerdicts decodes frame with gopacket and returns its own
// checksum verdicts (computed by gopacket, independently of this package)
// for the IPv4 header and the transport layer. checked is false for a
// layer gopacket did not decode or does not verify.
func gopacketVerdicts(t *testing.T, frame []byte) (l3OK, l3Checked, l4OK, l4Checked bool, correct uint16) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	nl := p.NetworkLayer()
	for _, l := range p.Layers() {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok && nl != nil {
			if err := c.SetNetworkLayerForChecksum(nl); err != nil {
				t.Fatalf("gopacket: %v", err)
			}
		}
		lwc, ok := l.(gopacket.LayerWithChecksum)
		if !ok {
			continue
		}
		err, res := lwc.VerifyChecksum()
		if err != nil {
			t.Fatalf("gopacket cannot verify %v: %v", l.LayerType(), err)
		}
		switch l.LayerType() {
		case layers.LayerTypeIPv4:
			l3OK, l3Checked = res.Valid, true
		case layers.LayerTypeTCP, layers.LayerTypeUDP, layers.LayerTypeICMPv4, layers.LayerTypeICMPv6:
			l4OK, l4Checked, correct = res.Valid, true, uint16(res.Correct)
		}
	}
	return
}

// TestFillChecksumGopacket fills random frames and lets gopacket, which
// computes every checksum on its own (pseudo-headers with the final
// destination of routing headers included), judge them: it must find no
// mismatch, and the value written must be the one gopacket computes.
func TestFillChecksumGopacket(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	checkedL3, checkedL4 := 0, 0
	for i := 0; i < 2000; i++ {
		o := randomOpts(rng, true)
		f := buildFrame(rng, o)
		done, err := FillChecksum(f)
		if err != nil {
			t.Fatalf("frame %d (%+v): FillChecksum: %v", i, o, err)
		}
		if done&FilledL4 == 0 || (done&FilledIPv4 != 0) == o.v6 {
			t.Fatalf("frame %d (%+v): filled %v", i, o, done)
		}
		l3OK, l3Checked, l4OK, l4Checked, correct := gopacketVerdicts(t, f)
		if l3Checked {
			checkedL3++
			if !l3OK {
				t.Fatalf("frame %d (%+v): gopacket says the filled IPv4 header checksum is wrong", i, o)
			}
		}
		if l4Checked {
			checkedL4++
			if !l4OK {
				t.Fatalf("frame %d (%+v): gopacket says the filled transport checksum is wrong", i, o)
			}
			lo, _ := Parse(f)
			_, field, _, _ := layoutL4Span(f, &lo)
			if got := binary.BigEndian.Uint16(f[field:]); got != correct && !(got == 0 && correct == 0xffff) {
				t.Fatalf("frame %d (%+v): filled %#04x, gopacket computes %#04x", i, o, got, correct)
			}
		}
		if r := VerifyRX(f); !r.OK() || r.L4 != VerdictOK {
			t.Fatalf("frame %d (%+v): VerifyRX after fill: %v", i, o, r)
		}
	}
	// gopacket verifies IPv4, TCP, UDP, ICMPv4 and ICMPv6, not UDP-Lite,
	// and not behind an IPv6 fragment header; most frames must have been
	// judged for the test to mean anything.
	if checkedL3 < 500 || checkedL4 < 1000 {
		t.Fatalf("gopacket judged only %d IPv4 headers and %d transport checksums", checkedL3, checkedL4)
	}
}

// TestVerifyRXGopacket compares VerifyRX verdicts with gopacket's on frames
// with right, wrong and corrupted checksums, and checks that the derived
// (CHECKSUM_COMPLETE) path agrees with the direct one.
func TestVerifyRXGopacket(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	bad, good := 0, 0
	for i := 0; i < 3000; i++ {
		o := randomOpts(rng, true)
		f := buildFrame(rng, o)
		if rng.IntN(4) != 0 {
			if _, err := FillChecksum(f); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				// Corrupt one byte of the transport segment (header or
				// payload); the checksum field itself included.
				lo, _ := Parse(f)
				at := lo.L4 + rng.IntN(lo.End-lo.L4)
				f[at] ^= byte(1 + rng.IntN(255))
			}
		}
		r := VerifyRX(f)
		if rc := VerifyRXComplete(f, Checksum(f[EthernetLen:], 0)); rc != r {
			t.Fatalf("frame %d (%+v): VerifyRXComplete %v, VerifyRX %v", i, o, rc, r)
		}
		if r.Malformed() {
			// A corrupted length field (UDP length, TCP data offset) makes
			// the frame malformed: fine, but only for those bytes.
			continue
		}
		l3OK, l3Checked, l4OK, l4Checked, _ := gopacketVerdicts(t, f)
		if l3Checked && l3OK != (r.L3 == VerdictOK) {
			t.Fatalf("frame %d (%+v): L3 %v, gopacket valid=%v", i, o, r.L3, l3OK)
		}
		if !l4Checked {
			continue
		}
		lo, _ := Parse(f)
		if lo.Proto == ProtoUDP && binary.BigEndian.Uint16(f[lo.L4+6:]) == 0 {
			// gopacket takes UDP checksum 0 as "none" over IPv6 too.
			want := VerdictNone
			if o.v6 {
				want = VerdictBad
			}
			if r.L4 != want {
				t.Fatalf("frame %d: zero UDP checksum: L4 %v, want %v", i, r.L4, want)
			}
			continue
		}
		if l4OK != (r.L4 == VerdictOK) {
			t.Fatalf("frame %d (%+v): L4 %v, gopacket valid=%v\n% x", i, o, r.L4, l4OK, f)
		}
		if l4OK {
			good++
		} else {
			bad++
		}
	}
	if good < 500 || bad < 500 {
		t.Fatalf("only %d good and %d bad transport checksums judged by gopacket", good, bad)
	}
}

// TestVerifyRXCases pins the verdicts for each kind of frame the issue
// names, including malformed ones, which must never read as bad checksums.
func TestVerifyRXCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	type tc struct {
		name       string
		o          frameOpts
		mut        func(f []byte) []byte // applied after FillChecksum
		l3, l4     Verdict
		reason     Reason
		proto      uint8
		noFillFail bool
	}
	v4 := func(p uint8) frameOpts { return frameOpts{proto: p, payload: 33} }
	v6 := func(p uint8, ext ...uint8) frameOpts { return frameOpts{v6: true, proto: p, payload: 33, ext: ext} }
	l3 := func(f []byte) int { lo, _ := Parse(f); return lo.L3 }
	l4 := func(f []byte) int { lo, _ := Parse(f); return lo.L4 }
	cases := []tc{
		{name: "ipv4 tcp", o: v4(ProtoTCP), l3: VerdictOK, l4: VerdictOK, proto: ProtoTCP},
		{name: "ipv4 udp", o: v4(ProtoUDP), l3: VerdictOK, l4: VerdictOK, proto: ProtoUDP},
		{name: "ipv4 udplite", o: v4(ProtoUDPLite), l3: VerdictOK, l4: VerdictOK, proto: ProtoUDPLite},
		{name: "ipv4 icmp", o: v4(ProtoICMP), l3: VerdictOK, l4: VerdictOK, proto: ProtoICMP},
		{name: "ipv6 icmpv6", o: v6(ProtoICMPv6), l3: VerdictNone, l4: VerdictOK, proto: ProtoICMPv6},
		{name: "802.1ad+802.1Q ipv6 tcp", o: frameOpts{vlans: []uint16{EtherTypeQinQ, EtherTypeVLAN}, v6: true, proto: ProtoTCP, payload: 100}, l3: VerdictNone, l4: VerdictOK, proto: ProtoTCP},
		{name: "ipv4 bad header checksum", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[l3(f)+10] ^= 1; return f }, l3: VerdictBad, l4: VerdictOK, proto: ProtoTCP},
		{name: "ipv4 bad tcp checksum", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[len(f)-1] ^= 0x80; return f }, l3: VerdictOK, l4: VerdictBad, proto: ProtoTCP},
		{name: "ipv4 udp checksum 0", o: v4(ProtoUDP), mut: func(f []byte) []byte { f[l4(f)+6], f[l4(f)+7] = 0, 0; return f }, l3: VerdictOK, l4: VerdictNone, reason: ReasonUDPZeroChecksum, proto: ProtoUDP},
		{name: "ipv6 udp checksum 0", o: v6(ProtoUDP), mut: func(f []byte) []byte { f[l4(f)+6], f[l4(f)+7] = 0, 0; return f }, l3: VerdictNone, l4: VerdictBad, reason: ReasonUDP6ZeroChecksum, proto: ProtoUDP},
		{name: "udplite checksum 0 is bad", o: v6(ProtoUDPLite), mut: func(f []byte) []byte { f[l4(f)+6], f[l4(f)+7] = 0, 0; return f }, l3: VerdictNone, l4: VerdictBad, proto: ProtoUDPLite},
		{name: "ipv4 MF fragment", o: frameOpts{proto: ProtoTCP, payload: 40, fragMore: true}, l3: VerdictOK, l4: VerdictSkipped, reason: ReasonFragment, proto: ProtoTCP},
		{name: "ipv4 later fragment", o: frameOpts{proto: ProtoUDP, payload: 40, fragOff: 185}, l3: VerdictOK, l4: VerdictSkipped, reason: ReasonFragment, proto: ProtoUDP},
		{name: "ipv6 first fragment", o: frameOpts{v6: true, proto: ProtoTCP, payload: 40, ext: []uint8{ProtoFragment}, fragMore: true}, l4: VerdictSkipped, reason: ReasonFragment, proto: ProtoTCP},
		{name: "ipv6 later fragment", o: frameOpts{v6: true, proto: ProtoUDP, payload: 40, ext: []uint8{ProtoHopByHop, ProtoFragment}, fragOff: 7}, l4: VerdictSkipped, reason: ReasonFragment, proto: ProtoUDP},
		{name: "ipv6 atomic fragment verified", o: v6(ProtoTCP, ProtoFragment), l4: VerdictOK, proto: ProtoTCP},
		{name: "ipv6 hop-by-hop, dstopts, srh in flight", o: frameOpts{v6: true, proto: ProtoUDP, payload: 10, ext: []uint8{ProtoHopByHop, ProtoDstOpts, ProtoRouting}, rtType: 4, rtAddrs: 3, rtLeft: 2}, l4: VerdictOK, proto: ProtoUDP},
		{name: "ipv6 rh0 in flight", o: frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoRouting}, rtType: 0, rtAddrs: 2, rtLeft: 1}, l4: VerdictOK, proto: ProtoTCP},
		{name: "ipv6 routing type 3 in flight", o: frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoRouting}, rtType: 3, rtAddrs: 2, rtLeft: 1}, l4: VerdictSkipped, reason: ReasonRoutingUnknown, proto: ProtoTCP},
		{name: "ipv6 srh last entry beyond list", o: frameOpts{v6: true, proto: ProtoTCP, ext: []uint8{ProtoRouting}, rtType: 4, rtAddrs: 2, rtLeft: 1},
			mut: func(f []byte) []byte { f[l3(f)+IPv6Len+4] = 5; return f }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonRoutingHeader},
		{name: "esp", o: v4(ProtoESP), l3: VerdictOK, l4: VerdictSkipped, reason: ReasonEncrypted, proto: ProtoESP},
		{name: "ipv6 no next header", o: v6(ProtoNoNext), l4: VerdictNone, reason: ReasonNoChecksum, proto: ProtoNoNext},
		{name: "ipv4 gre has no known checksum", o: v4(47), l3: VerdictOK, l4: VerdictNone, reason: ReasonNoChecksum, proto: 47},
		{name: "arp", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[12], f[13] = 0x08, 0x06; return f }, reason: ReasonNotIP},
		{name: "padding ignored", o: frameOpts{proto: ProtoTCP, payload: 5, pad: 17}, l3: VerdictOK, l4: VerdictOK, proto: ProtoTCP},
		{name: "udp shorter than ip payload", o: v4(ProtoUDP), mut: func(f []byte) []byte {
			// Append 3 bytes to the IP packet; the UDP datagram stays.
			f = append(f, 1, 2, 3)
			binary.BigEndian.PutUint16(f[l3(f)+2:], binary.BigEndian.Uint16(f[l3(f)+2:])+3)
			IPv4(f[l3(f):]).SetChecksum(IPv4(f[l3(f):]).CalculateChecksum())
			return f
		}, l3: VerdictOK, l4: VerdictOK, proto: ProtoUDP},

		// Malformed: never reported as a bad checksum.
		{name: "short ethernet", o: v4(ProtoTCP), mut: func(f []byte) []byte { return f[:13] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonShortEthernet},
		{name: "short vlan", o: frameOpts{vlans: []uint16{EtherTypeVLAN}, proto: ProtoTCP}, mut: func(f []byte) []byte { return f[:16] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonShortEthernet},
		{name: "too many vlan tags", o: frameOpts{vlans: []uint16{EtherTypeQinQ, EtherTypeQinQ, EtherTypeQinQ, EtherTypeQinQ, EtherTypeVLAN}, proto: ProtoTCP}, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonVLANTags, noFillFail: true},
		{name: "ihl 4", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[l3(f)] = 0x44; return f }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonIHL},
		{name: "version 6 in ipv4", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[l3(f)] = 0x65; return f }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonIPVersion},
		{name: "ihl beyond frame", o: frameOpts{proto: ProtoTCP}, mut: func(f []byte) []byte { f[l3(f)] = 0x4f; return f[:l3(f)+40] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonShortIPHeader},
		{name: "truncated ipv4", o: v4(ProtoTCP), mut: func(f []byte) []byte { return f[:len(f)-1] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonIPLength},
		{name: "total length below ihl", o: v4(ProtoTCP), mut: func(f []byte) []byte { binary.BigEndian.PutUint16(f[l3(f)+2:], 19); return f }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonIPLength},
		{name: "truncated ipv6", o: v6(ProtoTCP), mut: func(f []byte) []byte { return f[:len(f)-1] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonIPLength},
		{name: "ipv6 header short", o: v6(ProtoTCP), mut: func(f []byte) []byte { return f[:l3(f)+39] }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonShortIPHeader},
		{name: "hop-by-hop not first", o: v6(ProtoTCP, ProtoDstOpts, ProtoHopByHop), l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonHopByHop, noFillFail: true},
		{name: "extension header chain too long", o: v6(ProtoTCP, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts, ProtoDstOpts), l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonExtHeaderChain, noFillFail: true},
		{name: "extension header beyond packet", o: v6(ProtoTCP, ProtoDstOpts), mut: func(f []byte) []byte { f[l3(f)+IPv6Len+1] = 200; return f }, l3: VerdictMalformed, l4: VerdictMalformed, reason: ReasonExtHeader},
		{name: "tcp header truncated", o: frameOpts{proto: ProtoTCP}, mut: func(f []byte) []byte {
			f = f[:len(f)-1]
			binary.BigEndian.PutUint16(f[l3(f)+2:], binary.BigEndian.Uint16(f[l3(f)+2:])-1)
			return f
		}, l3: VerdictBad, l4: VerdictMalformed, reason: ReasonShortL4Header},
		{name: "tcp data offset 4", o: v4(ProtoTCP), mut: func(f []byte) []byte { f[l4(f)+12] = 0x40; return f }, l3: VerdictOK, l4: VerdictMalformed, reason: ReasonL4Length},
		{name: "tcp data offset beyond segment", o: frameOpts{proto: ProtoTCP, payload: 3}, mut: func(f []byte) []byte { f[l4(f)+12] = 0x60; return f }, l3: VerdictOK, l4: VerdictMalformed, reason: ReasonL4Length},
		{name: "udp length beyond ip", o: v4(ProtoUDP), mut: func(f []byte) []byte { binary.BigEndian.PutUint16(f[l4(f)+4:], 100); return f }, l3: VerdictOK, l4: VerdictMalformed, reason: ReasonL4Length},
		{name: "udp length below 8", o: v6(ProtoUDP), mut: func(f []byte) []byte { binary.BigEndian.PutUint16(f[l4(f)+4:], 7); return f }, l4: VerdictMalformed, reason: ReasonL4Length},
		{name: "udplite coverage below 8", o: v4(ProtoUDPLite), mut: func(f []byte) []byte { binary.BigEndian.PutUint16(f[l4(f)+4:], 4); return f }, l3: VerdictOK, l4: VerdictMalformed, reason: ReasonL4Length},
		{name: "icmp truncated", o: frameOpts{proto: ProtoICMP}, mut: func(f []byte) []byte {
			f = f[:len(f)-5]
			binary.BigEndian.PutUint16(f[l3(f)+2:], binary.BigEndian.Uint16(f[l3(f)+2:])-5)
			IPv4(f[l3(f):]).SetChecksum(IPv4(f[l3(f):]).CalculateChecksum())
			return f
		}, l3: VerdictOK, l4: VerdictMalformed, reason: ReasonShortL4Header},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := buildFrame(rng, c.o)
			_, err := FillChecksum(f)
			if c.noFillFail {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("FillChecksum on a malformed frame: %v, want ErrMalformed", err)
				}
			} else if err != nil {
				t.Fatalf("FillChecksum: %v", err)
			}
			if c.mut != nil {
				f = c.mut(f)
			}
			r := VerifyRX(f)
			if r.L3 != c.l3 || r.L4 != c.l4 || r.Reason != c.reason || (!r.Malformed() && r.Proto != c.proto) {
				t.Fatalf("VerifyRX = %+v (%v), want L3 %v, L4 %v, reason %q, proto %d", r, r, c.l3, c.l4, c.reason, c.proto)
			}
			if rc := VerifyRXComplete(f, Checksum(f[min(EthernetLen, len(f)):], 0)); rc != r {
				t.Fatalf("VerifyRXComplete = %v, VerifyRX = %v", rc, r)
			}
			if r.Malformed() {
				g := append([]byte(nil), f...)
				if _, err := FillChecksum(g); !errors.Is(err, ErrMalformed) {
					t.Fatalf("FillChecksum on a malformed frame: %v, want ErrMalformed", err)
				}
				if string(g) != string(f) {
					t.Fatalf("FillChecksum modified a malformed frame")
				}
			}
			if r.String() == "" {
				t.Fatal("empty String")
			}
		})
	}
}

// TestVerifyRXCompleteHardwareStyle feeds VerifyRXComplete sums the way
// hardware may deliver them: unfolded, in either zero form, and checks that
// a sum that does not match the frame is caught.
func TestVerifyRXCompleteWrongSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for i := 0; i < 500; i++ {
		f := buildFrame(rng, randomOpts(rng, true))
		if _, err := FillChecksum(f); err != nil {
			t.Fatal(err)
		}
		s := Checksum(f[EthernetLen:], 0)
		if r := VerifyRXComplete(f, s); !r.OK() || r.L4 != VerdictOK {
			t.Fatalf("right sum: %v", r)
		}
		// A sum that disagrees with the bytes (a corrupted frame whose
		// hardware sum was taken over the corrupted bytes is the same
		// thing seen from the other side) must fail the L4 check.
		if r := VerifyRXComplete(f, s^uint16(1+rng.IntN(0xfffe))); r.L4 != VerdictBad {
			if r.L4 == VerdictOK {
				t.Fatalf("wrong sum accepted: %v", r)
			}
		}
	}
}

func TestVerifyRXZeroAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	f := buildFrame(rng, frameOpts{v6: true, proto: ProtoTCP, payload: 1400, ext: []uint8{ProtoHopByHop}})
	if _, err := FillChecksum(f); err != nil {
		t.Fatal(err)
	}
	sum := Checksum(f[EthernetLen:], 0)
	if n := testing.AllocsPerRun(100, func() {
		VerifyRX(f)
		VerifyRXComplete(f, sum)
		FillChecksum(f)
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

func TestVerdictStrings(t *testing.T) {
	seen := map[string]bool{}
	for v := VerdictNone; v <= VerdictMalformed; v++ {
		s := v.String()
		if s == "" || seen[s] {
			t.Fatalf("Verdict(%d).String() = %q", v, s)
		}
		seen[s] = true
	}
	for r := ReasonShortEthernet; r <= ReasonUDP6ZeroChecksum; r++ {
		if r == reasonFirstSkipped || r == reasonFirstNone || r == reasonFirstBad {
			continue
		}
		if r.String() == "" {
			t.Fatalf("Reason(%d) has no text", r)
		}
	}
}
