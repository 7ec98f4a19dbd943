package offload_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/offload"
)

// udpFrame builds an Ethernet + IPv4 + UDP frame with a 5-byte payload and
// no checksums filled in.
func udpFrame() []byte {
	f := make([]byte, offload.EthernetLen+offload.IPv4MinLen+offload.UDPLen+5)
	offload.Ethernet(f).SetType(offload.EtherTypeIPv4)
	ip := offload.IPv4(f[offload.EthernetLen:])
	ip[0] = 0x45 // version 4, IHL 5
	ip.SetTotalLength(uint16(len(ip)))
	ip[8], ip[9] = 64, offload.ProtoUDP // TTL, protocol
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	udp := offload.UDP(ip[offload.IPv4MinLen:])
	binary.BigEndian.PutUint16(udp[0:], 5353)
	binary.BigEndian.PutUint16(udp[2:], 9)
	udp.SetLength(uint16(len(udp)))
	copy(udp[offload.UDPLen:], "hello")
	return f
}

func ExampleChecksum() {
	// The example of RFC 1071 section 3.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	fmt.Printf("sum %#04x, checksum field %#04x\n", offload.Checksum(b, 0), ^offload.Checksum(b, 0))
	// Output: sum 0xddf2, checksum field 0x220d
}

func ExampleVerifyRX() {
	f := udpFrame()
	fmt.Println(offload.VerifyRX(f))

	filled, err := offload.FillChecksum(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("filled", filled)
	fmt.Println(offload.VerifyRX(f))

	f[len(f)-1] ^= 1 // flip a payload bit
	fmt.Println(offload.VerifyRX(f))

	fmt.Println(offload.VerifyRX(f[:30])) // cut inside the IPv4 header
	// Output:
	// ipv4 bad, udp none (UDP checksum 0 (none))
	// filled ipv4+l4
	// ipv4 ok, udp ok
	// ipv4 ok, udp bad
	// malformed (IP header beyond end of frame)
}

func ExampleVerifyRXComplete() {
	f := udpFrame()
	if _, err := offload.FillChecksum(f); err != nil {
		fmt.Println(err)
		return
	}
	// A NIC reporting CHECKSUM_COMPLETE hands over the sum of everything
	// after the Ethernet header; here it is computed to stand in for one.
	sum := offload.Checksum(f[offload.EthernetLen:], 0)
	r := offload.VerifyRXComplete(f, sum)
	fmt.Println(r, r.L4Verified())
	// Output: ipv4 ok, udp ok true
}

func ExamplePreparePartial() {
	f := udpFrame()
	// What the kernel does before handing the frame to a device with
	// checksum offload, and the offsets for xsk_tx_metadata.
	start, offset, err := offload.PreparePartial(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("csum_start", start, "csum_offset", offset)
	// What the device does (here: in software).
	if err := offload.FillPartial(f, start, offset); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(offload.VerifyRX(f))
	// Output:
	// csum_start 34 csum_offset 6
	// ipv4 ok, udp ok
}

func ExampleParse() {
	h := offload.Headers{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddrPort("[2001:db8::1]:5353"), Dst: netip.MustParseAddrPort("[2001:db8::2]:53"),
	}
	frame := make([]byte, 128)
	n, err := h.BuildUDP(frame, 0, []byte("hello"))
	if err != nil {
		panic(err)
	}
	lo, r := offload.Parse(frame[:n])
	if r != offload.ReasonNone {
		panic(r)
	}
	udp := offload.UDP(frame[lo.L4:])
	fmt.Printf("IPv6 %v, L3 at %d, UDP at %d, port %d→%d, payload %q\n",
		lo.IPv6, lo.L3, lo.L4, udp.SrcPort(), udp.DstPort(), frame[lo.Payload:lo.End])

	_, r = offload.Parse(frame[:30])
	fmt.Println(r, r.Malformed())
	// Output:
	// IPv6 true, L3 at 14, UDP at 54, port 5353→53, payload "hello"
	// IP header beyond end of frame true
}

func ExampleHeaders_BuildUDP() {
	h := offload.Headers{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddrPort("198.18.0.1:5353"), Dst: netip.MustParseAddrPort("198.18.0.2:53"),
	}
	frame := make([]byte, 2048) // a UMEM frame, say
	n, err := h.BuildUDP(frame, 1, []byte("hello"))
	if err != nil {
		panic(err)
	}
	fmt.Println(n, h.Len(offload.ProtoUDP), offload.VerifyRX(frame[:n]))
	// Output: 47 42 ipv4 ok, udp ok
}
