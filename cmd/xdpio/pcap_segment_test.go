package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/xdpio/xdpio/offload"
)

// segTestFrames returns the frames of the test capture: an IPv4 TCP
// super-packet with a VLAN tag, an IPv6 one, a small TCP segment, an ARP
// request, a big UDP datagram, and a TCP frame with a broken IHL.
func segTestFrames(t *testing.T) (frames [][]byte, names []string) {
	t.Helper()
	pay := func(n int) gopacket.Payload {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*13 + 5)
		}
		return p
	}
	ser := func(ls ...gopacket.SerializableLayer) []byte {
		for _, l := range ls {
			if c, ok := l.(interface {
				SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
			}); ok {
				for _, n := range ls {
					if nl, ok := n.(gopacket.NetworkLayer); ok {
						c.SetNetworkLayerForChecksum(nl)
					}
				}
			}
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	mac1, mac2 := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ip4 := func() *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Id: 9, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	}
	tcp := func() *layers.TCP {
		return &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: 7, ACK: true, PSH: true, Window: 512,
			Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}}
	}
	add := func(name string, f []byte) {
		frames = append(frames, f)
		names = append(names, name)
	}
	add("tcp4 vlan super", ser(&layers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4}, ip4(), tcp(), pay(20000)))
	add("tcp6 super", ser(&layers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: layers.EthernetTypeIPv6},
		&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}, tcp(), pay(64000)))
	add("tcp4 small", ser(&layers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: layers.EthernetTypeIPv4}, ip4(), tcp(), pay(100)))
	add("arp", ser(&layers.Ethernet{SrcMAC: mac1, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
			SourceHwAddress: mac1, SourceProtAddress: []byte{198, 18, 0, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{198, 18, 0, 2}}))
	u := ip4()
	u.Protocol = layers.IPProtocolUDP
	add("udp4 super", ser(&layers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: layers.EthernetTypeIPv4}, u, &layers.UDP{SrcPort: 4000, DstPort: 5000}, pay(5000)))
	bad := append([]byte(nil), frames[2]...)
	bad[14] = 0x44 // IHL 4
	add("tcp4 bad IHL", bad)
	return frames, names
}

func segWriteCapture(t *testing.T, path string, ng bool, frames [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := time.Unix(1700000000, 0)
	if ng {
		w, err := pcapgo.NewNgWriter(f, layers.LinkTypeEthernet)
		if err != nil {
			t.Fatal(err)
		}
		for i, fr := range frames {
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
}

// segReadCapture reads every packet of a pcap or pcapng file with pcapgo
// (not with the command's own reader) and reports the format.
func segReadCapture(t *testing.T, path string) (frames [][]byte, cis []gopacket.CaptureInfo, ng bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	if bytes.HasPrefix(b, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng = true
		r, err = pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
	} else {
		r, err = pcapgo.NewReader(bytes.NewReader(b))
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		d, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, d)
		cis = append(cis, ci)
	}
}

func segRun(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	err := runWith(context.Background(), g, args)
	return out.String(), errb.String(), err
}

func TestPcapSegment(t *testing.T) {
	frames, names := segTestFrames(t)
	for _, c := range []struct {
		name   string
		inNG   bool
		format string
		udp    bool
	}{
		{"pcap", false, "", false},
		{"pcapng", true, "", true},
		{"pcap to pcapng", false, "pcapng", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
			segWriteCapture(t, in, c.inNG, frames)
			args := []string{"pcap", "segment", "--mss", "1448", in, out}
			if c.format != "" {
				args = append(args, "--format", c.format)
			}
			if c.udp {
				args = append(args, "--udp")
			}
			stdout, stderr, err := segRun(t, args...)
			if err != nil {
				t.Fatalf("xdpio %s: %v (stderr %q)", strings.Join(args, " "), err, stderr)
			}
			if !strings.Contains(stderr, "packet 6 written unchanged") {
				t.Errorf("stderr does not name the malformed packet: %q", stderr)
			}
			got, cis, ng := segReadCapture(t, out)
			if wantNG := c.inNG || c.format == "pcapng"; ng != wantNG {
				t.Errorf("output is pcapng: %v, want %v", ng, wantNG)
			}
			// Expected output: every frame, split where it should be,
			// by the library the command wraps.
			var want [][]byte
			var wantTS []time.Time
			for i, f := range frames {
				var segs [][]byte
				var err error
				switch names[i] {
				case "tcp4 vlan super", "tcp6 super":
					segs, err = offload.Segment(nil, f, offload.SegmentOptions{MSS: 1448})
				case "udp4 super":
					if c.udp {
						segs, err = offload.SegmentUDP(nil, f, offload.SegmentOptions{MSS: 1448})
					} else {
						segs = [][]byte{f}
					}
				default:
					segs = [][]byte{f}
				}
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, segs...)
				for range segs {
					wantTS = append(wantTS, time.Unix(1700000000, 0).Add(time.Duration(i)*time.Millisecond))
				}
			}
			if len(got) != len(want) {
				t.Fatalf("output has %d packets, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("output packet %d differs", i)
				}
				if !cis[i].Timestamp.Equal(wantTS[i]) || cis[i].Length != len(want[i]) {
					t.Errorf("output packet %d: timestamp %v length %d, want %v %d", i, cis[i].Timestamp, cis[i].Length, wantTS[i], len(want[i]))
				}
				// gopacket must decode and verify what was written.
				p := gopacket.NewPacket(got[i], layers.LayerTypeEthernet, gopacket.Default)
				if tl, ok := p.TransportLayer().(*layers.TCP); ok && p.ErrorLayer() == nil {
					tl.SetNetworkLayerForChecksum(p.NetworkLayer())
					if len(tl.Payload) > 1448 {
						t.Errorf("output packet %d has %d TCP payload bytes", i, len(tl.Payload))
					}
					if err, mism := p.VerifyChecksums(); err != nil || len(mism) > 0 {
						t.Errorf("output packet %d: gopacket checksum verification: %v %v", i, err, mism)
					}
				}
			}
			wantLine := "6 packets read: 2 TCP and 0 UDP super-packets split into 59 segments, 3 unchanged, 1 not splittable (1 malformed, 0 truncated, 0 not Ethernet); 63 packets written"
			if c.udp {
				wantLine = "6 packets read: 2 TCP and 1 UDP super-packets split into 63 segments, 2 unchanged, 1 not splittable (1 malformed, 0 truncated, 0 not Ethernet); 66 packets written"
			}
			if !strings.HasPrefix(stdout, wantLine) {
				t.Errorf("summary %q, want prefix %q", stdout, wantLine)
			}
		})
	}
}

