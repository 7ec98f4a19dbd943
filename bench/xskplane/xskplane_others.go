//go:build !linux

package xskplane

import (
	"net/netip"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// DataPlane is the AF_XDP data plane, which exists only on Linux: here
// every endpoint fails with an error matching
// errors.ErrUnsupported (link.ErrNoXDP). The fields are Linux's, so
// that code that sets them builds everywhere.
type DataPlane struct {
	Iface     string
	Do        func(func() error) error
	Config    xsk.Config
	OnClose   func([]plane.QueueCount)
	Coalesce  *coalesce.Params
	OneReader bool
	Placer    plane.Placer
}

// Listen returns errs.ErrNotSupported.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) { return nil, link.ErrNoXDP }

// Dial returns errs.ErrNotSupported.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) { return nil, link.ErrNoXDP }

// Check returns errs.ErrNotSupported.
func (d *DataPlane) Check() error { return link.ErrNoXDP }
