//go:build linux && cgo

package main

/*
#cgo CFLAGS: -O2 -DXSKPEER_LIB -I${SRCDIR}/c
#cgo LDFLAGS: -pthread
#include "xskpeer.c"
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cPeerInProcess: with cgo, the "c" backend runs the C peer's threads
// inside this process, like every other backend, so no backend pays for
// switching address spaces when the CPU goes between it and the generator.
const cPeerInProcess = true

// cPeerStart runs xskpeer_start on the control page: it opens the
// sockets (in the calling thread's network namespace) and starts the
// threads. A positive nap gives the rxdrop loop xdpio's RXNap policy;
// group runs rxdrop of every socket in one thread.
func cPeerStart(page []byte, tx bool, ifindex int, o *Options, nap time.Duration, group bool) error {
	t := 0
	if tx {
		t = 1
	}
	r := C.xskpeer_start(unsafe.Pointer(&page[0]), C.int(t), C.int(ifindex), C.int(o.Queues), C.int(o.RingSize),
		C.int(o.NumFrames), C.int(o.FrameSize), C.int(o.Batch), C.int(o.TXBatch), C.int(o.TXBudget), C.longlong(nap.Nanoseconds()), C.int(btoi(group)))
	if r != 0 {
		return errors.New(unix.ByteSliceToString(page[ctlErr : ctlErr+ctlErrLen]))
	}
	return nil
}

// cPeerStop ends the threads and closes the sockets.
func cPeerStop() { C.xskpeer_stop() }
