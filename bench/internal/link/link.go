package link

import (
	"fmt"
	"net"
	"runtime"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/xsk"
)

// Run calls fn through do (a data plane's Do field: for example inside a
// network namespace), or directly when do is nil.
func Run(do func(func() error) error, fn func() error) error {
	if do != nil {
		return do(fn)
	}
	return fn()
}

// InterfaceByName is net.InterfaceByName with a missing interface
// reported as xsk.ErrNoDevice too.
func InterfaceByName(name string) (*net.Interface, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", xsk.ErrNoDevice, err)
	}
	return ifi, nil
}

// ErrNoXDP is what the AF_XDP data planes' endpoints fail with on systems
// other than Linux; it matches errors.ErrUnsupported.
var ErrNoXDP = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, errs.ErrNotSupported)
