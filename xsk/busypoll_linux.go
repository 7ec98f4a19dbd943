//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollParams is struct epoll_params (include/uapi/linux/eventpoll.h).
type epollParams struct {
	BusyPollUsecs  uint32
	BusyPollBudget uint16
	PreferBusyPoll uint8
	_              uint8
}

// epiocsparams is EPIOCSPARAMS: _IOW(0x8A, 0x01, struct epoll_params).
const epiocsparams = 0x40088a01

// epollBusy is a Poller's epoll instance with busy polling on.
type epollBusy struct {
	fd  int
	evs []unix.EpollEvent
}

// BusyPoll makes WaitRX wait in epoll_wait with the epoll busy-poll
// parameters (EPIOCSPARAMS, Linux 6.9): before it sleeps, epoll_wait runs
// the NAPI that last delivered to one of the sockets, in this thread, for
// up to cfg.Timeout, preferring that to the driver's interrupt and
// softirq (prefer_busy_poll), cfg.Budget packets a round (default 64).
// WaitRX then never naps.
//
// With the NAPI's irq-suspend-timeout set as well (Config.NAPIDeferral's
// IRQSuspendTimeout, or nic's SetNAPI; Linux 6.13), this is the kernel's
// IRQ suspension: while WaitRX keeps finding packets, the device's IRQs
// stay off and the application's own polls drive the queue; when a wait
// finds nothing and sleeps, the IRQs come back. The queues' NAPIs need
// defer-hard-irqs and gro-flush-timeout too (the kernel's documentation
// suggests a defer count above zero and a small timeout), which the same
// NAPIDeferral sets.
//
// epoll follows one NAPI at a time, the last one a ready socket came
// from: busy polling pays for a Poller of one socket, or of sockets whose
// queues share a NAPI. It needs a driver whose AF_XDP queues carry a NAPI
// ID (Socket.NAPIID); veth's do not (Linux 6.18), and busy polling then
// only spins. Call Close when done with the Poller.
func (p *Poller) BusyPoll(cfg BusyPoll) error {
	if p.err != nil {
		return p.err
	}
	if cfg.Timeout <= 0 || cfg.Timeout > time.Second {
		return invalid("busy-poll timeout", cfg.Timeout, "want 1µs to 1s")
	}
	if cfg.Budget == 0 {
		cfg.Budget = 64
	}
	if cfg.Budget < 1 || cfg.Budget > 65535 {
		return invalid("busy-poll budget", cfg.Budget, "want 1-65535")
	}
	if p.ep != nil {
		p.Close()
	}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("busy poll: epoll_create1: %w", err)
	}
	ep := &epollBusy{fd: fd, evs: make([]unix.EpollEvent, 2*len(p.socks))}
	for i, s := range p.socks {
		for j, f := range []int{s.fd, s.eventFD} {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i + j*len(p.socks))}
			if err := unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, f, &ev); err != nil {
				unix.Close(fd)
				return fmt.Errorf("busy poll: epoll_ctl: %w", err)
			}
		}
	}
	par := epollParams{BusyPollUsecs: uint32(max(cfg.Timeout/time.Microsecond, 1)), BusyPollBudget: uint16(cfg.Budget), PreferBusyPoll: 1}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), epiocsparams, uintptr(unsafe.Pointer(&par))); e != 0 {
		unix.Close(fd)
		if e == unix.ENOTTY || e == unix.EINVAL && cfg.Budget <= 64 {
			return fmt.Errorf("busy poll: the kernel has no epoll busy-poll parameters (EPIOCSPARAMS, Linux 6.9): %w: %w", ErrNotSupported, e)
		}
		if e == unix.EPERM {
			return fmt.Errorf("busy poll: a budget above 64 (NAPI_POLL_WEIGHT) needs CAP_NET_ADMIN: %w: %w", ErrPermission, e)
		}
		return fmt.Errorf("busy poll: EPIOCSPARAMS: %w", e)
	}
	p.ep = ep
	return nil
}

// Close releases what BusyPoll took (its epoll instance). The Poller can
// go on waiting without busy polling; it does not close the sockets.
func (p *Poller) Close() error {
	if p.ep == nil {
		return nil
	}
	err := unix.Close(p.ep.fd)
	p.ep = nil
	return err
}

// waitEpoll is WaitRX's wait when busy polling: epoll_wait in slices, so a
// device that vanished is noticed, ending on a ready RX ring, a Close or
// an interrupt.
func (p *Poller) waitEpoll(timeout time.Duration) (bool, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for _, s := range p.socks {
		s.ctr.polls.Add(1)
	}
	n := len(p.socks)
	for {
		slice := goneCheckEvery
		if timeout >= 0 {
			slice = max(0, min(slice, time.Until(deadline)))
			if timeout == 0 {
				slice = 0
			}
		}
		ms := int((slice + time.Millisecond - 1) / time.Millisecond)
		k, err := unix.EpollWait(p.ep.fd, p.ep.evs, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("epoll_wait: %w", err)
		}
		if anyClosed(p.socks) {
			return false, ErrClosed
		}
		for _, ev := range p.ep.evs[:k] {
			i := int(ev.Fd)
			if i < n && ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
				s := p.socks[i]
				return false, &OpError{Op: "epoll", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("socket error (events %#x)", ev.Events)}
			}
		}
		if k > 0 {
			return anyRX(p.socks), nil
		}
		if err := p.probeGone(); err != nil {
			return false, err
		}
		if timeout >= 0 && (timeout == 0 || !time.Now().Before(deadline)) {
			return false, nil
		}
	}
}
