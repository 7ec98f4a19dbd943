package trafficgen

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func testSpec(size int) FrameSpec {
	return FrameSpec{
		SrcMAC:  net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
		DstMAC:  net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
		Src:     netip.MustParseAddr("198.18.0.1"),
		Dst:     netip.MustParseAddr("198.18.0.2"),
		SrcPort: 40000,
		DstPort: 9,
		Size:    size,
	}
}

// reserialize decodes f with gopacket and serializes it again with
// gopacket computing lengths and checksums: the oracle for our bytes.
func reserialize(t *testing.T, f []byte) []byte {
	t.Helper()
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket cannot decode the frame: %v", el.Error())
	}
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, gopacket.Payload(udp.Payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBuildFrameMatchesGopacket(t *testing.T) {
	for _, size := range []int{60, 64, 65, 1514, 3000} {
		f, err := BuildFrame(testSpec(size))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if len(f) != size {
			t.Fatalf("size %d: frame is %d bytes", size, len(f))
		}
		if want := reserialize(t, f); !bytes.Equal(f, want) {
			t.Errorf("size %d: frame differs from gopacket's serialization\n got %x\nwant %x", size, f, want)
		}
		// Every flow rewrite keeps the checksums valid.
		for _, i := range []int{1, 2, 63, 1023} {
			g := append([]byte(nil), f...)
			Flow(g, 40000, i)
			if want := reserialize(t, g); !bytes.Equal(g, want) {
				t.Errorf("size %d flow %d: checksum no longer valid\n got %x\nwant %x", size, i, g, want)
			}
		}
	}
}

func TestBuildFrameRejectsBadSpecs(t *testing.T) {
	bad := map[string]func(*FrameSpec){
		"short":     func(s *FrameSpec) { s.Size = 59 },
		"long":      func(s *FrameSpec) { s.Size = 3001 },
		"ipv6":      func(s *FrameSpec) { s.Src = netip.MustParseAddr("2001:db8::1") },
		"mac":       func(s *FrameSpec) { s.DstMAC = nil },
		"no port":   func(s *FrameSpec) { s.DstPort = 0 },
		"no source": func(s *FrameSpec) { s.SrcPort = 0 },
	}
	for name, mod := range bad {
		s := testSpec(64)
		mod(&s)
		if _, err := BuildFrame(s); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}
