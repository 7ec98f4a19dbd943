//go:build linux

package xdpnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// kernelSock is the kernel UDP socket reserving one of the conn's ports.
type kernelSock struct {
	c    *net.UDPConn
	raw  syscall.RawConn
	fd   int
	port uint16
}

// openKernel binds the kernel sockets to laddr's ports (and connects the
// one to raddr) and records the address the kernel chose.
func (c *UDPConn) openKernel(laddr, raddr netip.AddrPort) error {
	laddr = unmapAP(laddr)
	ports := c.cfg.Ports
	if raddr.IsValid() && ports != 1 {
		return fmt.Errorf("%w: Ports %d: a connected conn has one port", ErrInvalidConfig, ports)
	}
	if ports > 1 && int(laddr.Port())+ports-1 > 65535 {
		return fmt.Errorf("%w: Ports %d from port %d: beyond 65535", ErrInvalidConfig, ports, laddr.Port())
	}
	network := "udp"
	switch a := laddr.Addr(); {
	case !a.IsValid():
		if raddr.Addr().Is4() {
			network = "udp4"
		} else {
			network = "udp6"
		}
	case a.Is4():
		network = "udp4"
	case !a.IsUnspecified():
		network = "udp6"
	}
	if raddr.IsValid() {
		var la *net.UDPAddr
		if laddr.IsValid() {
			la = net.UDPAddrFromAddrPort(laddr)
		}
		k, err := net.DialUDP(network, la, net.UDPAddrFromAddrPort(raddr))
		if err != nil {
			return opCause(err)
		}
		if err := c.addKernel(k); err != nil {
			return err
		}
	} else if ports == 1 || laddr.Port() != 0 {
		if err := c.bindBlock(network, laddr, ports); err != nil {
			return err
		}
	} else {
		// A free block below the kernel's ephemeral range, at random.
		var err error
		for try := 0; try < 32; try++ {
			base := uint16(20000 + rand.IntN((32768-20000-ports)/ports)*ports)
			if err = c.bindBlock(network, netip.AddrPortFrom(laddr.Addr(), base), ports); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("no free block of %d ports in 20000-32767: %w", ports, err)
		}
	}
	c.ks, c.ksRaw, c.ksFD = c.kss[0].c, c.kss[0].raw, c.kss[0].fd
	c.laddr = unmapAP(c.ks.LocalAddr().(*net.UDPAddr).AddrPort())
	if la := laddr.Addr(); la.IsValid() && la.Is6() && la.IsUnspecified() {
		c.laddr = netip.AddrPortFrom(netip.IPv6Unspecified(), c.laddr.Port())
	}
	c.raddr = raddr
	return nil
}

// bindBlock binds kernel sockets to ports consecutive ports from laddr's,
// or none (and the error of the first that failed).
func (c *UDPConn) bindBlock(network string, laddr netip.AddrPort, ports int) error {
	for i := 0; i < ports; i++ {
		a := netip.AddrPortFrom(laddr.Addr(), laddr.Port()+uint16(i))
		k, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(a))
		if err == nil {
			err = c.addKernel(k)
		}
		if err != nil {
			for _, ks := range c.kss {
				ks.c.Close()
			}
			c.kss = nil
			return opCause(err)
		}
	}
	return nil
}

func (c *UDPConn) addKernel(k *net.UDPConn) error {
	raw, err := k.SyscallConn()
	if err != nil {
		k.Close()
		return err
	}
	ks := kernelSock{c: k, raw: raw, fd: -1, port: k.LocalAddr().(*net.UDPAddr).AddrPort().Port()}
	raw.Control(func(fd uintptr) {
		ks.fd = int(fd)
		// What the kernel sends for the conn never fragments either:
		// a datagram above the path MTU fails with EMSGSIZE.
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		// And it carries the conn's TTL and TOS.
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, c.cfg.TTL)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, c.cfg.TOS)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, c.cfg.TTL)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, c.cfg.TOS)
	})
	c.kss = append(c.kss, ks)
	return nil
}

// opCause returns the cause inside a *net.OpError: the caller wraps it in
// its own.
func opCause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}
