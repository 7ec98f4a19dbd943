//go:build !linux

package nexthop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
)

var errUnsupported = fmt.Errorf("nexthop: the kernel's route and neighbour tables are read with netlink, which %s lacks: %w", runtime.GOOS, errors.ErrUnsupported)

// Resolver answers next-hop questions for one interface. Off Linux it
// cannot be created.
type Resolver struct{}

// New returns an error wrapping errors.ErrUnsupported off Linux.
func New(ifindex int, opts Options) (*Resolver, error) {
	return nil, errUnsupported
}

// Lookup never finds anything off Linux.
func (r *Resolver) Lookup(dst netip.Addr) (Hop, bool) { return Hop{}, false }

// Resolve returns an error wrapping errors.ErrUnsupported off Linux.
func (r *Resolver) Resolve(ctx context.Context, dst netip.Addr) (Hop, error) {
	return Hop{}, errUnsupported
}

// Start returns an error wrapping errors.ErrUnsupported off Linux.
func (r *Resolver) Start(dst netip.Addr) error { return errUnsupported }

// Close does nothing off Linux.
func (r *Resolver) Close() error { return nil }

// Local is empty off Linux.
func (r *Resolver) Local() Local { return Local{} }
