//go:build !linux

package asavieplane

import (
	"net/netip"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/xsk"
)

// DataPlane is the asavie/xdp data plane, which exists only on
// Linux: here every endpoint fails with an error matching
// errors.ErrUnsupported (link.ErrNoXDP).
type DataPlane struct {
	Iface   string
	Do      func(func() error) error
	Batch   int
	Attach  xsk.AttachMode
	OnClose func([]plane.QueueCount)
	Placer  plane.Placer
}

// Listen returns errs.ErrNotSupported.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) { return nil, link.ErrNoXDP }

// Dial returns errs.ErrNotSupported.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) { return nil, link.ErrNoXDP }

// Check returns errs.ErrNotSupported.
func (d *DataPlane) Check() error { return link.ErrNoXDP }
