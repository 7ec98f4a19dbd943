//go:build !linux

package vethpair

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdpio/xdpio/internal/errs"
)

var errOS = fmt.Errorf("network namespaces and veth on %s: %w", runtime.GOOS, errs.ErrNotSupported)

// NewPair returns ErrNotSupported: namespaces and veth exist only on Linux.
func NewPair(cfg Config) (*Pair, error) { return nil, errOS }

// Close does nothing.
func (p *Pair) Close() error { return nil }

// Do returns ErrNotSupported.
func (h *Host) Do(fn func() error) error { return errOS }

// Handle returns ErrNotSupported.
func (h *Host) Handle() (*netlink.Handle, error) { return nil, errOS }

// NsHandle returns the closed handle.
func (h *Host) NsHandle() netns.NsHandle { return h.handle }

// Attrs returns ErrNotSupported.
func (h *Host) Attrs() (*netlink.LinkAttrs, error) { return nil, errOS }
