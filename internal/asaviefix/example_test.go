//go:build linux

package asaviefix_test

import (
	"log"

	asavie "github.com/asavie/xdp"

	"github.com/xdpio/xdpio/internal/asaviefix"
)

// Close an asavie/xdp socket so that its queue can be bound again in the
// same process. (Needs root and an interface: compiled, not run.)
func ExampleClose() {
	const ifindex, queue = 2, 0
	s, err := asavie.NewSocket(ifindex, queue, nil)
	if err != nil {
		log.Fatal(err)
	}
	// ... Fill, Poll, Receive ...
	if err := asaviefix.Close(s); err != nil {
		log.Fatal(err)
	}
	// The queue is free again.
	s, err = asavie.NewSocket(ifindex, queue, nil)
	if err != nil {
		log.Fatal(err)
	}
	asaviefix.Close(s)
}
