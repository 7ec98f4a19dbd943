package trafficgen_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/internal/trafficgen"
)

// The template frame the generator sends, and flow 3 of it: only the UDP
// source port and the first payload word differ, and the UDP checksum
// stays valid.
func ExampleBuildFrame() {
	f, err := trafficgen.BuildFrame(trafficgen.FrameSpec{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 40000, DstPort: 9, Size: 64,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	udp := f[34:]
	fmt.Println(len(f), binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[2:]), binary.BigEndian.Uint16(udp[4:]))
	csum := binary.BigEndian.Uint16(udp[6:])
	trafficgen.Flow(f, 40000, 3)
	fmt.Println(binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[6:]) == csum)
	// Output:
	// 64 40000 9 30
	// 40003 true
}
