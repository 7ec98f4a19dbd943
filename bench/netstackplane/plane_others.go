//go:build !linux

package netstackplane

import (
	"net/netip"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/netstack"
)

// Plane opens a netstack per TCP test on Iface (Linux only).
type Plane struct {
	// Iface is the interface the stacks run on.
	Iface string
	// Do, if set, runs the stack's setup.
	Do func(func() error) error
	// Config is the stacks' settings.
	Config netstack.Config
}

// Listen returns an error matching errors.ErrUnsupported.
func (p *Plane) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) {
	return nil, link.ErrNoXDP
}

// Dialer returns an error matching errors.ErrUnsupported.
func (p *Plane) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	return nil, link.ErrNoXDP
}
