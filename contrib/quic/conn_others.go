//go:build !linux

package xdpquic

import (
	"net/netip"

	"github.com/xdpio/xdpio/xdpnet"
)

// Conn is an xdpnet.UDPConn for quic-go (Linux only).
type Conn struct {
	*xdpnet.UDPConn
}

// NewConn wraps c.
func NewConn(c *xdpnet.UDPConn) *Conn { return &Conn{UDPConn: c} }

// Listen returns xdpnet.ListenUDP's error: AF_XDP exists only on Linux.
func Listen(ifname string, laddr netip.AddrPort, cfg xdpnet.Config) (*Conn, error) {
	_, err := xdpnet.ListenUDP(ifname, laddr, cfg)
	return nil, err
}
