package link

import (
	"fmt"
	"net"

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
