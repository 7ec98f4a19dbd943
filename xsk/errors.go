package xsk

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/xdpio/xdpio/internal/errs"
)

var (
	// ErrNotSupported: the kernel, driver or device lacks a feature the
	// configuration asks for (zero-copy, multi-buffer, TX metadata, ...).
	// The error text names the feature; the errno stays reachable with
	// errors.Is.
	ErrNotSupported = errs.ErrNotSupported
	// ErrPermission: the process lacks CAP_NET_ADMIN, CAP_BPF or CAP_NET_RAW
	// (run as root).
	ErrPermission = errors.New("permission denied (needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF: run as root)")
	// ErrNoDevice: no interface by that name or index in this network
	// namespace. The same error as nic.ErrNoDevice.
	ErrNoDevice = errs.ErrNoDevice
	// ErrLinkDown: the interface is down (ENETDOWN). For a sender it is
	// transient: frames stay on the TX ring and leave once the link is up
	// and the kernel is woken again (Transmit, Flush, Kick).
	ErrLinkDown = errors.New("link is down")
	// ErrBusy: another XDP program is attached to the interface, or another
	// socket is bound to the queue.
	ErrBusy = errors.New("device or queue busy")
	// ErrInvalidConfig: a Config field has a value the kernel would refuse.
	// The same error as xdpnet.ErrInvalidConfig.
	ErrInvalidConfig = errs.ErrInvalidConfig
	// ErrClosed: the socket or device was closed.
	ErrClosed = errs.ErrClosed
	// ErrDetached: the XDP program that fed the sockets no longer runs on
	// the interface, though nobody here closed it: someone detached it
	// (`bpftool link detach`, `ip link set DEV xdp off`, `xdp-loader
	// unload`). Frames go to the kernel's stack again; the sockets receive
	// nothing more, and RX waits and runners end with this error
	// (Program.Err). Sending still works.
	ErrDetached = errors.New("XDP program detached from the interface")
)

// OpError names the operation, the interface and queue, and wraps the cause.
type OpError struct {
	Op      string // "bind", "register UMEM", "attach XDP", ...
	Ifname  string
	Ifindex int
	Queue   int // -1 when the operation concerns the whole device
	Err     error
}

// Error names the operation, the interface and queue, and the cause.
func (e *OpError) Error() string {
	where := e.Ifname
	if where == "" {
		where = fmt.Sprintf("ifindex %d", e.Ifindex)
	}
	if e.Queue >= 0 {
		return fmt.Sprintf("%s %s queue %d: %v", e.Op, where, e.Queue, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, where, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// Timeout reports whether the operation timed out (net.Error).
func (e *OpError) Timeout() bool { return errors.Is(e.Err, os.ErrDeadlineExceeded) }

// Temporary reports whether the cause may go away by itself: a link that
// is down (net.Error; the standard library deprecates the method, it is
// here to satisfy the interface).
func (e *OpError) Temporary() bool { return errors.Is(e.Err, ErrLinkDown) }

var _ net.Error = (*OpError)(nil)

// invalid returns an ErrInvalidConfig error naming field and value.
func invalid(field string, value any, rule string) error {
	return fmt.Errorf("%w: %s %v: %s", ErrInvalidConfig, field, value, rule)
}
