// Package asavieplane is xdpio bench's AF_XDP data plane over
// github.com/asavie/xdp v0.3.3, the Go peer, for side-by-side runs with
// package xskplane: the same XDP filter and per-queue reading, with
// offload's frame parser and builder and the kernel's next hops. AF_XDP is Linux's:
// elsewhere every endpoint fails with an error matching
// errors.ErrUnsupported.
package asavieplane
