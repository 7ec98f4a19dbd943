//go:build linux && !cgo

package main

import (
	"errors"
	"time"
)

// cPeerInProcess: without cgo, the "c" backend runs the C peer as a
// child process (built with the system's compiler, if there is one).
const cPeerInProcess = false

func cPeerStart(page []byte, tx bool, ifindex int, o *Options, nap time.Duration, group bool) error {
	return errors.New("built without cgo")
}

func cPeerStop() {}
