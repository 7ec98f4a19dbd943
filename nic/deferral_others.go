//go:build !linux

package nic

// Deferral is unavailable on this system.
type Deferral struct{}

// ApplyDeferral returns ErrNotSupported.
func (d *Device) ApplyDeferral([]int, DeferralSettings) (*Deferral, error) { return nil, notLinux() }

// NAPIs returns nil.
func (df *Deferral) NAPIs() []uint32 { return nil }

// Close does nothing.
func (df *Deferral) Close() error { return nil }

// RestoreDeferral returns ErrNotSupported.
func (d *Device) RestoreDeferral() (DeferralReport, error) { return DeferralReport{}, notLinux() }
