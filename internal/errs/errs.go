// Package errs defines, once, the errors that several xdpio packages
// return, so that errors.Is works across them: xsk.ErrNotSupported,
// nic.ErrNotSupported, xdpnet.ErrNotSupported and bench.ErrNotSupported are
// the same value, ErrNotSupported here, as are
// offload.ErrMalformed and rss.ErrMalformed, nic.ErrNoDevice and
// xsk.ErrNoDevice, and xsk.ErrInvalidConfig and xdpnet.ErrInvalidConfig.
// (filter's ErrUnsupportedConstruct is its own: an expression the
// compiler does not implement, not a kernel's limit.) Packages re-export them as part
// of their API; users never import this package.
//
// ErrNotSupported also matches the standard library's errors.ErrUnsupported,
// and ErrClosed matches net.ErrClosed, so code written against the standard
// library's sentinels works unchanged.
package errs

import (
	"errors"
	"net"
)

// sentinel is an error value that also matches one standard-library error.
type sentinel struct {
	msg  string
	also error
}

func (e *sentinel) Error() string { return e.msg }

// Is reports whether target is the standard-library error e stands for.
func (e *sentinel) Is(target error) bool { return target == e.also }

var (
	// ErrNotSupported: the kernel, driver, device or platform lacks a
	// feature. It matches errors.ErrUnsupported.
	ErrNotSupported error = &sentinel{"not supported", errors.ErrUnsupported}
	// ErrClosed: the socket, device or conn was closed. It matches
	// net.ErrClosed.
	ErrClosed error = &sentinel{"closed", net.ErrClosed}
	// ErrMalformed: a frame or message is too short or inconsistent to
	// parse.
	ErrMalformed = errors.New("malformed frame")
	// ErrNoDevice: no network interface by that name or index in the
	// network namespace of the caller.
	ErrNoDevice = errors.New("no such network interface")
	// ErrInvalidConfig: a configuration field or argument has a value the
	// library or the kernel refuses; the error text names field and value.
	ErrInvalidConfig = errors.New("invalid configuration")
)
