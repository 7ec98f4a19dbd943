package offload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// superSpec describes a test super-packet, built with gopacket (an
// implementation independent of the code under test).
type superSpec struct {
	v6       bool
	vlans    int  // number of VLAN tags (first 802.1ad when > 1)
	ext      bool // IPv6: hop-by-hop and destination options headers
	ipOpts   bool // IPv4: a 4-byte options field (NOP NOP NOP EOL)
	udp      bool
	flags    byte // TCP flags
	tsopt    bool // TCP timestamp option (12 bytes with NOPs)
	payload  int
	id       uint16
	seq      uint32
	badCsums bool // leave wrong checksums in the input
}

func (s superSpec) String() string {
	f := "v4"
	if s.v6 {
		f = "v6"
	}
	if s.udp {
		f += "/udp"
	}
	return fmt.Sprintf("%s/vlan%d/ext%v/opt%v/ts%v/flags%#x/len%d", f, s.vlans, s.ext, s.ipOpts, s.tsopt, s.flags, s.payload)
}

func buildSuper(t testing.TB, s superSpec) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(s.payload), uint64(s.flags)))
	pay := make([]byte, s.payload)
	for i := range pay {
		pay[i] = byte(rng.Uint32())
	}
	var ls []gopacket.SerializableLayer
	eth := &layers.Ethernet{
		SrcMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
		DstMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
	}
	ls = append(ls, eth)
	etype := layers.EthernetTypeIPv4
	if s.v6 {
		etype = layers.EthernetTypeIPv6
	}
	if s.vlans > 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		if s.vlans > 1 {
			eth.EthernetType = layers.EthernetTypeQinQ
		}
		for i := 0; i < s.vlans; i++ {
			typ := layers.EthernetTypeDot1Q
			if i == s.vlans-1 {
				typ = etype
			}
			ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(100 + i), Priority: 3, Type: typ})
		}
	} else {
		eth.EthernetType = etype
	}
	proto := layers.IPProtocolTCP
	if s.udp {
		proto = layers.IPProtocolUDP
	}
	var nl gopacket.NetworkLayer
	if s.v6 {
		ip := &layers.IPv6{
			Version: 6, TrafficClass: 0x28, FlowLabel: 0x12345, HopLimit: 64, NextHeader: proto,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2"),
		}
		nl = ip
		ls = append(ls, ip)
		if s.ext {
			ip.NextHeader = layers.IPProtocolIPv6HopByHop
			// Hop-by-hop (8 bytes: PadN 6) then destination options
			// (16 bytes: PadN 14), as raw bytes.
			ext := []byte{60, 0, 1, 4, 0, 0, 0, 0, byte(proto), 1, 1, 12}
			ext = append(ext, make([]byte, 12)...)
			ls = append(ls, gopacket.Payload(ext))
		}
	} else {
		ip := &layers.IPv4{
			Version: 4, TOS: 0x10, TTL: 64, Protocol: proto, Id: s.id, Flags: layers.IPv4DontFragment,
			SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2),
		}
		if s.ipOpts {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}
		nl = ip
		ls = append(ls, ip)
	}
	if s.udp {
		u := &layers.UDP{SrcPort: 4000, DstPort: 5000}
		u.SetNetworkLayerForChecksum(nl)
		ls = append(ls, u)
	} else {
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: s.seq, Ack: 0x01020304, Window: 501, Urgent: 0}
		tcp.FIN = s.flags&tcpFIN != 0
		tcp.SYN = s.flags&tcpSYN != 0
		tcp.RST = s.flags&tcpRST != 0
		tcp.PSH = s.flags&tcpPSH != 0
		tcp.ACK = s.flags&tcpACK != 0
		tcp.URG = s.flags&tcpURG != 0
		tcp.ECE = s.flags&tcpECE != 0
		tcp.CWR = s.flags&tcpCWR != 0
		if s.tsopt {
			tcp.Options = []layers.TCPOption{
				{OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{0, 1, 2, 3, 4, 5, 6, 7}},
			}
		}
		tcp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, tcp)
	}
	ls = append(ls, gopacket.Payload(pay))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("build %v: %v", s, err)
	}
	out := append([]byte(nil), buf.Bytes()...)
	if s.badCsums {
		lo, err := parseSegLayout(out, map[bool]uint8{false: ipProtoTCP, true: ipProtoUDP}[s.udp], "test")
		if err != nil {
			t.Fatal(err)
		}
		out[lo.L4+16-10*segB2I(s.udp)] ^= 0x5a
		if !s.v6 {
			out[lo.L3+10] ^= 0xa5
		}
	}
	return out
}

