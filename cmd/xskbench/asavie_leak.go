//go:build linux

package main

import (
	asavie "github.com/asavie/xdp"

	"github.com/xdpio/xdpio/internal/asaviefix"
)

// closeAsavie closes an asavie/xdp socket so that the next backend can
// bind its queue: asavie/xdp v0.3.3's Socket.Close leaves the rings
// mapped, and package asaviefix unmaps them.
func closeAsavie(s *asavie.Socket) error { return asaviefix.Close(s) }
