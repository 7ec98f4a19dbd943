package tcpplane

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/bench/iperf3"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdpio/xdpio/offload"
)

var (
	testMAC1 = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	testMAC2 = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

func testFlow(t testing.TB, v6 bool, isn uint32, mss int) *tcpTXFlow {
	t.Helper()
	src, dst := netip.MustParseAddrPort("198.18.0.1:20001"), netip.MustParseAddrPort("198.18.0.2:5202")
	if v6 {
		src, dst = netip.MustParseAddrPort("[2001:db8::1]:20001"), netip.MustParseAddrPort("[2001:db8::2]:5202")
	}
	f, err := newTCPTxFlow(testMAC1, testMAC2, src, dst, isn, mss)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// collect returns a next function handing out fresh buffers, and the
// frames written.
func collect(frames *[][]byte) func(int) []byte {
	return func(size int) []byte {
		b := make([]byte, size)
		*frames = append(*frames, b)
		return b
	}
}

// gopacketTCP decodes a frame with gopacket and recomputes its checksums
// with gopacket's serializer: an oracle independent of package offload.
func gopacketTCP(t *testing.T, f []byte) (tcp *layers.TCP, ipv4OK, tcpOK bool) {
	t.Helper()
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	tl, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		t.Fatalf("gopacket finds no TCP layer in %x", f)
	}
	var nl gopacket.NetworkLayer
	ipv4OK = true
	if ip4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		nl = ip4
		cp := *ip4
		buf := gopacket.NewSerializeBuffer()
		if err := cp.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
			t.Fatal(err)
		}
		ipv4OK = cp.Checksum == ip4.Checksum
	} else {
		nl = p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	}
	cp := *tl
	cp.SetNetworkLayerForChecksum(nl)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, &cp, gopacket.Payload(tl.Payload)); err != nil {
		t.Fatal(err)
	}
	return tl, ipv4OK, cp.Checksum == tl.Checksum
}

// Both ways of building a write produce the same frames, and gopacket
// finds them valid: checksums right, sequence numbers contiguous, MSS-sized
// segments, PSH on the last only, IPv4 IDs counting up.
func TestTCPWriteBuilders(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		mss := 1460
		if v6 {
			mss = 1440
		}
		for _, n := range []int{1, mss - 1, mss, mss + 1, 10*mss + 123, MaxWrite(v6, mss)} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i * 13)
			}
			const isn = 0xfffff000 // wraps within the larger writes
			var tso, each [][]byte
			ft, fe := testFlow(t, v6, isn, mss), testFlow(t, v6, isn, mss)
			ft.ipID, fe.ipID = 0xfffe, 0xfffe
			kt, err := ft.writeTSO(payload, collect(&tso))
			if err != nil {
				t.Fatal(err)
			}
			ke, err := fe.writeSegments(payload, collect(&each))
			if err != nil {
				t.Fatal(err)
			}
			want := (n + mss - 1) / mss
			if kt != want || ke != want || len(tso) != want || len(each) != want {
				t.Fatalf("v6=%v n=%d: %d and %d segments, want %d", v6, n, kt, ke, want)
			}
			if ft.seq != isn+uint32(n) || fe.seq != ft.seq || ft.ipID != fe.ipID {
				t.Errorf("v6=%v n=%d: next seq %#x/%#x id %d/%d", v6, n, ft.seq, fe.seq, ft.ipID, fe.ipID)
			}
			seq := uint32(isn)
			var got []byte
			for i := range tso {
				if !bytes.Equal(tso[i], each[i]) {
					t.Fatalf("v6=%v n=%d segment %d differs:\nTSO  %x\neach %x", v6, n, i, tso[i], each[i])
				}
				tcp, ip4ok, tcpok := gopacketTCP(t, tso[i])
				if !ip4ok || !tcpok {
					t.Errorf("v6=%v n=%d segment %d: gopacket: IPv4 checksum ok %v, TCP checksum ok %v", v6, n, i, ip4ok, tcpok)
				}
				wantLen := min(mss, n-i*mss)
				last := i == len(tso)-1
				if tcp.Seq != seq || len(tcp.Payload) != wantLen || tcp.PSH != last || !tcp.ACK || tcp.Ack != tcpAckNum || tcp.SYN || tcp.FIN {
					t.Errorf("v6=%v n=%d segment %d: seq %#x len %d PSH %v ACK %v, want seq %#x len %d PSH %v", v6, n, i, tcp.Seq, len(tcp.Payload), tcp.PSH, tcp.ACK, seq, wantLen, last)
				}
				if r := offload.VerifyRX(tso[i]); !r.OK() || !r.L4Verified() {
					t.Errorf("segment %d: VerifyRX %v", i, r)
				}
				seg, err := parseTCPSegment(tso[i])
				if err != nil || seg.seq != seq || seg.payload != wantLen {
					t.Errorf("segment %d: parse %+v %v", i, seg, err)
				}
				if !v6 {
					if id := uint16(0xfffe + i); uint16(tso[i][offload.EthernetLen+4])<<8|uint16(tso[i][offload.EthernetLen+5]) != id {
						t.Errorf("segment %d: IPv4 ID, want %d", i, id)
					}
				}
				got = append(got, tcp.Payload...)
				seq += uint32(wantLen)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("v6=%v n=%d: segments do not reassemble to the write", v6, n)
			}
			// The oracle notices a flipped bit.
			bad := append([]byte(nil), tso[0]...)
			bad[len(bad)-1] ^= 1
			if _, _, tcpok := gopacketTCP(t, bad); tcpok {
				t.Errorf("v6=%v n=%d: gopacket accepts a corrupted segment", v6, n)
			}
		}
	}
}

