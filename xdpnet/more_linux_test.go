//go:build linux

package xdpnet_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/xdpio/xdpio/xsk"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
)

// recvTTLTOS reads one datagram from a kernel socket bound in h with
// IP_RECVTTL and IP_RECVTOS (IPV6_RECVHOPLIMIT and IPV6_RECVTCLASS) on,
// and returns the payload and what the kernel saw in the IP header.
func recvTTLTOS(t *testing.T, h *netnstest.Host, laddr netip.AddrPort, send func()) (payload []byte, ttl, tos int) {
	t.Helper()
	var fd int
	v6 := laddr.Addr().Is6()
	if err := h.Do(func() (err error) {
		fam := unix.AF_INET
		if v6 {
			fam = unix.AF_INET6
		}
		if fd, err = unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if v6 {
			unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1)
			unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
			return unix.Bind(fd, &unix.SockaddrInet6{Port: int(laddr.Port()), Addr: laddr.Addr().As16()})
		}
		unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
		unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		return unix.Bind(fd, &unix.SockaddrInet4{Port: int(laddr.Port()), Addr: laddr.Addr().As4()})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	send()
	buf, oob := make([]byte, 2048), make([]byte, 256)
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		t.Fatalf("recvmsg: %v", err)
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		t.Fatal(err)
	}
	ttl, tos = -1, -1
	for _, cm := range cms {
		switch {
		case cm.Header.Level == unix.IPPROTO_IP && cm.Header.Type == unix.IP_TTL,
			cm.Header.Level == unix.IPPROTO_IPV6 && cm.Header.Type == unix.IPV6_HOPLIMIT:
			ttl = int(*(*int32)(unsafe.Pointer(&cm.Data[0])))
		case cm.Header.Level == unix.IPPROTO_IP && cm.Header.Type == unix.IP_TOS:
			tos = int(cm.Data[0])
		case cm.Header.Level == unix.IPPROTO_IPV6 && cm.Header.Type == unix.IPV6_TCLASS:
			tos = int(*(*int32)(unsafe.Pointer(&cm.Data[0])))
		}
	}
	return buf[:n], ttl, tos
}

// TTL (hop limit) and TOS (traffic class) arrive as set, as the
// receiving kernel reports them; so does a checksum left to the kernel
// through TX metadata.
func TestTTLTOSAndChecksumOffload(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	for _, tc := range []struct {
		name string
		cfg  xdpnet.Config
		v6   bool
	}{
		{"ipv4 software checksum", xdpnet.Config{TTL: 7, TOS: 0xb8}, false},
		{"ipv6 software checksum", xdpnet.Config{TTL: 9, TOS: 0x28}, true},
		{"ipv4 checksum offload", xdpnet.Config{TTL: 5, TOS: 0x10, TXChecksum: xdpnet.TXChecksumOffload}, false},
		{"ipv6 checksum offload", xdpnet.Config{TTL: 3, TOS: 0x04, TXChecksum: xdpnet.TXChecksumOffload}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := netip.AddrPortFrom(pair.B.IPv4, port), netip.AddrPortFrom(pair.A.IPv4, port)
			if tc.v6 {
				src, dst = netip.AddrPortFrom(pair.B.IPv6, port), netip.AddrPortFrom(pair.A.IPv6, port)
			}
			c := listen(t, pair.B, src, tc.cfg)
			before := udpCsumErrors(t, pair.A)
			msg := bytes.Repeat([]byte("ttl and tos "), 50)
			got, ttl, tos := recvTTLTOS(t, pair.A, dst, func() {
				if _, err := c.WriteToUDPAddrPort(msg, dst); err != nil {
					t.Fatal(err)
				}
			})
			if !bytes.Equal(got, msg) || ttl != tc.cfg.TTL || tos != tc.cfg.TOS {
				t.Errorf("kernel got %d bytes, TTL %d, TOS %#x; want %d, %d, %#x", len(got), ttl, tos, len(msg), tc.cfg.TTL, tc.cfg.TOS)
			}
			if d := udpCsumErrors(t, pair.A) - before; d != 0 {
				t.Errorf("the kernel counted %d checksum errors", d)
			}
			c.Close()
		})
	}
}

func udpCsumErrors(t *testing.T, h *netnstest.Host) int64 {
	t.Helper()
	m, err := h.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return m["UdpInCsumErrors"] + m["Udp6InCsumErrors"]
}