func segB2I(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gopacketCheck decodes frame with gopacket and fails t unless every layer
// decodes, the IP and transport checksums verify (recomputed by gopacket)
// and the IP length fields match the frame. It returns the decoded packet.
func gopacketCheck(t testing.TB, frame []byte) gopacket.Packet {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket cannot decode frame: %v", el.Error())
	}
	nl := p.NetworkLayer()
	if nl == nil {
		t.Fatalf("gopacket found no network layer")
	}
	var l4 gopacket.Layer
	var l4len int
	switch tl := p.TransportLayer().(type) {
	case *layers.TCP:
		if err := tl.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		l4 = tl
		l4len = len(tl.Contents) + len(tl.Payload)
	case *layers.UDP:
		if err := tl.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		l4 = tl
		l4len = len(tl.Contents) + len(tl.Payload)
		if int(tl.Length) != l4len {
			t.Errorf("UDP length %d, datagram has %d bytes", tl.Length, l4len)
		}
	default:
		t.Fatalf("gopacket found transport layer %T", p.TransportLayer())
	}
	switch ip := nl.(type) {
	case *layers.IPv4:
		if int(ip.Length) != len(ip.Contents)+len(ip.Payload) {
			t.Errorf("IPv4 total length %d, packet has %d bytes", ip.Length, len(ip.Contents)+len(ip.Payload))
		}
	case *layers.IPv6:
		if int(ip.Length) != len(ip.Payload)+segHBHLen(ip) {
			t.Errorf("IPv6 payload length %d, packet has %d bytes after the header", ip.Length, len(ip.Payload))
		}
	}
	err, mism := p.VerifyChecksums()
	if err != nil {
		t.Fatalf("gopacket VerifyChecksums: %v", err)
	}
	for _, m := range mism {
		t.Errorf("gopacket: bad checksum in layer %d (%v): have %#04x, want %#04x", m.LayerIndex, m.Layer.LayerType(), m.Actual, m.Correct)
	}
	_ = l4
	_ = l4len
	return p
}

// segHBHLen is the length of a hop-by-hop header gopacket folded into the IPv6
// layer (it does not count it in Payload).
func segHBHLen(ip *layers.IPv6) int {
	if ip.HopByHop != nil {
		return len(ip.HopByHop.Contents)
	}
	return 0
}

// segRefSum is the plain reference Internet checksum loop (RFC 1071), kept
// independent of Checksum and copySum.
func segRefSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

// segRefVerify checks the IPv4 header checksum and the TCP/UDP checksum of a
// frame with the reference loop, using lo from the frame itself.
func segRefVerify(frame []byte, lo Layout) error {
	ip := frame[lo.L3:lo.End]
	if !lo.IPv6 {
		if s := segRefSum(ip[:lo.L4-lo.L3]); s != 0xffff {
			return fmt.Errorf("IPv4 header checksum: sum %#04x", s)
		}
	}
	var ph []byte
	l4len := lo.End - lo.L4
	if lo.IPv6 {
		ph = append(ph, ip[8:40]...)
		ph = binary.BigEndian.AppendUint32(ph, uint32(l4len))
		ph = append(ph, 0, 0, 0, lo.Proto)
	} else {
		ph = append(ph, ip[12:20]...)
		ph = append(ph, 0, lo.Proto)
		ph = binary.BigEndian.AppendUint16(ph, uint16(l4len))
	}
	s := segRefSum(append(ph, frame[lo.L4:lo.End]...))
	if s != 0xffff {
		return fmt.Errorf("L4 checksum: sum %#04x", s)
	}
	if lo.Proto == ipProtoUDP && binary.BigEndian.Uint16(frame[lo.L4+6:]) == 0 {
		return fmt.Errorf("UDP checksum 0 written")
	}
	return nil
}

