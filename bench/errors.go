package bench

import "github.com/xdpio/xdpio/internal/errs"

// ErrNotSupported: a requested test mode or data plane feature this
// package does not implement (or this system lacks).
var ErrNotSupported = errs.ErrNotSupported
