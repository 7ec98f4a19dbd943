//go:build !linux

package nic

import (
	"errors"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// Device is unavailable on this system; Open returns ErrNotSupported.
type Device struct{}

var errNotLinux = errors.New("ethtool and netdev netlink exist only on Linux")

// Open returns an error matching ErrNotSupported.
func Open(ifname string) (*Device, error) {
	return nil, &Error{Op: "open", Device: ifname, NotSupported: true, Err: errNotLinux}
}

// Close does nothing.
func (d *Device) Close() error { return nil }

// Name returns "".
func (d *Device) Name() string { return "" }

// Index returns 0.
func (d *Device) Index() int { return 0 }

// Queues returns ErrNotSupported.
func (d *Device) Queues() ([]Queue, error) { return nil, notLinux() }

// NAPIs returns ErrNotSupported.
func (d *Device) NAPIs(Selector) ([]NAPI, error) { return nil, notLinux() }

// SetNAPI returns ErrNotSupported.
func (d *Device) SetNAPI(Selector, NAPISettings) (NAPIChange, error) { return NAPIChange{}, notLinux() }

// QueueStats returns ErrNotSupported.
func (d *Device) QueueStats() (Snapshot, error) { return Snapshot{}, notLinux() }

// Stats returns ErrNotSupported.
func (d *Device) Stats() (Snapshot, error) { return Snapshot{}, notLinux() }

// XDPFeatures returns ErrNotSupported.
func (d *Device) XDPFeatures() (XDPFeatures, error) { return XDPFeatures{}, notLinux() }

func notLinux() error { return &Error{Op: "netlink", NotSupported: true, Err: errNotLinux} }

// ethtool returns an error matching ErrNotSupported.
func (d *Device) ethtool(op string) (*ethtool.Client, ethtool.Device, error) {
	return nil, ethtool.Device{}, &Error{Op: op, NotSupported: true, Err: errNotLinux}
}
