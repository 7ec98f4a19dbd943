//go:build linux

package nic

// HideNAPISet makes d behave as on a kernel without napi-set.
func HideNAPISet(d *Device) { d.noNAPISet = true }
