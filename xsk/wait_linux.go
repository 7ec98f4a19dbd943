//go:build linux

package xsk

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The timed waits of a Socket and of a Poller: one set of sockets (one
// socket, for a Socket) and one entry per socket in evfds for its Close
// event. The callers have marked the call in progress on every socket.

// anyClosed reports whether one of socks was closed.
func anyClosed(socks []*Socket) bool {
	for _, s := range socks {
		if s.closed.Load() {
			return true
		}
	}
	return false
}

// anyRX reports whether one of socks has descriptors on its RX ring.
func anyRX(socks []*Socket) bool {
	for _, s := range socks {
		if s.rx != nil && s.rx.consAvail(1) > 0 {
			return true
		}
	}
	return false
}

// sleepOn sleeps d in ppoll on the Close events of socks, looking at no
// ring, so the driver's flushes find nobody to wake, and ends early with
// ErrClosed when one of socks is closed. A signal (the runtime preempts
// goroutines with one) does not end it early: the kernel writes the time
// left back into the timeout and the rest is slept. raw makes the syscall
// without telling the Go scheduler, so the thread keeps its P.
func sleepOn(socks []*Socket, evfds []unix.PollFd, d time.Duration, raw bool) error {
	for i, s := range socks {
		evfds[i] = unix.PollFd{Fd: int32(s.eventFD), Events: unix.POLLIN}
	}
	ts := unix.NsecToTimespec(int64(max(d, 0)))
	for {
		var e syscall.Errno
		if raw {
			_, _, e = syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&evfds[0])), uintptr(len(socks)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		} else {
			_, _, e = syscall.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&evfds[0])), uintptr(len(socks)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		}
		if anyClosed(socks) {
			return ErrClosed
		}
		switch {
		case e == unix.EINTR && (ts.Sec > 0 || ts.Nsec > 0):
			continue
		case e != 0 && e != unix.EINTR:
			return fmt.Errorf("sleep: %w", e)
		}
		return nil
	}
}

// napRX is the SocketConfig.RXNap step of an RX wait on socks: while
// packets flow, it sleeps the longest RXNap of theirs (or the timeout, if
// shorter) on a timer, off the sockets' wait queues, before the caller
// blocks in poll. It reports whether a ring got descriptors meanwhile and
// the timeout left for the poll (negative: none; 0 after a nap: used up).
// raw is as for sleepOn.
func napRX(socks []*Socket, evfds []unix.PollFd, timeout time.Duration, raw bool) (ready bool, left time.Duration, err error) {
	var nap time.Duration
	flowing := false
	for _, s := range socks {
		if s.rx != nil {
			nap = max(nap, s.cfg.RXNap)
			flowing = flowing || s.rxFlowing
		}
	}
	if nap <= 0 || !flowing || timeout == 0 {
		return false, timeout, nil
	}
	d := nap
	if timeout > 0 && timeout < d {
		d = timeout
	}
	for _, s := range socks {
		s.ctr.naps.Add(1)
	}
	if err := sleepOn(socks, evfds, d, raw); err != nil {
		return false, 0, err
	}
	if anyRX(socks) {
		return true, 0, nil
	}
	// The next packets turn napping on again (receive).
	for _, s := range socks {
		s.rxFlowing = false
	}
	if timeout > 0 {
		timeout -= d
	}
	return false, timeout, nil
}
