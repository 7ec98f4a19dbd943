package ethtool

import (
	"strings"

	"github.com/xdpio/xdpio/internal/errs"
)

// ErrNotSupported is matched (errors.Is) by every error that means the
// running kernel or the device's driver does not offer an ethtool message,
// attribute or operation. The error's text says what is missing.
var ErrNotSupported = errs.ErrNotSupported

// Error is the error of one ethtool request. It wraps the kernel's errno
// (errors.Is(err, unix.EINVAL) works) and, when the request is something
// the kernel or driver lacks, also matches ErrNotSupported.
type Error struct {
	// Op is the ethtool message, e.g. "CHANNELS_SET".
	Op string
	// Device is the device the request named.
	Device Device
	// Message is the kernel's extended-ack text, if it sent one.
	Message string
	// Attr names the request attribute the kernel blamed (e.g.
	// "ETHTOOL_A_CHANNELS_RX_COUNT"), or the attribute or message found to
	// be missing before sending; "" when unknown.
	Attr string
	// Missing says what is not supported when NotSupported is true, e.g.
	// "ETHTOOL_MSG_RSS_SET" or "coalescing parameter ETHTOOL_A_COALESCE_RX_USECS_IRQ".
	Missing string
	// NotSupported reports that the error means "not supported".
	NotSupported bool
	// Err is the cause: usually a unix.Errno from the kernel.
	Err error
}

// Error formats the operation, device, what is missing, the kernel's
// message and the blamed attribute, and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ethtool ")
	b.WriteString(e.Op)
	if e.Device != (Device{}) {
		b.WriteString(" ")
		b.WriteString(e.Device.String())
	}
	if e.NotSupported {
		b.WriteString(": not supported")
		if e.Missing != "" {
			b.WriteString(": ")
			b.WriteString(e.Missing)
		}
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Attr != "" && !strings.Contains(e.Missing, e.Attr) {
		b.WriteString(" (attribute ")
		b.WriteString(e.Attr)
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(causeText(e.Err))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrNotSupported and the error means "not
// supported".
func (e *Error) Is(target error) bool {
	return target == ErrNotSupported && e.NotSupported
}
