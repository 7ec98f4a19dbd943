package bench

import "github.com/xdpio/xdpio/internal/errs"

// ErrUnsupported: a requested test mode or data plane feature this
// package does not implement (or this system lacks).
var ErrUnsupported = errs.ErrNotSupported
