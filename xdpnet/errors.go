package xdpnet

import "errors"

var (
	// ErrInvalidConfig is wrapped by errors about a Config field or a
	// Message.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrQueuesTaken is returned by the conn's own read methods once
	// Queues handed the queues' receive sides to their own goroutines.
	ErrQueuesTaken = errors.New("the conn's queues are read through Queues")
	// ErrUnsupported is wrapped where the platform has no AF_XDP.
	ErrUnsupported = errors.ErrUnsupported
)
