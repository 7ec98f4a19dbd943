//go:build linux

package xsk

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WaitRX blocks until the RX ring of at least one socket has descriptors,
// the timeout passes, or one of the sockets is closed (ErrClosed). A
// negative timeout waits without limit. It reports whether a ring is
// ready. Like Socket.Wait it first naps while packets flow when the
// sockets have SocketConfig.RxNap (the longest of theirs), and blocks in
// poll on all of them only when every ring is still empty after the nap.
// Each socket counts the wait in Stats.Polls (and a nap in Stats.Naps).
func (p *Poller) WaitRX(timeout time.Duration) (bool, error) {
	if p.err != nil {
		return false, p.err
	}
	if !p.enter() {
		return false, ErrClosed
	}
	defer p.leave()
	if p.ready() {
		return true, nil
	}
	var nap time.Duration
	flowing := false
	for _, s := range p.socks {
		if s.rx != nil {
			nap = max(nap, s.cfg.RxNap)
			flowing = flowing || s.rxFlowing
		}
	}
	if nap > 0 && flowing && timeout != 0 {
		d := nap
		if timeout > 0 && timeout < d {
			d = timeout
		}
		for _, s := range p.socks {
			s.ctr.naps.Add(1)
		}
		if err := p.sleepEntered(d, true); err != nil {
			return false, err
		}
		if p.ready() {
			return true, nil
		}
		for _, s := range p.socks {
			s.rxFlowing = false
		}
		if timeout > 0 {
			if timeout -= d; timeout == 0 {
				return false, nil
			}
		}
	}
	n := len(p.socks)
	for i, s := range p.socks {
		p.fds[i] = unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN}
		p.fds[n+i] = unix.PollFd{Fd: int32(s.eventFD), Events: unix.POLLIN}
		s.ctr.polls.Add(1)
	}
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	for {
		k, err := unix.Ppoll(p.fds, ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		if p.closed() {
			return false, ErrClosed
		}
		if k == 0 {
			return false, nil
		}
		for i, s := range p.socks {
			if p.fds[i].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return false, &OpError{Op: "poll", Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("socket error (revents %#x)", p.fds[i].Revents)}
			}
		}
		return true, nil
	}
}

// SleepShort waits d without looking at the rings, like Socket.SleepShort
// (the thread keeps its P; waits longer than MaxShortSleep go through
// Sleep), and returns early with ErrClosed when one of the sockets is
// closed.
func (p *Poller) SleepShort(d time.Duration) error {
	if d > MaxShortSleep {
		return p.Sleep(d)
	}
	return p.sleep(d, true)
}

// Sleep waits d without looking at the rings, in a wait the Go scheduler
// sees (the P goes to other goroutines), and returns early with ErrClosed
// when one of the sockets is closed.
func (p *Poller) Sleep(d time.Duration) error { return p.sleep(d, false) }

func (p *Poller) sleep(d time.Duration, raw bool) error {
	if p.err != nil {
		return p.err
	}
	if !p.enter() {
		return ErrClosed
	}
	defer p.leave()
	return p.sleepEntered(d, raw)
}

// sleepEntered is sleep for a caller that already marked the call in
// progress on every socket.
func (p *Poller) sleepEntered(d time.Duration, raw bool) error {
	fds := p.fds[len(p.socks):]
	for i, s := range p.socks {
		fds[i] = unix.PollFd{Fd: int32(s.eventFD), Events: unix.POLLIN}
	}
	ts := unix.NsecToTimespec(int64(max(d, 0)))
	for {
		// On a signal the kernel writes the time left back into ts.
		var e syscall.Errno
		if raw {
			_, _, e = syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		} else {
			_, _, e = syscall.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		}
		if p.closed() {
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