func TestPcapSegmentJSONAndErrors(t *testing.T) {
	frames, _ := segTestFrames(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	segWriteCapture(t, in, false, frames)
	stdout, _, err := segRun(t, "--json", "pcap", "segment", "--mss", "1000", in, out)
	if err != nil {
		t.Fatal(err)
	}
	var sum segmentSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("JSON output %q: %v", stdout, err)
	}
	n1, _, _ := offload.SegmentCount(frames[0], offload.SegmentOptions{MSS: 1000})
	n2, _, _ := offload.SegmentCount(frames[1], offload.SegmentOptions{MSS: 1000})
	want := segmentSummary{Packets: 6, TCPSplit: 2, Unchanged: 3, Malformed: 1, Segments: n1 + n2, Written: n1 + n2 + 4}
	if sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	for _, c := range []struct {
		args  []string
		usage bool
	}{
		{[]string{"pcap", "segment", in, out}, true},                   // no --mss
		{[]string{"pcap", "segment", "--mss", "0", in, out}, true},     // bad --mss
		{[]string{"pcap", "segment", "--mss", "70000", in, out}, true}, // bad --mss
		{[]string{"pcap", "segment", "--mss", "1448", in}, true},       // missing OUT
		{[]string{"pcap", "segment", "--mss", "1448", in, in}, true},   // output is the input
		{[]string{"pcap", "segment", "--mss", "1448", "--format", "x", in, out}, true},
		{[]string{"pcap", "segment", "--mss", "1448", filepath.Join(dir, "missing"), out}, false},
	} {
		_, _, err := segRun(t, c.args...)
		var ue *usageError
		if err == nil || errors.As(err, &ue) != c.usage {
			t.Errorf("xdpio %s: err %v, usage error %v, want usage %v", strings.Join(c.args, " "), err, errors.As(err, &ue), c.usage)
		}
	}
	// A super-packet the snap length cut is written unchanged and counted.
	trunc := filepath.Join(dir, "trunc.pcap")
	tf, err := os.Create(trunc)
	if err != nil {
		t.Fatal(err)
	}
	tw := pcapgo.NewWriter(tf)
	tw.WriteFileHeader(200, layers.LinkTypeEthernet)
	tw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(5, 0), CaptureLength: 200, Length: len(frames[0])}, frames[0][:200])
	tf.Close()
	stdout, _, err = segRun(t, "--json", "pcap", "segment", "--mss", "1000", trunc, out)
	if err != nil {
		t.Fatal(err)
	}
	sum = segmentSummary{}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if want := (segmentSummary{Packets: 1, Truncated: 1, Written: 1}); sum != want {
		t.Errorf("truncated capture: summary %+v, want %+v", sum, want)
	}
	if got, _, _ := segReadCapture(t, out); len(got) != 1 || !bytes.Equal(got[0], frames[0][:200]) {
		t.Errorf("truncated packet not written unchanged")
	}
	// A capture that is not a capture.
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("this is not a capture file at all"), 0o644)
	if _, _, err := segRun(t, "pcap", "segment", "--mss", "1448", junk, out); err == nil {
		t.Error("junk input accepted")
	}
}
