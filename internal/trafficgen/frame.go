package trafficgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Frame layout of the generated Ethernet/IPv4/UDP frames (no IP options).
const (
	ethLen       = 14
	ipv4Len      = 20
	udpLen       = 8
	offSrcPort   = ethLen + ipv4Len    // UDP source port
	offPad       = offSrcPort + udpLen // first two payload bytes: checksum compensation
	headerLen    = offPad              // Ethernet + IPv4 + UDP
	minFrameSize = 60                  // Ethernet minimum without FCS
	maxFrameSize = 3000                // live-frames mode fits one 4 KiB page
	maxFlows     = 1024                // source ports SrcPort..SrcPort+Flows-1
	padBase      = 0x4000              // payload word of flow 0; port+pad is the same integer for every flow
)

// ErrInvalidConfig is wrapped by errors about a Config field.
var ErrInvalidConfig = errors.New("invalid configuration")

// FrameSpec describes the template frame.
type FrameSpec struct {
	SrcMAC, DstMAC net.HardwareAddr
	// Src and Dst are IPv4 addresses.
	Src, Dst netip.Addr
	// SrcPort is the source port of flow 0; flow i uses SrcPort+i.
	SrcPort, DstPort uint16
	// Size is the frame length without FCS, 60 to 3000 bytes.
	Size int
}

func (s FrameSpec) validate(flows int) error {
	if len(s.SrcMAC) != 6 || len(s.DstMAC) != 6 {
		return fmt.Errorf("MAC addresses %v -> %v: want 6 bytes each: %w", s.SrcMAC, s.DstMAC, ErrInvalidConfig)
	}
	if !s.Src.Is4() || !s.Dst.Is4() {
		return fmt.Errorf("addresses %v -> %v: want IPv4: %w", s.Src, s.Dst, ErrInvalidConfig)
	}
	if s.Size < minFrameSize || s.Size > maxFrameSize {
		return fmt.Errorf("frame size %d: must be between %d and %d bytes: %w", s.Size, minFrameSize, maxFrameSize, ErrInvalidConfig)
	}
	if s.SrcPort == 0 || int(s.SrcPort)+flows-1 > 0xffff || s.DstPort == 0 {
		return fmt.Errorf("ports %d (+%d flows) -> %d: source ports must lie in 1..65535, destination non-zero: %w",
			s.SrcPort, flows, s.DstPort, ErrInvalidConfig)
	}
	return nil
}

// BuildFrame returns the template frame for flow 0: Ethernet, IPv4 (DF,
// TTL 64) and UDP with valid checksums, padded with a byte pattern to
// Size. Flow i is the same frame with source port SrcPort+i and payload
// word padBase-i, which leaves the UDP checksum unchanged (see Flow).
func BuildFrame(s FrameSpec) ([]byte, error) {
	if err := s.validate(1); err != nil {
		return nil, err
	}
	f := make([]byte, s.Size)
	copy(f[0:], s.DstMAC)
	copy(f[6:], s.SrcMAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[ethLen : ethLen+ipv4Len]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(s.Size-ethLen))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	src, dst := s.Src.As4(), s.Dst.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^sum(ip, 0))
	udp := f[offSrcPort:]
	ulen := s.Size - ethLen - ipv4Len
	binary.BigEndian.PutUint16(udp[0:], s.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], s.DstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(ulen))
	binary.BigEndian.PutUint16(udp[8:], padBase)
	for i := offPad + 2; i < s.Size; i++ {
		f[i] = byte(i)
	}
	var ph [12]byte
	copy(ph[0:], src[:])
	copy(ph[4:], dst[:])
	ph[9] = 17
	binary.BigEndian.PutUint16(ph[10:], uint16(ulen))
	c := ^sum(udp, uint32(sum(ph[:], 0)))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return f, nil
}

// Flow rewrites frame f (a BuildFrame result) in place into flow i, as the
// XDP program does: source port base+i and payload word padBase-i. The
// one's complement sum of the two words does not change, so neither does
// the UDP checksum.
func Flow(f []byte, base uint16, i int) {
	binary.BigEndian.PutUint16(f[offSrcPort:], base+uint16(i))
	binary.BigEndian.PutUint16(f[offPad:], padBase-uint16(i))
}

// sum is the RFC 1071 one's complement sum of b added to initial, folded
// to 16 bits, not complemented.
func sum(b []byte, initial uint32) uint16 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
