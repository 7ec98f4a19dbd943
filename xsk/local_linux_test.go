//go:build linux

package xsk

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// frameTo builds a minimal Ethernet + IP + UDP frame to dstMAC/dst:port
// (headers only as far as the program reads them; checksums are not its
// business).
func frameTo(dstMAC net.HardwareAddr, dst netip.Addr, port uint16) []byte {
	f := append([]byte(nil), dstMAC...)
	f = append(f, 0x02, 0, 0, 0, 0, 0x99)
	if dst.Is4() {
		f = binary.BigEndian.AppendUint16(f, 0x0800)
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], 28)
		copy(ip[12:], []byte{198, 18, 0, 1})
		d := dst.As4()
		copy(ip[16:], d[:])
		f = append(f, ip...)
	} else {
		f = binary.BigEndian.AppendUint16(f, 0x86dd)
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(ip[4:], 8)
		s := netip.MustParseAddr("2001:db8::1").As16()
		copy(ip[8:], s[:])
		d := dst.As16()
		copy(ip[24:], d[:])
		f = append(f, ip...)
	}
	udp := make([]byte, 8)
	binary.BigEndian.PutUint16(udp[0:], 5555)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], 8)
	return append(f, udp...)
}

// A rule with Local redirects only frames to the interface's MAC and one
// of its addresses, as the kernel's receive path would take them; the
// rest (other hosts, other MACs, broadcast, multicast, the unspecified
// address an empty slot holds) passes. Run in the kernel (BPF_PROG_RUN).
func TestLocalRule(t *testing.T) {
	netnstest.RequirePriv(t)
	mac := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 0x01}
	other := net.HardwareAddr{0x02, 0xbb, 0, 0, 0, 0x02}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	own4, own6, ll := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("fe80::aa:1")
	var many []netip.Addr
	for i := range LocalSlots {
		many = append(many, netip.AddrFrom4([4]byte{198, 19, 1, byte(i)}))
	}
	local := Local{MAC: mac, Addrs: append([]netip.Addr{own4, own6, ll, netip.MustParseAddr("::ffff:198.18.0.3")}, many[:LocalSlots-2]...)}
	cfg := ProgramConfig{Filter: []Rule{{Protocol: 17, DstPortMin: 9000, DstPortMax: 9000, Untagged: true, Local: true}}}
	for _, c := range []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"own IPv4", frameTo(mac, own4, 9000), true},
		{"own IPv6", frameTo(mac, own6, 9000), true},
		{"own link-local", frameTo(mac, ll, 9000), true},
		{"own IPv4 given mapped", frameTo(mac, netip.MustParseAddr("198.18.0.3"), 9000), true},
		{"last IPv4 slot", frameTo(mac, many[LocalSlots-3], 9000), true},
		{"beyond the slots", frameTo(mac, many[LocalSlots-1], 9000), false},
		{"other port", frameTo(mac, own4, 9001), false},
		{"other host's IPv4", frameTo(mac, netip.MustParseAddr("198.18.0.99"), 9000), false},
		{"other host's IPv6", frameTo(mac, netip.MustParseAddr("2001:db8::99"), 9000), false},
		{"other MAC", frameTo(other, own4, 9000), false},
		{"other MAC, IPv6", frameTo(other, own6, 9000), false},
		{"broadcast MAC", frameTo(bcast, own4, 9000), false},
		{"limited broadcast", frameTo(bcast, netip.MustParseAddr("255.255.255.255"), 9000), false},
		{"IPv4 multicast", frameTo(net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, netip.MustParseAddr("224.0.0.1"), 9000), false},
		{"IPv6 multicast", frameTo(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, netip.MustParseAddr("ff02::1"), 9000), false},
		{"0.0.0.0 (an empty slot's value)", frameTo(mac, netip.IPv4Unspecified(), 9000), false},
		{":: (an empty slot's value)", frameTo(mac, netip.IPv6Unspecified(), 9000), false},
		{"short IPv6", frameTo(mac, own6, 9000)[:40], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := verdicts(cfg, &local, [][]byte{c.frame})
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != c.want {
				t.Errorf("redirected %v, want %v", got[0], c.want)
			}
		})
	}
	// Before SetLocal (and after a Local without a MAC) nothing matches.
	for i, l := range []*Local{nil, {Addrs: []netip.Addr{own4}}} {
		got, err := verdicts(cfg, l, [][]byte{frameTo(mac, own4, 9000), frameTo(net.HardwareAddr{0, 0, 0, 0, 0, 0}, own4, 9000)})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[false false]" {
			t.Errorf("case %d, empty set: %v, want nothing redirected", i, got)
		}
	}
}

// MaxFrame passes longer frames to the kernel; the frame's length is
// counted from its Ethernet header.
func TestMaxFrameVerdicts(t *testing.T) {
	netnstest.RequirePriv(t)
	f := frameTo(net.HardwareAddr{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("198.18.0.2"), 9000)
	long := append(f, make([]byte, 100)...)
	for _, c := range []struct {
		max  int
		want string
	}{
		{0, "[true true]"}, {-1, "[true true]"}, {len(f), "[true false]"}, {len(f) - 1, "[false false]"}, {len(long), "[true true]"},
	} {
		got, err := Verdicts(ProgramConfig{Filter: []Rule{UDPPort(9000)}, MaxFrame: c.max}, [][]byte{f, long})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("MaxFrame %d: %v, want %s", c.max, got, c.want)
		}
	}
}

// Filter rules and an expression together: a frame is redirected when it
// matches a rule and the expression (the expression narrows, as a source
// allow or deny list does); the rest passes to the kernel.
func TestFilterAndExpr(t *testing.T) {
	netnstest.RequirePriv(t)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	from := func(src string, port uint16) []byte {
		f := frameTo(mac, netip.MustParseAddr("198.18.0.2"), port)
		copy(f[14+12:], netip.MustParseAddr(src).AsSlice())
		return f
	}
	frames := [][]byte{from("198.18.0.1", 9000), from("198.18.0.66", 9000), from("198.18.0.1", 9001), from("203.0.113.5", 9000)}
	for _, c := range []struct {
		expr string
		want string
	}{
		{"", "[true true false true]"},
		{"not src host 198.18.0.66", "[true false false true]"},
		{"src net 198.18.0.0/15", "[true true false false]"},
	} {
		got, err := Verdicts(ProgramConfig{Filter: []Rule{UDPPort(9000)}, Expr: c.expr}, frames)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("Expr %q: %v, want %s", c.expr, got, c.want)
		}
	}
}
