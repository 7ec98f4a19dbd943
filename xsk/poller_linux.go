//go:build linux

package xsk

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// WaitRX blocks until the RX ring of at least one socket has descriptors,
// the timeout passes, or one of the sockets is closed (ErrClosed). A
// negative timeout waits without limit. It reports whether a ring is
// ready. Like Socket.Wait it first lends each fill ring what its pool
// has, naps while packets flow when the sockets have SocketConfig.RXNap
// (the longest of theirs), and blocks in poll on all of them only when
// every ring is still empty after the nap. Once a socket's device is gone
// it returns that socket's error (matching ErrNoDevice), within a quarter
// second of it going. Each socket counts the wait in Stats.Polls (and a
// nap in Stats.Naps).
func (p *Poller) WaitRX(timeout time.Duration) (bool, error) {
	if p.err != nil {
		return false, p.err
	}
	if !p.enter() {
		return false, ErrClosed
	}
	defer p.leave()
	for _, s := range p.socks {
		if err := s.goneErr(); err != nil {
			return false, err
		}
		if s.feed() {
			s.publishRX()
		}
	}
	if anyRX(p.socks) {
		return true, nil
	}
	if p.ep != nil {
		return p.waitEpoll(timeout)
	}
	// One goroutine for all the sockets keeps its P through the nap.
	ready, left, err := napRX(p.socks, p.fds[len(p.socks):], timeout, true)
	if err != nil || ready {
		return ready, err
	}
	if left == 0 && timeout != 0 {
		return false, p.probeGone()
	}
	timeout = left
	n := len(p.socks)
	for i, s := range p.socks {
		p.fds[i] = unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN}
		p.fds[n+i] = unix.PollFd{Fd: int32(s.eventFD), Events: unix.POLLIN}
		s.ctr.polls.Add(1)
	}
	return pollSliced(p.fds, timeout, func(k int) (bool, error) {
		if anyClosed(p.socks) {
			return true, ErrClosed
		}
		if k == 0 {
			return false, p.probeGone()
		}
		for i, s := range p.socks {
			if p.fds[i].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return true, &OpError{Op: "poll", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("socket error (revents %#x)", p.fds[i].Revents)}
			}
		}
		return true, nil
	})
}

// probeGone returns the error of the first socket whose device is gone
// or whose program was detached.
func (p *Poller) probeGone() error {
	for _, s := range p.socks {
		if err := s.probeRX(); err != nil {
			return err
		}
	}
	return nil
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
	return sleepOn(p.socks, p.fds[len(p.socks):], d, raw)
}
