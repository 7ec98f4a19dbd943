package labctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Addresses of the lab's link: the host side of the tap (the sender) and
// the guest's virtio-net NIC. The guest needs no address for the tests:
// frames are counted per RX queue or taken by AF_XDP before the stack.
var (
	PeerIP4  = netip.MustParseAddr("198.18.0.1")
	GuestIP4 = netip.MustParseAddr("198.18.0.2")
	PeerIP6  = netip.MustParseAddr("2001:db8:1ab::1")
	GuestIP6 = netip.MustParseAddr("2001:db8:1ab::2")
)

// GuestMAC is the MAC address test/lab/run gives the guest's virtio-net NIC.
const GuestMAC = "52:54:00:1a:b0:02"

// Protocol numbers of Flow.Proto.
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

// Flow is one flow the sender sends: addresses, ports and protocol (TCP
// frames are SYNs, UDP frames carry a payload naming the flow).
type Flow struct {
	Src   netip.Addr `json:"src"`
	Dst   netip.Addr `json:"dst"`
	SPort uint16     `json:"sport"`
	DPort uint16     `json:"dport"`
	Proto uint8      `json:"proto"`
}

// String formats the flow as "udp 198.18.0.1:1000 > 198.18.0.2:9000".
func (f Flow) String() string {
	p := fmt.Sprintf("proto%d", f.Proto)
	switch f.Proto {
	case ProtoTCP:
		p = "tcp"
	case ProtoUDP:
		p = "udp"
	}
	return fmt.Sprintf("%s %v > %v", p, netip.AddrPortFrom(f.Src, f.SPort), netip.AddrPortFrom(f.Dst, f.DPort))
}

// Request is one line the guest writes on the control port.
type Request struct {
	// ID is echoed in the Reply.
	ID uint64 `json:"id"`
	// Op is "ping" (reply only), "send", or "received": how many frames
	// from the guest's MAC address the sender has seen on the tap since
	// it started (Reply.Sent), for counting what the guest transmits.
	Op string `json:"op"`
	// Flows are sent in order, Count frames each (Count 0 means 1).
	Flows []Flow `json:"flows,omitempty"`
	Count int    `json:"count,omitempty"`
	// Gap is the pause between frames in nanoseconds: 0 keeps the
	// sender's default (-gap), negative sends back to back.
	Gap int64 `json:"gap,omitempty"`
}

// Reply is the sender's answer to a Request.
type Reply struct {
	ID    uint64 `json:"id"`
	Sent  int    `json:"sent"`
	Error string `json:"error,omitempty"`
}

// MaxFlows bounds the flows of one Request, MaxCount its Count: the
// sender refuses more, so a broken test cannot flood the link.
const (
	MaxFlows = 4096
	MaxCount = 64
)

// ErrFlow reports a flow the sender cannot build a frame for.
var ErrFlow = errors.New("invalid lab flow")

// Validate checks that f can be sent: both addresses of one family and
// inside the lab's ranges, TCP or UDP.
func (f Flow) Validate() error {
	lab4 := netip.MustParsePrefix("198.18.0.0/15")
	lab6 := netip.MustParsePrefix("2001:db8::/32")
	switch {
	case !f.Src.IsValid() || !f.Dst.IsValid():
		return fmt.Errorf("flow %v: both addresses are required: %w", f, ErrFlow)
	case f.Src.Is4() != f.Dst.Is4():
		return fmt.Errorf("flow %v: addresses of different families: %w", f, ErrFlow)
	case f.Src.Is4() && !(lab4.Contains(f.Src) && lab4.Contains(f.Dst)):
		return fmt.Errorf("flow %v: IPv4 addresses must be in %v: %w", f, lab4, ErrFlow)
	case !f.Src.Is4() && !(lab6.Contains(f.Src) && lab6.Contains(f.Dst)):
		return fmt.Errorf("flow %v: IPv6 addresses must be in %v: %w", f, lab6, ErrFlow)
	case f.Proto != ProtoTCP && f.Proto != ProtoUDP:
		return fmt.Errorf("flow %v: protocol %d: want TCP (6) or UDP (17): %w", f, f.Proto, ErrFlow)
	}
	return nil
}

