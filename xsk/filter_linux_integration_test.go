//go:build linux

package xsk_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// A destination prefix takes only frames to addresses inside it: the
// other addresses of the host, on the same port, stay with the kernel.
func TestFilterDestinationPrefix(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	// A second address of each family on B, outside the /32 and /128 rules
	// but inside the /24 one.
	second4 := netip.AddrFrom4([4]byte(append(pair.B.IPv4.AsSlice()[:3:3], 77)))
	second6 := netip.MustParseAddr("2001:db8:ffff::77")
	for _, a := range []string{second4.String() + "/24", second6.String() + "/64"} {
		if out, err := pair.B.Command(context.Background(), "ip", "addr", "add", a, "dev", pair.B.Link, "nodad").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v %s", a, err, out)
		}
	}
	if out, err := pair.A.Command(context.Background(), "ip", "-6", "route", "add", "2001:db8:ffff::/64", "dev", pair.A.Link).CombinedOutput(); err != nil {
		t.Fatalf("route: %v %s", err, out)
	}
	// Static neighbours: B must not have to answer ND through the sockets.
	if out, err := pair.A.Command(context.Background(), "ip", "neigh", "replace", second6.String(), "lladdr", pair.B.MAC.String(), "dev", pair.A.Link, "nud", "permanent").CombinedOutput(); err != nil {
		t.Fatalf("neigh: %v %s", err, out)
	}
	if out, err := pair.A.Command(context.Background(), "ip", "neigh", "replace", second4.String(), "lladdr", pair.B.MAC.String(), "dev", pair.A.Link, "nud", "permanent").CombinedOutput(); err != nil {
		t.Fatalf("neigh: %v %s", err, out)
	}
	const port = 9150
	for _, tc := range []struct {
		name       string
		rule       netip.Prefix
		in, out    netip.Addr // to a socket, to the kernel
		listenAddr netip.Addr
	}{
		{"ipv4 /32", netip.PrefixFrom(pair.B.IPv4, 32), pair.B.IPv4, second4, netip.IPv4Unspecified()},
		{"ipv4-mapped /128", netip.PrefixFrom(netip.AddrFrom16(pair.B.IPv4.As16()), 128), pair.B.IPv4, second4, netip.IPv4Unspecified()},
		{"ipv6 /128", netip.PrefixFrom(pair.B.IPv6, 128), pair.B.IPv6, second6, netip.IPv6Unspecified()},
		{"ipv6 /64", netip.PrefixFrom(pair.B.IPv6, 64), pair.B.IPv6, second6, netip.IPv6Unspecified()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{
				{Protocol: 17, DstPortMin: port, DstPortMax: port, Dst: tc.rule},
			}}})
			kernel := listenUDP(t, pair.B, netip.AddrPortFrom(tc.listenAddr, port))
			done := make(chan *collector)
			go func() { done <- collect(t, d.Sockets(), port, 30, 5*time.Second) }()
			sendUDP(t, pair.A, netip.AddrPortFrom(tc.in, port), 1, 30, 64, 0)
			sendUDP(t, pair.A, netip.AddrPortFrom(tc.out, port), 1, 30, 64, 0)
			if c := <-done; c.frames != 30 {
				t.Errorf("to %v (inside %v): sockets got %v, want 30", tc.in, tc.rule, c)
			}
			if got := readAll(kernel, 30, 3*time.Second); len(got) != 30 {
				t.Errorf("to %v (outside %v): the kernel got %d of 30", tc.out, tc.rule, len(got))
			}
			d.Close()
			kernel.Close()
		})
	}
	// A /24 covers the second IPv4 address too.
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{
		{Protocol: 17, DstPortMin: port, DstPortMax: port, Dst: netip.PrefixFrom(pair.B.IPv4, 24)},
	}}})
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), port, 60, 5*time.Second) }()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 30, 64, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(second4, port), 1, 30, 64, 0)
	if c := <-done; c.frames != 60 {
		t.Errorf("/24: sockets got %v, want 60", c)
	}
}

// IPv4 fragments, the first one too, go to the kernel, which reassembles
// the datagram: a socket that got the first fragment could not.
func TestFilterPassesFragments(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	const port = 9151
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
	kernel := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port))
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), port, 1, time.Second) }()
	// 3000 bytes over a 1500-byte MTU: three fragments.
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 5, 3000, 0)
	got := readAll(kernel, 5, 3*time.Second)
	if len(got) != 5 {
		t.Errorf("the kernel reassembled %d of 5 fragmented datagrams", len(got))
	}
	for _, g := range got {
		if len(g) != 3000 {
			t.Errorf("reassembled datagram of %d bytes, want 3000", len(g))
		}
	}
	if c := <-done; c.frames != 0 {
		t.Errorf("sockets got %v of fragmented datagrams, want none", c)
	}
	st, _ := d.Sockets()[0].Stats()
	if st.RXFrames != 0 {
		t.Errorf("sockets received %d frames (fragments), want 0", st.RXFrames)
	}
}

// Untagged takes only frames without a VLAN tag; without it, a frame
// tagged with a VLAN matches too.
func TestFilterUntagged(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	const port = 9152
	plain := udpFrame(pair.A.MAC, pair.B.MAC, netip.AddrPortFrom(pair.A.IPv4, 40000), netip.AddrPortFrom(pair.B.IPv4, port), make([]byte, 18))
	tagged := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x00, 0x07), plain[12:]...)
	tx := openOn(t, pair.A, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
	send := func(frames ...[]byte) {
		t.Helper()
		transmitFrames(t, tx.Sockets()[0], frames, 2*time.Second)
	}
	for _, untagged := range []bool{true, false} {
		d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{
			{Protocol: 17, DstPortMin: port, DstPortMax: port, Untagged: untagged},
		}}})
		done := make(chan *rawCount)
		go func() { done <- countRaw(d.Sockets()[0], 300*time.Millisecond) }()
		send(plain, tagged, plain)
		c := <-done
		wantTagged := 0
		if !untagged {
			wantTagged = 1
		}
		if c.plain != 2 || c.tagged != wantTagged {
			t.Errorf("Untagged=%v: sockets got %d plain and %d tagged frames, want 2 and %d", untagged, c.plain, c.tagged, wantTagged)
		}
		d.Close()
	}
}

type rawCount struct{ plain, tagged int }

// countRaw counts frames by whether they carry an 802.1Q tag, until
// timeout.
func countRaw(s *xsk.Socket, timeout time.Duration) *rawCount {
	c := &rawCount{}
	b := s.NewBatch(16)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s.Receive(b) == 0 {
			s.Wait(10*time.Millisecond, false)
			continue
		}
		for i := 0; i < b.Len(); i++ {
			f := b.Frame(i)
			if len(f) >= 14 && binary.BigEndian.Uint16(f[12:]) == 0x8100 {
				c.tagged++
			} else {
				c.plain++
			}
		}
		s.Release(b)
	}
	return c
}
