package bench

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/nexthop"
)

// TestXSKResolvesMissingNeighbours: with the peer's neighbour entries
// deleted, the AF_XDP client (Dial) and server (a reply) have the kernel
// resolve them and their datagrams arrive at kernel sockets; an on-link
// address nobody answers for and an address without a route give an
// error that says which.
func TestXSKResolvesMissingNeighbours(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	// Client: A has no entry for B.
	forgetNeighbours(t, pair.A, pair.B.IPv4, pair.B.IPv6)
	for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
		server := netip.AddrPortFrom(dst, 5501)
		rx := listenUDPIn(t, pair.B, server)
		dp := &xskplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do}
		c, err := dp.Dial(server)
		if err != nil {
			t.Fatalf("dial %v without a neighbour entry: %v", server, err)
		}
		if n, err := c.WriteBatch([]plane.Message{{Buf: []byte("hello"), N: 5}}); n != 1 {
			t.Fatalf("write: %d, %v", n, err)
		}
		expectRead(t, rx, "hello")
		c.Close()
	}

	// Server: B has no entry for A; it answers A's kernel socket.
	forgetNeighbours(t, pair.B, pair.A.IPv4, pair.A.IPv6)
	local := netip.AddrPortFrom(pair.B.IPv4, 5502)
	pc, err := (&xskplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}).Listen(local)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	client := netip.AddrPortFrom(pair.A.IPv4, 5503)
	rx := listenUDPIn(t, pair.A, client)
	if n, err := pc.WriteBatch([]plane.Message{{Buf: []byte("reply"), N: 5, Addr: client}}); n != 1 {
		t.Fatalf("server write: %d, %v", n, err)
	}
	expectRead(t, rx, "reply")

	// Nobody answers for .99; nothing routes 203.0.113.1 (TEST-NET-3; no
	// default route in the namespace). The errors are package nexthop's,
	// which resolves the client's next hop (as xdpnet's writes do).
	dp := &xskplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do}
	for dst, want := range map[netip.Addr]string{
		netip.MustParseAddr("198.18.0.99"): "198.18.0.99 did not answer ARP",
		netip.MustParseAddr("203.0.113.1"): "no route to 203.0.113.1",
	} {
		start := time.Now()
		c, err := dp.Dial(netip.AddrPortFrom(dst, 5201))
		if err == nil {
			c.Close()
			t.Errorf("dial %v: no error", dst)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("dial %v: %v; want it to say %q", dst, err, want)
		}
		if el := time.Since(start); el > 2*nexthop.DefaultResolveTimeout {
			t.Errorf("dial %v took %v", dst, el)
		}
	}
	// The failed dials left nothing attached to A's interface.
	if err := pair.A.Do(func() error {
		l, err := netlink.LinkByName(pair.A.Link)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			t.Errorf("an XDP program (id %d) is still attached after the failed dials", x.ProgId)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// forgetNeighbours deletes h's neighbour entries for addrs.
func forgetNeighbours(t *testing.T, h *netnstest.Host, addrs ...netip.Addr) {
	t.Helper()
	if err := h.Do(func() error {
		for _, ip := range addrs {
			if err := netlink.NeighDel(&netlink.Neigh{LinkIndex: h.Ifindex, IP: ip.AsSlice()}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("delete neighbour entries: %v", err)
	}
}

// listenUDPIn opens a kernel UDP socket on ap in h's namespace, closed at
// the end of the test.
func listenUDPIn(t *testing.T, h *netnstest.Host, ap netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectRead fails the test unless c receives want within 3 s.
func expectRead(t *testing.T, c *net.UDPConn, want string) {
	t.Helper()
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != want {
		t.Fatalf("kernel socket read %q, %v; want %q", buf[:n], err, want)
	}
}
