//go:build !linux

package bench

import (
	"fmt"
	"net/netip"
	"runtime"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// errNoXDP: the AF_XDP data planes exist only on Linux.
var errNoXDP = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, ErrUnsupported)

// XSKDataPlane is the AF_XDP data plane, which exists only on Linux: here
// every endpoint fails with ErrUnsupported. The fields are Linux's, so
// that code that sets them builds everywhere.
type XSKDataPlane struct {
	Iface     string
	Do        func(func() error) error
	Config    xsk.Config
	OnClose   func([]QueueCount)
	Coalesce  *coalesce.Params
	OneReader bool
	Placer    *Placer
}

// Listen returns ErrUnsupported.
func (d *XSKDataPlane) Listen(local netip.AddrPort) (PacketConn, error) { return nil, errNoXDP }

// Dial returns ErrUnsupported.
func (d *XSKDataPlane) Dial(remote netip.AddrPort) (PacketConn, error) { return nil, errNoXDP }

// Check returns ErrUnsupported.
func (d *XSKDataPlane) Check() error { return errNoXDP }

// AsavieDataPlane is the asavie/xdp data plane, which exists only on
// Linux: here every endpoint fails with ErrUnsupported.
type AsavieDataPlane struct {
	Iface   string
	Do      func(func() error) error
	Batch   int
	Attach  xsk.AttachMode
	OnClose func([]QueueCount)
	Placer  *Placer
}

// Listen returns ErrUnsupported.
func (d *AsavieDataPlane) Listen(local netip.AddrPort) (PacketConn, error) { return nil, errNoXDP }

// Dial returns ErrUnsupported.
func (d *AsavieDataPlane) Dial(remote netip.AddrPort) (PacketConn, error) { return nil, errNoXDP }

// Check returns ErrUnsupported.
func (d *AsavieDataPlane) Check() error { return errNoXDP }
