package xdpnet

import (
	"errors"

	"github.com/xdpio/xdpio/internal/errs"
)

var (
	// ErrInvalidConfig is wrapped by errors about a Config field or a
	// Message. The same error as xsk.ErrInvalidConfig, so errors.Is
	// matches whichever layer refused.
	ErrInvalidConfig = errs.ErrInvalidConfig
	// ErrReadConflict is returned by a read when the conn is already read
	// another way: a conn is read through its own methods (ReadFrom,
	// ReadBatch), through its Queues' read methods, or through one Group,
	// and the first read decides which.
	ErrReadConflict = errors.New("the conn is read another way (its own methods, its Queues or its Group)")
	// ErrNotSupported is wrapped where the platform has no AF_XDP.
	ErrNotSupported = errs.ErrNotSupported
)
