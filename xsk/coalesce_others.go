//go:build !linux

package xsk

import "time"

// MaxShortSleep is the longest wait SleepShort makes itself.
const MaxShortSleep = time.Millisecond

// SleepShort returns ErrNotSupported.
func (s *Socket) SleepShort(d time.Duration) error { return errOS }