// A link that is down fails writes at once, with the error a kernel UDP
// socket gets in the same state (the kernel drops the link's routes:
// ENETUNREACH; a route that survives leads to ENETDOWN from the ring);
// when it is up again the conn sends again.
func TestLinkDownWrite(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	peer := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port))
	to := netip.AddrPortFrom(pair.A.IPv4, port)
	if _, err := c.WriteToUDPAddrPort([]byte("before"), to); err != nil {
		t.Fatal(err)
	}
	run(t, pair.B, "ip", "link", "set", pair.B.Link, "down")
	kernel := kernelUDP(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	_, kerr := kernel.WriteToUDPAddrPort([]byte("kernel, while down"), to)
	var want syscall.Errno
	if !errors.As(kerr, &want) {
		t.Fatalf("the kernel's own send with the link down: %v", kerr)
	}
	start := time.Now()
	_, err := c.WriteToUDPAddrPort([]byte("while down"), to)
	// The kernel's socket finds no route any more. The conn does too once
	// the route's removal has reached its resolver by netlink; until then
	// its queue finds the link down, which the package documents as
	// ENETDOWN with xsk.ErrLinkDown (seen under the race detector in CI).
	if !errors.Is(err, want) && !(errors.Is(err, syscall.ENETDOWN) && errors.Is(err, xsk.ErrLinkDown)) {
		t.Errorf("write with the link down: %v, want %v as the kernel's socket gets (or ENETDOWN with xsk.ErrLinkDown before the route change arrives)", err, want)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the write took %v to fail", d)
	}
	run(t, pair.B, "ip", "link", "set", pair.B.Link, "up")
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.WriteToUDPAddrPort([]byte("after"), to)
		if err == nil {
			break
		}
		if !(errors.Is(err, syscall.ENETDOWN) || errors.Is(err, syscall.ENETUNREACH)) || time.Now().After(deadline) {
			t.Fatalf("write after link up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 100)
	seen := map[string]bool{}
	for !seen["after"] {
		peer.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatalf("peer: %v (seen %v)", err, seen)
		}
		seen[string(buf[:n])] = true
	}
	if !seen["before"] {
		t.Errorf("the datagram before the outage did not arrive")
	}
}

// A conn on a block of ports: each datagram says which port it came to,
// answers leave from the port asked for, and every port is reserved.
func TestPortBlock(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, 9600), xdpnet.Config{Ports: 4})
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	msgs := make([]xdpnet.Message, 8)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 100)
	}
	for p := uint16(9600); p < 9604; p++ {
		if _, err := k.WriteToUDPAddrPort([]byte{byte(p)}, netip.AddrPortFrom(pair.B.IPv4, p)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.ReadBatch(msgs)
		if err != nil || n != 1 || msgs[0].LocalPort != p || msgs[0].Buf[0] != byte(p) {
			t.Fatalf("to port %d: %d messages, LocalPort %d, %v", p, n, msgs[0].LocalPort, err)
		}
		reply := []xdpnet.Message{{Buf: []byte("reply"), N: 5, Addr: msgs[0].Addr, LocalPort: p}}
		if _, err := c.WriteBatch(reply); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		k.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, from, err := k.ReadFromUDPAddrPort(buf)
		if err != nil || from.Port() != p {
			t.Fatalf("reply from %v (%v), want port %d", from, err, p)
		}
	}
	if _, err := c.WriteBatch([]xdpnet.Message{{Buf: []byte("x"), N: 1, Addr: netip.AddrPortFrom(pair.A.IPv4, 9), LocalPort: 9604}}); !errors.Is(err, xdpnet.ErrInvalidConfig) {
		t.Errorf("a source port outside the block: %v", err)
	}
	err := pair.B.Do(func() error {
		k2, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, 9602)))
		if err == nil {
			k2.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("binding a port of the block: %v, want EADDRINUSE", err)
	}
	c.Close()
	// Port 0: a free block below the ephemeral range.
	z := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, 0), xdpnet.Config{Ports: 256})
	if p := z.LocalAddrPort().Port(); p < 20000 || int(p)+255 > 32767 {
		t.Errorf("a block of 256 from port %d", p)
	}
}

