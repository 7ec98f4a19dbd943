//go:build linux

package xdpnet

import (
	"context"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// The conn's own writes, and what every write checks: the destination,
// the size, the source port.

// WriteTo sends p to addr, as net.UDPConn.WriteTo.
func (c *UDPConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, c.opErr("write", netip.AddrPort{}, fmt.Errorf("%w: address %v is not a *net.UDPAddr", ErrInvalidConfig, addr))
	}
	return c.WriteToUDPAddrPort(p, ua.AddrPort())
}

// WriteToUDPAddrPort sends p to addr.
func (c *UDPConn) WriteToUDPAddrPort(p []byte, addr netip.AddrPort) (int, error) {
	if c.raddr.IsValid() {
		return 0, c.opErr("write", addr, syscall.EISCONN)
	}
	m := [1]Message{{Buf: p, N: len(p), Addr: addr}}
	if _, err := c.WriteBatch(m[:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Write sends p to the peer of a connected conn.
func (c *UDPConn) Write(p []byte) (int, error) {
	if !c.raddr.IsValid() {
		return 0, c.opErr("write", netip.AddrPort{}, syscall.EDESTADDRREQ)
	}
	m := [1]Message{{Buf: p, N: len(p)}}
	if _, err := c.WriteBatch(m[:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteBatch sends msgs in order (Buf[:N] to Addr, cut into datagrams of
// SegSize bytes when it is set) and returns how many messages were sent.
// Messages to one destination leave through one queue, in order. It
// blocks while the TX rings are full, until the write deadline.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) {
	sent := 0
	for sent < len(msgs) {
		q := c.txQueue(c.dstOf(&msgs[sent]))
		j := sent + 1
		for j < len(msgs) && c.txQueue(c.dstOf(&msgs[j])) == q {
			j++
		}
		n, err := q.write(msgs[sent:j])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

func (c *UDPConn) dstOf(m *Message) netip.AddrPort {
	if c.raddr.IsValid() {
		return c.raddr
	}
	return m.Addr
}

// txQueue picks the queue whose TX ring carries datagrams to dst: a hash
// of the destination, so one flow always leaves through one ring.
func (c *UDPConn) txQueue(dst netip.AddrPort) *xskQueue {
	n := len(c.xqs)
	if n <= 1 {
		return c.xqs[0]
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	a := dst.Addr().As16()
	h.Write(a[:])
	return c.xqs[int(h.Sum64()%uint64(n))]
}

// peer returns a as the conn addresses it: IPv4-mapped addresses
// unmapped, and a link-local IPv6 address with the conn's interface as its
// zone when it has none (or names the interface by its index), so that the
// kernel socket sends it out of that interface.
func (c *UDPConn) peer(a netip.AddrPort) netip.AddrPort {
	a = unmapAP(a)
	ip := a.Addr()
	if ip.Is6() && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		if z := ip.Zone(); z == "" || z == strconv.Itoa(c.ifindex) {
			return netip.AddrPortFrom(ip.WithZone(c.ifname), a.Port())
		}
	}
	return a
}

// zoned gives a link-local source read from the kernel socket its zone:
// the conn's interface, or the interface the kernel names (scope).
func (c *UDPConn) zoned(a netip.AddrPort, scope uint32) netip.AddrPort {
	z := c.ifname
	if scope != 0 && int(scope) != c.ifindex {
		if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
			z = ifi.Name
		} else {
			z = strconv.Itoa(int(scope))
		}
	}
	return netip.AddrPortFrom(a.Addr().WithZone(z), a.Port())
}

// Route returns the source address and path MTU of datagrams to dst, as
// a write would use them: the conn's address (or, for an unspecified one,
// the kernel route's preferred source) and the route's MTU (or the
// interface's). It resolves the next hop as a write would, waiting for it
// until ctx ends or Config.ResolveTimeout passes; its errors are a
// write's (ENETUNREACH, EHOSTUNREACH).
func (c *UDPConn) Route(ctx context.Context, dst netip.Addr) (src netip.Addr, mtu int, err error) {
	if c.closed.Load() {
		return netip.Addr{}, 0, c.opErr("route", netip.AddrPort{}, net.ErrClosed)
	}
	dst = dst.Unmap()
	hop, err := c.res.Resolve(ctx, dst)
	if err != nil {
		return netip.Addr{}, 0, c.opErr("route", netip.AddrPortFrom(dst, 0), err)
	}
	src = c.laddr.Addr()
	if src.IsUnspecified() {
		src = hop.Src
	}
	return src, hop.MTU, nil
}

// checkDst refuses destinations a datagram cannot go to.
func (c *UDPConn) checkDst(dst netip.AddrPort) error {
	switch {
	case !dst.IsValid() || dst.Addr().IsUnspecified():
		return fmt.Errorf("%w: destination %v", ErrInvalidConfig, dst)
	case dst.Port() == 0:
		return fmt.Errorf("%w: destination %v: port 0", ErrInvalidConfig, dst)
	case dst.Addr().IsLoopback():
		return fmt.Errorf("destination %v is a loopback address, which the conn's interface %s does not reach: %w", dst, c.ifname, syscall.ENETUNREACH)
	case dst.Addr().Zone() != "" && dst.Addr().Zone() != c.ifname:
		return fmt.Errorf("destination %v is on another link than the conn's interface %s: %w", dst, c.ifname, syscall.ENETUNREACH)
	case c.laddr.Addr().Is4() && dst.Addr().Is6():
		return fmt.Errorf("IPv6 destination %v from IPv4 address %v: %w", dst, c.laddr, syscall.EAFNOSUPPORT)
	}
	if a := c.laddr.Addr(); a.Is6() && !a.IsUnspecified() && dst.Addr().Is4() {
		return fmt.Errorf("IPv4 destination %v from IPv6 address %v: %w", dst, c.laddr, syscall.EAFNOSUPPORT)
	}
	return nil
}

// checkSize refuses a message whose datagrams (each segment, with
// SegSize) are larger than mtu allows or, for a frame of its own (inFrame),
// than a UMEM frame holds: the package never fragments.
func (c *UDPConn) checkSize(m *Message, dst netip.AddrPort, mtu int, inFrame bool) error {
	seg := segLen(m)
	hlen := headerLen(dst.Addr())
	room := min(mtu-(hlen-ethLen), 65507)
	if inFrame {
		room = min(room, c.frameRoom(dst))
	}
	if seg > room {
		return fmt.Errorf("%d-byte datagram to %v: the path MTU %d allows %d bytes of UDP payload: %w", seg, dst, mtu, room, syscall.EMSGSIZE)
	}
	return nil
}

// segLen is the length of a message's datagrams (its segments', with
// SegSize).
func segLen(m *Message) int {
	if m.SegSize > 0 && m.SegSize < m.N {
		return m.SegSize
	}
	return m.N
}

// frameRoom is the longest payload a UMEM frame holds for dst.
func (c *UDPConn) frameRoom(dst netip.AddrPort) int {
	return c.dev.Sockets()[0].UMEM().FrameSize() - headerLen(dst.Addr()) - txMetaRoom(c.cfg)
}

// overFrame reports whether m's datagrams are longer than a frame holds:
// they go out through the kernel socket.
func (c *UDPConn) overFrame(m *Message, dst netip.AddrPort) bool {
	return segLen(m) > c.frameRoom(dst)
}

// sourcePort is the port a message is sent from: its LocalPort, one of
// the conn's (0: the first).
func (c *UDPConn) sourcePort(m *Message) (uint16, error) {
	first := c.laddr.Port()
	if m.LocalPort == 0 {
		return first, nil
	}
	if m.LocalPort < first || int(m.LocalPort-first) >= c.cfg.Ports {
		return 0, fmt.Errorf("%w: source port %d is not one of the conn's (%d-%d)", ErrInvalidConfig, m.LocalPort, first, int(first)+c.cfg.Ports-1)
	}
	return m.LocalPort, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func txMetaRoom(cfg Config) int {
	if cfg.TXChecksum == TXChecksumOffload {
		return 24 // struct xsk_tx_metadata
	}
	return 0
}
