package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// pcapFrame is one packet of a test capture.
type pcapFrame struct {
	data   []byte
	length int // original length (> len(data): truncated by snap length)
}

// gpFrame serializes layers with gopacket, checksums computed by gopacket.
func gpFrame(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	for _, l := range ls {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			for _, n := range ls {
				if nl, ok := n.(gopacket.NetworkLayer); ok {
					if err := c.SetNetworkLayerForChecksum(nl); err != nil {
						t.Fatal(err)
					}
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

var (
	testMAC1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	testMAC2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func tcp4Frame(t *testing.T, payload string) []byte {
	eth := &layers.Ethernet{SrcMAC: testMAC1, DstMAC: testMAC2, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: 1, ACK: true, PSH: true, Window: 512}
	return gpFrame(t, eth, ip, tcp, gopacket.Payload(payload))
}

func udp6Frame(t *testing.T, payload string) []byte {
	eth := &layers.Ethernet{SrcMAC: testMAC1, DstMAC: testMAC2, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	udp := &layers.UDP{SrcPort: 5353, DstPort: 9}
	return gpFrame(t, eth, ip, udp, gopacket.Payload(payload))
}

func icmp4Frame(t *testing.T) []byte {
	eth := &layers.Ethernet{SrcMAC: testMAC1, DstMAC: testMAC2, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 1}
	return gpFrame(t, eth, ip, icmp, gopacket.Payload("ping"))
}

func arpFrame(t *testing.T) []byte {
	eth := &layers.Ethernet{SrcMAC: testMAC1, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: testMAC1, SourceProtAddress: []byte{198, 18, 0, 1},
		DstHwAddress: make([]byte, 6), DstProtAddress: []byte{198, 18, 0, 2}}
	return gpFrame(t, eth, arp)
}

// testEpoch is the timestamp of the first frame of a test capture.
var testEpoch = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// writeTestCapture writes frames as a pcap or pcapng file.
func writeTestCapture(t *testing.T, path, format string, frames []pcapFrame) {
	t.Helper()
	writeTestCaptureLink(t, path, format, layers.LinkTypeEthernet, frames)
}

// writeTestCaptureLink writes frames of link type lt.
func writeTestCaptureLink(t *testing.T, path, format string, lt layers.LinkType, frames []pcapFrame) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var write func(gopacket.CaptureInfo, []byte) error
	var flush func() error
	if format == formatPcapng {
		w, err := pcapgo.NewNgWriter(f, lt)
		if err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, w.Flush
	} else {
		w := pcapgo.NewWriter(f)
		if err := w.WriteFileHeader(65535, lt); err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, func() error { return nil }
	}
	for i, fr := range frames {
		n := fr.length
		if n == 0 {
			n = len(fr.data)
		}
		ci := gopacket.CaptureInfo{Timestamp: inTimestamp(i), CaptureLength: len(fr.data), Length: n}
		if err := write(ci, fr.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs the command in-process and returns stdout, stderr and error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runWith(ctx, g, args)
	return out.String(), errb.String(), err
}

// mixedCapture returns one frame of every status.
func mixedCapture(t *testing.T) ([]pcapFrame, map[string]int) {
	good := tcp4Frame(t, "hello, world")
	bad := tcp4Frame(t, "corrupted payload")
	bad[len(bad)-1] ^= 0x20
	malformed := tcp4Frame(t, "x")[:30] // cut inside the IPv4 header
	frag := tcp4Frame(t, "first fragment")
	frag[14+6] |= 0x20 // MF
	fixIPv4Checksum(frag)
	truncated := udp6Frame(t, strings.Repeat("z", 200))
	frames := []pcapFrame{
		{data: good},
		{data: udp6Frame(t, "v6 datagram")},
		{data: icmp4Frame(t)},
		{data: bad},
		{data: malformed},
		{data: frag},
		{data: arpFrame(t)},
		{data: truncated[:100], length: len(truncated)},
	}
	want := map[string]int{"frames": 8, "ok": 3, "bad": 1, "malformed": 1, "l4_skipped": 1, "no_l4_checksum": 0, "not_ip": 1, "truncated": 1, "unsupported_link": 0}
	return frames, want
}

// fixIPv4Checksum recomputes the IPv4 header checksum of an untagged
// frame with a plain loop (independent of package offload).
func fixIPv4Checksum(f []byte) {
	h := f[14 : 14+int(f[14]&0xf)*4]
	h[10], h[11] = 0, 0
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	h[10], h[11] = byte(^s>>8), byte(^s)
}

func TestPcapVerify(t *testing.T) {
	for _, format := range []string{formatPcap, formatPcapng} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in."+format)
			frames, want := mixedCapture(t)
			writeTestCapture(t, in, format, frames)

			out, _, err := runCLI(t, "pcap", "verify", in)
			if !errors.Is(err, errVerifyFailed) {
				t.Fatalf("pcap verify: err = %v, want errVerifyFailed\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != len(frames)+1 {
				t.Fatalf("got %d lines, want one per frame and a summary:\n%s", len(lines), out)
			}
			for i, w := range []string{"ipv4 ok, tcp ok", "ipv6, udp ok", "ipv4 ok, icmp ok", "ipv4 ok, tcp bad", "malformed", "ipv4 ok, tcp skipped (fragment)", "not ip (ethertype 0x806)", "truncated"} {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], w)
				}
			}
			if !strings.Contains(lines[len(lines)-1], "8 frames: 3 ok, 1 bad, 1 malformed") {
				t.Errorf("summary = %q", lines[len(lines)-1])
			}

			out, _, err = runCLI(t, "--json", "pcap", "verify", in)
			if !errors.Is(err, errVerifyFailed) {
				t.Fatalf("pcap verify --json: err = %v", err)
			}
			var doc struct {
				Format  string            `json:"format"`
				Frames  []verifyFrameJSON `json:"frames"`
				Summary map[string]int    `json:"summary"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out)
			}
			if doc.Format != format || len(doc.Frames) != len(frames) {
				t.Fatalf("format %q, %d frames", doc.Format, len(doc.Frames))
			}
			for k, v := range want {
				if doc.Summary[k] != v {
					t.Errorf("summary[%s] = %d, want %d", k, doc.Summary[k], v)
				}
			}
			if f := doc.Frames[3]; f.Status != "bad" || f.L4 != "bad" || f.Proto == nil || *f.Proto != 6 || f.EtherType != "0x0800" {
				t.Errorf("frame 4 = %+v", f)
			}

			out, _, err = runCLI(t, "pcap", "verify", "-q", in)
			if !errors.Is(err, errVerifyFailed) || strings.Count(out, "\n") != 3 {
				t.Errorf("pcap verify -q: err %v, output:\n%s", err, out)
			}
		})
	}
}

func TestPcapVerifyAllGood(t *testing.T) {
	in := filepath.Join(t.TempDir(), "good.pcap")
	writeTestCapture(t, in, formatPcap, []pcapFrame{{data: tcp4Frame(t, "a")}, {data: udp6Frame(t, "b")}, {data: arpFrame(t)}})
	out, _, err := runCLI(t, "pcap", "verify", in)
	if err != nil {
		t.Fatalf("pcap verify on good frames: %v\n%s", err, out)
	}
}

func TestPcapVerifyErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runCLI(t, "pcap", "verify", filepath.Join(dir, "missing.pcap")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	junk := filepath.Join(dir, "junk.pcap")
	os.WriteFile(junk, []byte("this is not a capture file"), 0o644)
	if _, _, err := runCLI(t, "pcap", "verify", junk); err == nil || !strings.Contains(err.Error(), "not a pcap or pcapng file") {
		t.Errorf("junk file: %v, want it called no capture", err)
	}
	// Cut short in its header, and inside its last packet: both say the
	// file is truncated, not "unexpected EOF".
	frames, _ := mixedCapture(t)
	for _, format := range []string{"pcap", "pcapng"} {
		whole := filepath.Join(dir, "whole."+format)
		writeTestCapture(t, whole, format, frames)
		b, err := os.ReadFile(whole)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{10, len(b) - 5} {
			cut := filepath.Join(dir, "cut."+format)
			os.WriteFile(cut, b[:n], 0o644)
			_, _, err := runCLI(t, "pcap", "verify", cut)
			if err == nil || !strings.Contains(err.Error(), "truncated") || strings.Contains(err.Error(), "unexpected EOF") {
				t.Errorf("%s cut to %d of %d bytes: %v, want it called truncated", format, n, len(b), err)
			}
		}
	}
	var ue *usageError
	if _, _, err := runCLI(t, "pcap", "verify"); !errors.As(err, &ue) {
		t.Errorf("no argument: %v, want a usage error", err)
	}
}

// A frame captured with its transport checksum still partial (as every
// TCP frame on a veth) is bad, and its verdict and the summary say why
// and what to do; a frame with a plainly wrong checksum is not called
// partial.
func TestPcapVerifyPartialChecksum(t *testing.T) {
	partial := tcp4Frame(t, "sent through veth")
	if _, _, err := offload.PreparePartial(partial); err != nil {
		t.Fatal(err)
	}
	wrong := tcp4Frame(t, "corrupted payload")
	wrong[len(wrong)-1] ^= 0x20
	path := filepath.Join(t.TempDir(), "veth.pcap")
	writeTestCapture(t, path, "pcap", []pcapFrame{{data: partial}, {data: wrong}})
	out, _, err := runCLI(t, "pcap", "verify", path)
	if err == nil || !strings.Contains(err.Error(), "1 with a partial checksum") {
		t.Errorf("error %v: want the partial checksum counted", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "partial checksum") || !strings.Contains(lines[0], "xdpio pcap checksum") ||
		strings.Contains(lines[1], "partial") || !strings.Contains(lines[3], "1 of the bad frames carry a partial checksum") {
		t.Errorf("pcap verify:\n%s", out)
	}
	out, _, _ = runCLI(t, "--json", "pcap", "verify", path)
	var v struct {
		Frames []struct {
			Status  string `json:"status"`
			Partial bool   `json:"partial_checksum"`
		} `json:"frames"`
		Summary struct {
			Partial int `json:"partial_checksum"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Frames) != 2 || v.Frames[0].Status != "bad" || !v.Frames[0].Partial || v.Frames[1].Partial || v.Summary.Partial != 1 {
		t.Errorf("--json: %v %+v\n%s", err, v, out)
	}
}
