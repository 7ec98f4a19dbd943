package errs_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/xdpio/xdpio/internal/errs"
)

// The shared errors match themselves through wrapping, and the standard
// library's sentinels they stand for; they do not match each other.
func TestSentinels(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("op on eth0 queue 1: %w", err) }
	for _, c := range []struct {
		err, target error
		want        bool
	}{
		{wrap(errs.ErrNotSupported), errs.ErrNotSupported, true},
		{wrap(errs.ErrNotSupported), errors.ErrUnsupported, true},
		{wrap(errs.ErrClosed), errs.ErrClosed, true},
		{wrap(errs.ErrClosed), net.ErrClosed, true},
		{wrap(errs.ErrMalformed), errs.ErrMalformed, true},
		{wrap(errs.ErrClosed), errs.ErrNotSupported, false},
		{wrap(errs.ErrNotSupported), net.ErrClosed, false},
		{wrap(errs.ErrMalformed), errors.ErrUnsupported, false},
		{wrap(errs.ErrNoDevice), errs.ErrNoDevice, true},
		{wrap(errs.ErrNoDevice), errs.ErrNotSupported, false},
		{net.ErrClosed, errs.ErrClosed, false}, // only one way
	} {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, c.target, got, c.want)
		}
	}
	if errs.ErrNotSupported.Error() != "not supported" || errs.ErrClosed.Error() != "closed" {
		t.Errorf("texts %q, %q", errs.ErrNotSupported, errs.ErrClosed)
	}
}