func TestTCPTxFlowErrors(t *testing.T) {
	a4, a6 := netip.MustParseAddrPort("198.18.0.1:1"), netip.MustParseAddrPort("[2001:db8::2]:2")
	if _, err := newTCPTxFlow(testMAC1, testMAC2, a4, a6, 0, 1460); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("mixed families: %v", err)
	}
	if _, err := newTCPTxFlow(testMAC1, testMAC2, a4, a4, 0, 10); !errors.Is(err, iperf3.ErrProtocol) {
		t.Errorf("MSS 10: %v", err)
	}
	if _, err := newTCPTxFlow(testMAC1[:3], testMAC2, a4, a4, 0, 1460); err == nil {
		t.Error("short MAC accepted")
	}
	f := testFlow(t, false, 0, 1460)
	if _, err := f.writeSegments(make([]byte, 3000), func(int) []byte { return nil }); !errors.Is(err, offload.ErrDestTooSmall) {
		t.Errorf("no buffers: %v", err)
	}
}

func TestTCPRxFlow(t *testing.T) {
	type seg struct {
		seq uint32
		n   int
	}
	for _, tc := range []struct {
		name string
		isn  uint32
		segs []seg
		want iperf3.TCPReceiverStream
	}{
		{"in order", 100, []seg{{100, 10}, {110, 10}, {120, 5}}, iperf3.TCPReceiverStream{Segments: 3, Bytes: 25, InOrderBytes: 25}},
		{"wraps", 0xfffffffa, []seg{{0xfffffffa, 10}, {4, 10}}, iperf3.TCPReceiverStream{Segments: 2, Bytes: 20, InOrderBytes: 20}},
		{"gap then on", 0, []seg{{0, 10}, {20, 10}, {30, 10}}, iperf3.TCPReceiverStream{Segments: 3, Bytes: 30, InOrderBytes: 20, OutOfOrder: 1, GapBytes: 10}},
		{"late fill and duplicate", 0, []seg{{0, 10}, {20, 10}, {10, 10}, {20, 10}}, iperf3.TCPReceiverStream{Segments: 2, Bytes: 20, InOrderBytes: 10, OutOfOrder: 1, GapBytes: 10, Late: 2}},
		{"first lost", 50, []seg{{60, 10}}, iperf3.TCPReceiverStream{Segments: 1, Bytes: 10, OutOfOrder: 1, GapBytes: 10}},
		{"pure ACK", 0, []seg{{0, 0}, {0, 5}}, iperf3.TCPReceiverStream{Segments: 2, Bytes: 5, InOrderBytes: 5}},
	} {
		f := tcpRXFlow{next: tc.isn}
		for _, s := range tc.segs {
			f.add(s.seq, s.n)
		}
		if f.TCPReceiverStream != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, f.TCPReceiverStream, tc.want)
		}
	}
}

func TestParseTCPSegmentRejects(t *testing.T) {
	var fr [][]byte
	testFlow(t, false, 1, 1460).writeSegments(make([]byte, 100), collect(&fr))
	good := fr[0]
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"short":        good[:10],
		"arp":          mut(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }),
		"udp":          mut(func(b []byte) []byte { b[14+9] = 17; return b }),
		"fragment":     mut(func(b []byte) []byte { b[14+6] |= 0x20; return b }),
		"ihl 4":        mut(func(b []byte) []byte { b[14] = 0x44; return b }),
		"total > len":  mut(func(b []byte) []byte { b[14+2] = 0xff; return b }),
		"doff 4":       mut(func(b []byte) []byte { b[34+12] = 0x40; return b }),
		"doff too big": mut(func(b []byte) []byte { b[34+12] = 0xf0; return b[:34+40] }),
	} {
		if _, err := parseTCPSegment(b); !errors.Is(err, errNotTCPSegment) {
			t.Errorf("%s: %v, want errNotTCPSegment", name, err)
		}
	}
	// Link padding after the IP packet is not payload.
	padded := append(append([]byte(nil), good...), make([]byte, 20)...)
	if s, err := parseTCPSegment(padded); err != nil || s.payload != 100 {
		t.Errorf("padded: %+v %v", s, err)
	}
}
