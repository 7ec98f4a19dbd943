package offload

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestSegmentTshark writes the output of Segment, SegmentUDP and GRO to a
// pcap and has tshark, with checksum validation on, judge every IPv4
// header and TCP/UDP checksum: all must be good.
func TestSegmentTshark(t *testing.T) {
	netnstest.RequireTool(t, "tshark")
	var frames [][]byte
	for _, s := range []superSpec{
		{tsopt: true, flags: tcpACK | tcpPSH | tcpCWR, payload: 20000, id: 65530},
		{v6: true, ext: true, vlans: 1, tsopt: true, flags: tcpACK | tcpFIN, payload: 9001},
		{vlans: 2, ipOpts: true, flags: tcpACK, payload: 5000, badCsums: true},
		{udp: true, payload: 7000},
		{udp: true, v6: true, vlans: 1, payload: 7001},
	} {
		in := buildSuper(t, s)
		var segs [][]byte
		var err error
		if s.udp {
			segs, err = SegmentUDP(nil, in, SegmentOptions{MSS: 1000})
		} else {
			segs, err = Segment(nil, in, SegmentOptions{MSS: 1000})
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, segs...)
		if !s.udp && !s.ipOpts {
			g, err := NewGRO(GROOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out [][]byte
			for _, x := range segs {
				out = g.Feed(out, x)
			}
			frames = append(frames, g.Flush(out)...)
		}
	}
	path := filepath.Join(t.TempDir(), "segments.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	l3, l4 := tsharkStatus(t, path)
	if len(l3) != len(frames) {
		t.Fatalf("tshark read %d frames, wrote %d", len(l3), len(frames))
	}
	v4 := 0
	for i := range frames {
		if l4[i] != "1" {
			t.Errorf("frame %d: tshark transport checksum status %q, want good (1)", i, l4[i])
		}
		if l3[i] != "" { // IPv4 (tshark leaves it empty for IPv6)
			v4++
			if l3[i] != "1" {
				t.Errorf("frame %d: tshark IPv4 checksum status %q, want good (1)", i, l3[i])
			}
		}
	}
	if v4 == 0 {
		t.Error("tshark judged no IPv4 header checksum")
	}
	t.Logf("tshark: %d frames, all transport checksums good, %d IPv4 header checksums good", len(frames), v4)
}
