//go:build !linux

package xskplane

import (
	"fmt"
	"net/netip"
	"runtime"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/xsk"
)

// errNoXDP: the AF_XDP data planes exist only on Linux.
var errNoXDP = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, errs.ErrNotSupported)

// DataPlane is the AF_XDP data plane, which exists only on Linux: here
// every endpoint fails with errs.ErrNotSupported. The fields are Linux's, so
// that code that sets them builds everywhere.
type DataPlane struct {
	Iface     string
	Do        func(func() error) error
	Config    xsk.Config
	OnClose   func([]plane.QueueCount)
	Coalesce  *coalesce.Params
	OneReader bool
	Placer    *plane.Placer
}

// Listen returns errs.ErrNotSupported.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) { return nil, errNoXDP }

// Dial returns errs.ErrNotSupported.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) { return nil, errNoXDP }

// Check returns errs.ErrNotSupported.
func (d *DataPlane) Check() error { return errNoXDP }
