package genl

import (
	"strings"

	"github.com/xdpio/xdpio/internal/errs"
)

// Error is the error of one request to a generic netlink family (ethtool,
// netdev). It wraps the kernel's errno (errors.Is(err, unix.EINVAL)
// works) and, when the request is something the kernel or driver lacks,
// also matches errs.ErrNotSupported.
type Error struct {
	// Family is the generic netlink family, e.g. "ethtool" or "netdev".
	Family string
	// Op is the message or operation, e.g. "CHANNELS_SET" or "napi-set".
	Op string
	// Target says what the request addressed: a device ("eth0",
	// "ifindex 3"), "napi 8193"; "" when nothing.
	Target string
	// Message is the kernel's extended-ack text, if it sent one.
	Message string
	// Attr names the request attribute the kernel blamed (e.g.
	// "ETHTOOL_A_CHANNELS_RX_COUNT", "defer-hard-irqs"), or the attribute
	// or message found to be missing before sending; "" when unknown.
	Attr string
	// Missing says what is not supported when NotSupported is true, e.g.
	// "ETHTOOL_MSG_RSS_SET" or "coalescing parameter ETHTOOL_A_COALESCE_RX_USECS_IRQ".
	Missing string
	// NotSupported reports that the error means "not supported".
	NotSupported bool
	// Err is the cause: usually a unix.Errno from the kernel.
	Err error
}

// Error formats the family and operation, the target, what is missing,
// the kernel's message and the blamed attribute, and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Family)
	b.WriteString(" ")
	b.WriteString(e.Op)
	if e.Target != "" {
		b.WriteString(" ")
		b.WriteString(e.Target)
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

// Is reports whether target is errs.ErrNotSupported and the error means
// "not supported".
func (e *Error) Is(target error) bool {
	return target == errs.ErrNotSupported && e.NotSupported
}
