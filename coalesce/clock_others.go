//go:build !linux

package coalesce

import (
	"errors"
	"time"
)

type systemClock struct{ epoch time.Time }

var sysClock = &systemClock{epoch: time.Now()}

// SystemClock returns the machine's monotonic clock.
func SystemClock() Clock { return sysClock }

func (c *systemClock) Now() time.Duration    { return time.Since(c.epoch) }
func (c *systemClock) Sleep(d time.Duration) { time.Sleep(d) }

// LockThread is supported on Linux only.
func LockThread() (unlock func(), err error) {
	return nil, errors.New("lock thread: not supported on this platform")
}