// Frame returns the Ethernet frame number seq of flow f from src to dst
// MAC: a TCP SYN or a UDP datagram whose 16-byte payload carries seq and
// the ports, with valid IP, TCP and UDP checksums.
func Frame(f Flow, src, dst net.HardwareAddr, seq uint32) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if len(src) != 6 || len(dst) != 6 {
		return nil, fmt.Errorf("frame of %v: MAC addresses %v and %v must have 6 bytes: %w", f, src, dst, ErrFlow)
	}
	var l4 []byte
	switch f.Proto {
	case ProtoUDP:
		l4 = make([]byte, 8+16)
		binary.BigEndian.PutUint16(l4[0:], f.SPort)
		binary.BigEndian.PutUint16(l4[2:], f.DPort)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		copy(l4[8:], "xdpio-lab")
		binary.BigEndian.PutUint32(l4[20:], seq)
	case ProtoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], f.SPort)
		binary.BigEndian.PutUint16(l4[2:], f.DPort)
		binary.BigEndian.PutUint32(l4[4:], 0x10000000+seq) // sequence number
		l4[12] = 5 << 4                                    // data offset: 5 words
		l4[13] = 0x02                                      // SYN
		binary.BigEndian.PutUint16(l4[14:], 65535)         // window
	}
	b := make([]byte, 14, 14+40+len(l4))
	copy(b[0:], dst)
	copy(b[6:], src)
	s, d := f.Src.AsSlice(), f.Dst.AsSlice()
	// Pseudo-header sum for the L4 checksum.
	var pseudo uint32
	pseudo = sum(pseudo, s)
	pseudo = sum(pseudo, d)
	pseudo += uint32(f.Proto) + uint32(len(l4))
	csumOff := 16 // TCP
	if f.Proto == ProtoUDP {
		csumOff = 6
	}
	c := fold(sum(pseudo, l4))
	if c == 0 && f.Proto == ProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
	if f.Src.Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		binary.BigEndian.PutUint16(ip[4:], uint16(seq))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8] = 64
		ip[9] = f.Proto
		copy(ip[12:], s)
		copy(ip[16:], d)
		binary.BigEndian.PutUint16(ip[10:], fold(sum(0, ip)))
		b = append(b, ip...)
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = f.Proto
		ip[7] = 64
		copy(ip[8:], s)
		copy(ip[24:], d)
		b = append(b, ip...)
	}
	return append(b, l4...), nil
}

// sum adds b to the ones' complement sum acc as big-endian 16-bit words.
func sum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// fold folds a sum to 16 bits and complements it.
func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return ^uint16(acc)
}

// ParseFlow reads the flow of a frame Frame built (or any Ethernet
// IPv4/IPv6 TCP or UDP frame without extension headers or VLAN tags).
func ParseFlow(frame []byte) (Flow, error) {
	if len(frame) < 14 {
		return Flow{}, fmt.Errorf("parse flow: frame of %d bytes: %w", len(frame), ErrFlow)
	}
	var f Flow
	var l4 []byte
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		ip := frame[14:]
		if len(ip) < 20 || ip[0]>>4 != 4 || int(ip[0]&15)*4 < 20 || len(ip) < int(ip[0]&15)*4 {
			return Flow{}, fmt.Errorf("parse flow: short or bad IPv4 header: %w", ErrFlow)
		}
		f.Src = netip.AddrFrom4([4]byte(ip[12:16]))
		f.Dst = netip.AddrFrom4([4]byte(ip[16:20]))
		f.Proto = ip[9]
		l4 = ip[int(ip[0]&15)*4:]
	case 0x86dd:
		ip := frame[14:]
		if len(ip) < 40 {
			return Flow{}, fmt.Errorf("parse flow: short IPv6 header: %w", ErrFlow)
		}
		f.Src = netip.AddrFrom16([16]byte(ip[8:24]))
		f.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
		f.Proto = ip[6]
		l4 = ip[40:]
	default:
		return Flow{}, fmt.Errorf("parse flow: EtherType %#04x: %w", binary.BigEndian.Uint16(frame[12:]), ErrFlow)
	}
	if f.Proto != ProtoTCP && f.Proto != ProtoUDP {
		return Flow{}, fmt.Errorf("parse flow: IP protocol %d: %w", f.Proto, ErrFlow)
	}
	if len(l4) < 4 {
		return Flow{}, fmt.Errorf("parse flow: short L4 header: %w", ErrFlow)
	}
	f.SPort = binary.BigEndian.Uint16(l4[0:])
	f.DPort = binary.BigEndian.Uint16(l4[2:])
	return f, nil
}