// checkReassembles verifies segs against the super-packet in: every
// segment's checksums verify, its headers equal in's except for the fields
// segmentation changes, the changed fields follow the kernel's rules, and
// the payloads concatenate to in's payload.
func checkReassembles(in []byte, segs [][]byte, opts SegmentOptions, proto uint8) error {
	lo, err := parseSegLayout(in, proto, "check")
	if err != nil {
		return err
	}
	payload := in[lo.Payload:lo.End]
	want := max(1, (len(payload)+opts.MSS-1)/opts.MSS)
	if len(segs) != want {
		return fmt.Errorf("%d segments, want %d", len(segs), want)
	}
	var got []byte
	for i, s := range segs {
		slo, err := parseSegLayout(s, proto, "check")
		if err != nil {
			return fmt.Errorf("segment %d: %w", i, err)
		}
		if slo.End != len(s) || slo.Payload != lo.Payload || slo.L4 != lo.L4 || slo.L3 != lo.L3 {
			return fmt.Errorf("segment %d: layout %+v, input %+v, len %d", i, slo, lo, len(s))
		}
		if err := segRefVerify(s, slo); err != nil {
			return fmt.Errorf("segment %d: %w", i, err)
		}
		n := len(s) - lo.Payload
		if n > opts.MSS || (i < len(segs)-1 && n != opts.MSS) {
			return fmt.Errorf("segment %d: %d payload bytes with MSS %d", i, n, opts.MSS)
		}
		// Header equality after masking mutable fields.
		a := append([]byte(nil), in[:lo.Payload]...)
		b := append([]byte(nil), s[:lo.Payload]...)
		for _, h := range [][]byte{a, b} {
			ip := h[lo.L3:]
			if lo.IPv6 {
				ip[4], ip[5] = 0, 0
			} else {
				copy(ip[2:6], []byte{0, 0, 0, 0})
				ip[10], ip[11] = 0, 0
			}
			th := h[lo.L4:]
			if proto == ipProtoTCP {
				copy(th[4:8], []byte{0, 0, 0, 0})
				th[13] &^= tcpFIN | tcpPSH | tcpCWR
				th[16], th[17] = 0, 0
			} else {
				copy(th[4:8], []byte{0, 0, 0, 0})
			}
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("segment %d: headers differ beyond the mutable fields:\n in %x\nout %x", i, a, b)
		}
		if !lo.IPv6 {
			id0 := binary.BigEndian.Uint16(in[lo.L3+4:])
			id := binary.BigEndian.Uint16(s[lo.L3+4:])
			wantID := id0 + uint16(i)
			if opts.FixedID {
				wantID = id0
			}
			if id != wantID {
				return fmt.Errorf("segment %d: IPv4 ID %d, want %d", i, id, wantID)
			}
		}
		if proto == ipProtoTCP {
			seq := binary.BigEndian.Uint32(s[lo.L4+4:])
			if wantSeq := binary.BigEndian.Uint32(in[lo.L4+4:]) + uint32(len(got)); seq != wantSeq {
				return fmt.Errorf("segment %d: seq %d, want %d", i, seq, wantSeq)
			}
			f, f0 := s[lo.L4+13], in[lo.L4+13]
			wantF := f0 &^ (tcpFIN | tcpPSH | tcpCWR)
			if i == 0 {
				wantF |= f0 & tcpCWR
			}
			if i == len(segs)-1 {
				wantF |= f0 & (tcpFIN | tcpPSH)
			}
			if f != wantF {
				return fmt.Errorf("segment %d: flags %#x, want %#x", i, f, wantF)
			}
		}
		got = append(got, s[lo.Payload:]...)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("payloads do not reassemble to the input (%d vs %d bytes)", len(got), len(payload))
	}
	return nil
}
