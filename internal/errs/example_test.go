package errs_test

import (
	"errors"
	"fmt"
	"net"

	"github.com/xdpio/xdpio/internal/errs"
)

// A closed socket's error is also net.ErrClosed, as a net.Conn's is.
func Example() {
	err := fmt.Errorf("read eth0 queue 0: %w", errs.ErrClosed)
	fmt.Println(errors.Is(err, net.ErrClosed))
	// Output: true
}
