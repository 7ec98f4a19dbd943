// Package xskplane is xdpio bench's AF_XDP data plane over package
// xdpnet (a UDP socket over package xsk): a server endpoint has one
// socket per RX queue behind an XDP filter that takes only the test's UDP
// address and port (the control connection stays with the kernel), read
// per queue in place (plane.MultiQueueConn), optionally batched by
// package coalesce; a client's streams share one conn on a block of
// ports. AF_XDP is Linux's: elsewhere every endpoint fails with an error
// matching errors.ErrUnsupported.
package xskplane
