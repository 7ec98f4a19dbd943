//go:build !linux || !(amd64 || arm64)

package gvisorxdpplane

import (
	"net/netip"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
)

// Name is the stack's name in a test's report (plane.TCPStack.Name).
const Name = "gvisor-xdp"

// Plane opens a gVisor stack on gVisor's AF_XDP endpoint per TCP test on
// Iface (Linux on amd64 and arm64 only, as gVisor's pkg/xdp).
type Plane struct {
	// Iface is the interface the stacks run on.
	Iface string
	// Do, if set, runs the stack's setup.
	Do func(func() error) error
	// NoRXChecksumOffload turns the endpoint's RX checksum offload off.
	NoRXChecksumOffload bool
	// NoQDisc has the stack write to the endpoint directly.
	NoQDisc bool
}

// Check returns an error matching errors.ErrUnsupported.
func (p *Plane) Check() error { return link.ErrNoXDP }

// Listen returns an error matching errors.ErrUnsupported.
func (p *Plane) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) {
	return nil, link.ErrNoXDP
}

// Dialer returns an error matching errors.ErrUnsupported.
func (p *Plane) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	return nil, link.ErrNoXDP
}
