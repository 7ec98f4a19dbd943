//go:build linux

package coalesce

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

type systemClock struct{ epoch time.Time }

var sysClock = &systemClock{epoch: time.Now()}

// SystemClock returns the machine's monotonic clock. Its Sleep is the
// kernel's nanosleep, with nanosecond resolution (Go's time.Sleep is
// rounded up to the runtime's timer granularity, often a millisecond).
// A thread's timer slack (50µs by default on Linux) still delays each
// wake-up; LockThread lowers it.
func SystemClock() Clock { return sysClock }

func (c *systemClock) Now() time.Duration { return time.Since(c.epoch) }

func (c *systemClock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for {
		var rem unix.Timespec
		err := unix.Nanosleep(&ts, &rem)
		if err != unix.EINTR {
			return
		}
		ts = rem
	}
}

// LockThread wires the calling goroutine to its OS thread and lowers the
// thread's timer slack to 1ns, so that the sleeps and kernel waits of a
// Receiver or Transmitter owned by this goroutine end when they should
// rather than up to 50µs later. Call it at the start of the goroutine that
// owns the socket; the returned function undoes both.
//
// A program that raises the priority of the owning thread (nice, a
// real-time policy) should raise that of the whole process: the Go
// scheduler preempts a goroutine that ran 10ms without blocking in a way
// it sees, and a goroutine locked to its thread gets its P back only
// through another thread of the process. On a busy machine that thread
// waits for a CPU at its own priority; in this package's benchmark, at
// nice 0 against nice -10, it held receivers up for milliseconds (the Go
// scheduler's /sched/latencies p99 fell from 2.6–6.3ms to 0.2–0.4ms when
// every thread got nice -10).
func LockThread() (unlock func(), err error) {
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("get timer slack: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("set timer slack: %w", err)
	}
	return func() {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		runtime.UnlockOSThread()
	}, nil
}