// The readers that batch or take every queue at once echo like the
// others: a Group (poller or group receiver), and Queue readers with
// coalescing.
func TestGroupAndCoalescedReaders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		group    bool
		coalesce *coalesce.Params
	}{
		{"group", true, nil},
		{"group coalesced", true, &coalesce.Params{RXUsecs: 50, RXFrames: 16}},
		{"queues coalesced", false, &coalesce.Params{RXUsecs: 50, RXFrames: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			txOff(t, pair.A)
			c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{Coalesce: tc.coalesce})
			type reader interface {
				ReadView([]xdpnet.Message, time.Duration) (int, error)
				Release()
			}
			var rs []reader
			if tc.group {
				g, err := c.Group()
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, g)
				if _, err := c.Group(); !errors.Is(err, xdpnet.ErrReadConflict) {
					t.Errorf("a second Group: %v", err)
				}
			} else {
				for _, q := range c.Queues() {
					rs = append(rs, q)
				}
			}
			done := make(chan struct{})
			for _, r := range rs {
				go func() {
					defer func() { done <- struct{}{} }()
					msgs := make([]xdpnet.Message, 128)
					for {
						n, err := r.ReadView(msgs, -1)
						if err != nil {
							return
						}
						for i := range msgs[:n] {
							msgs[i].Buf = msgs[i].Buf[:msgs[i].N]
						}
						c.WriteBatch(msgs[:n])
					}
				}()
			}
			for i := 0; i < 4; i++ {
				k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, uint16(42000+i)))
				roundTrips(t, k, netip.AddrPortFrom(pair.B.IPv4, port), 25, 100)
			}
			c.Close()
			for range rs {
				<-done
			}
			if tot := c.Stats().Total(); tot.Datagrams != 100 {
				t.Errorf("delivered %d, want 100", tot.Datagrams)
			}
		})
	}
}

// The next hop follows the kernel's neighbour table: a changed MAC is
// used for the next datagram (here, one A's kernel then ignores as not
// its own), and the right one again after it is restored.
func TestNextHopFollowsNeighbourChanges(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	peer := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port))
	to := netip.AddrPortFrom(pair.A.IPv4, port)
	buf := make([]byte, 100)
	arrives := func(msg string, want bool) {
		t.Helper()
		// The first datagram to a peer goes through the kernel socket; send
		// until one leaves through AF_XDP, then look at what A got.
		before := c.Stats().Queues[0].Sent
		for i := 0; i < 100 && c.Stats().Queues[0].Sent == before; i++ {
			if _, err := c.WriteToUDPAddrPort([]byte(msg), to); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		got := false
		for {
			peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := peer.Read(buf)
			if err != nil {
				break
			}
			got = got || string(buf[:n]) == msg
		}
		if got != want {
			t.Errorf("%q reached A: %v, want %v", msg, got, want)
		}
	}
	arrives("to the right MAC", true)
	run(t, pair.B, "ip", "neigh", "replace", pair.A.IPv4.String(), "lladdr", "02:00:00:00:00:99", "dev", pair.B.Link, "nud", "permanent")
	time.Sleep(50 * time.Millisecond) // the notification reaches the cache
	arrives("to a MAC that is not A's", false)
	run(t, pair.B, "ip", "neigh", "replace", pair.A.IPv4.String(), "lladdr", pair.A.MAC.String(), "dev", pair.B.Link, "nud", "permanent")
	time.Sleep(50 * time.Millisecond)
	arrives("to the right MAC again", true)
}

// Route tells the source address and path MTU a write uses.
func TestRoute(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	run(t, pair.B, "ip", "route", "add", "198.19.7.0/24", "via", pair.A.IPv4.String(), "mtu", "1400")
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv6Unspecified(), port), xdpnet.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		dst, src netip.Addr
		mtu      int
	}{
		{pair.A.IPv4, pair.B.IPv4, 1500},
		{pair.A.IPv6, pair.B.IPv6, 1500},
		{netip.MustParseAddr("198.19.7.9"), pair.B.IPv4, 1400},
	} {
		src, mtu, err := c.Route(ctx, tc.dst)
		if err != nil || src != tc.src || mtu != tc.mtu {
			t.Errorf("Route(%v) = %v, %d, %v; want %v, %d", tc.dst, src, mtu, err, tc.src, tc.mtu)
		}
	}
	if _, _, err := c.Route(ctx, netip.MustParseAddr("198.19.200.1")); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("Route with no route: %v, want ENETUNREACH", err)
	}
	// A write to the far network refuses what the route's MTU does not let
	// through.
	if _, err := c.WriteToUDPAddrPort(make([]byte, 1400-28+1), netip.MustParseAddrPort("198.19.7.9:9")); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("a datagram above the route's MTU: %v, want EMSGSIZE", err)
	}
}

