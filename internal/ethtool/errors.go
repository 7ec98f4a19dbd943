package ethtool

import (
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/genl"
)

// ErrNotSupported is matched (errors.Is) by every error that means the
// running kernel or the device's driver does not offer an ethtool message,
// attribute or operation. The error's text says what is missing.
var ErrNotSupported = errs.ErrNotSupported

// Error is the error of one ethtool request (Family "ethtool", Op the
// message, e.g. "CHANNELS_SET", Target the device). It wraps the kernel's
// errno (errors.Is(err, unix.EINVAL) works) and, when the request is
// something the kernel or driver lacks, also matches ErrNotSupported.
type Error = genl.Error

// family names the generic netlink family in errors.
const family = "ethtool"

// target is the device as an Error's Target: "" for no device.
func (d Device) target() string {
	if d == (Device{}) {
		return ""
	}
	return d.String()
}
