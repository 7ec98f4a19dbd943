//go:build linux

package xsk

import (
	"time"

	"golang.org/x/sys/unix"
)

// MaxShortSleep is the longest wait SleepShort makes itself; longer ones
// go through Sleep.
const MaxShortSleep = time.Millisecond

// SleepShort waits d without looking at the rings, like Sleep, and returns
// early with ErrClosed when Close is called. Unlike Sleep it does not tell
// the Go scheduler that the goroutine blocks: the thread keeps its P for
// the wait, the way a goroutine computing for d would. For the short,
// bounded waits of a batching policy (package coalesce) this is cheaper:
// a wait that the scheduler sees takes more than one sysmon tick (20µs),
// so sysmon hands the P to another thread and the goroutine has to take it
// back when the wait ends, which costs the process more CPU than the wait
// itself. Waits longer than MaxShortSleep go through Sleep, so a long wait
// never holds a P. A signal (the runtime's preemption, every 10ms of
// running) does not end the wait early: the rest is slept.
//
// The goroutine should be locked to its thread (runtime.LockOSThread), as
// an owner of a socket that sleeps in short steps usually is.
func (s *Socket) SleepShort(d time.Duration) error {
	if d > MaxShortSleep {
		return s.Sleep(d)
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.closed.Load() {
		return ErrClosed
	}
	one, ev := [1]*Socket{s}, [1]unix.PollFd{}
	return sleepOn(one[:], ev[:], d, true)
}