// ECN bits go both ways, as the kernel on the other end reports and
// sends them, through AF_XDP and through the kernel socket.
func TestECN(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{TOS: 0xb8})
	dst := netip.AddrPortFrom(pair.A.IPv4, port)
	// The first write to A goes through the kernel socket (its hop being
	// resolved), the later ones through AF_XDP: both carry the mark.
	for i, ecn := range []uint8{2, 1, 3} {
		_, _, tos := recvTTLTOS(t, pair.A, dst, func() {
			m := []xdpnet.Message{{Buf: []byte("ecn"), N: 3, Addr: dst, ECN: ecn}}
			if _, err := c.WriteBatch(m); err != nil {
				t.Fatal(err)
			}
		})
		if tos != 0xb8|int(ecn) {
			t.Errorf("write %d with ECN %d: the kernel saw TOS %#x, want %#x", i, ecn, tos, 0xb8|int(ecn))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A kernel sender marks ECT(1); the conn reports it.
	var k *net.UDPConn
	if err := pair.A.Do(func() (err error) {
		k, err = net.ListenUDP("udp4", nil)
		if err == nil {
			rc, _ := k.SyscallConn()
			rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, 1) })
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.WriteToUDPAddrPort([]byte("marked"), netip.AddrPortFrom(pair.B.IPv4, port))
	msgs := []xdpnet.Message{{Buf: make([]byte, 100)}}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.ReadBatch(msgs); err != nil || n != 1 || msgs[0].ECN != 1 {
		t.Errorf("ReadBatch: %d, ECN %d, %v; want one datagram with ECN 1", n, msgs[0].ECN, err)
	}
}

// A connected conn exchanges datagrams with its peer only.
func TestDialUDP(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	peer := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port))
	other := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port+1))
	var c *xdpnet.UDPConn
	if err := pair.B.Do(func() (err error) {
		c, err = xdpnet.DialUDP(pair.B.Link, netip.AddrPort{}, netip.AddrPortFrom(pair.A.IPv4, port), xdpnet.Config{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddrPort()
	if local.Addr() != pair.B.IPv4 || local.Port() == 0 {
		t.Fatalf("LocalAddr %v: want %v and a chosen port", local, pair.B.IPv4)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	peer.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := peer.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "hello" || from.Addr().Unmap() != local.Addr() || from.Port() != local.Port() {
		t.Fatalf("peer got %q from %v (%v), want hello from %v", buf[:n], from, err, local)
	}
	other.WriteToUDPAddrPort([]byte("not from the peer"), local)
	peer.WriteToUDPAddrPort([]byte("from the peer"), local)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err = c.Read(buf)
	if err != nil || string(buf[:n]) != "from the peer" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}
	if d := c.Stats().Total().Drops; d.OtherPeer != 1 {
		t.Errorf("drops %+v, want one from another peer", d)
	}
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(pair.A.IPv4, port)); !errors.Is(err, syscall.EISCONN) {
		t.Errorf("WriteTo on a connected conn: %v, want EISCONN", err)
	}
}

// The next hop through a gateway comes from the kernel's route.
func TestSendThroughGateway(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	// 198.19.5.7 lives on A's loopback; B reaches it through A.
	run(t, pair.A, "ip", "addr", "add", "198.19.5.7/32", "dev", "lo")
	run(t, pair.B, "ip", "route", "add", "198.19.5.0/24", "via", pair.A.IPv4.String())
	far := kernelUDP(t, pair.A, netip.MustParseAddrPort("198.19.5.7:9500"))
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	if _, err := c.WriteToUDPAddrPort([]byte("through the gateway"), netip.MustParseAddrPort("198.19.5.7:9500")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	far.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := far.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "through the gateway" || from.Addr().Unmap() != pair.B.IPv4 {
		t.Fatalf("far end got %q from %v: %v", buf[:n], from, err)
	}
}
