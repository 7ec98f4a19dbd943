//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewSocket creates a socket on u and binds it to queue of the interface
// with index ifindex (in the caller's network namespace). The first socket
// on a UMEM owns its registration; the others bind with XDP_SHARED_UMEM and
// get their own fill and completion rings.
//
// The socket starts with its fill ring full, so the kernel can deliver as
// soon as an XDP program redirects to it (see Program.Register).
func NewSocket(u *UMEM, ifindex, queue int, cfg SocketConfig) (_ *Socket, err error) {
	// The socket's share of the UMEM's frames, which its ring sizes
	// default from.
	share := cfg.Frames
	if share == 0 {
		share = u.framesLeft()
	}
	cfg.setDefaults(share)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.TXFrames == 0 && cfg.TXShare > 0 {
		cfg.TXFrames = max(int(float64(min(share, u.framesLeft()))*cfg.TXShare), 1)
	}
	if queue < 0 {
		return nil, invalid("queue", queue, "must not be negative")
	}
	fd, shared, err := u.socketFD()
	if err != nil {
		return nil, err
	}
	s := &Socket{fd: fd, eventFD: -1, umem: u, ifindex: ifindex, queue: queue, cfg: cfg, closeDone: make(chan struct{})}
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		s.ifname = ifi.Name
	}
	defer func() {
		if err != nil {
			s.teardown()
			err = &OpError{Op: "create socket on", Ifindex: ifindex, Queue: queue, Err: err}
		}
	}()
	s.eventFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := s.mapRings(); err != nil {
		return nil, err
	}
	if cfg.BusyPoll.Timeout > 0 {
		if err := s.setBusyPoll(); err != nil {
			return nil, err
		}
	}
	if err := s.takeFrames(share); err != nil {
		return nil, err
	}
	// Fill before bind so the first packet finds a buffer.
	s.feed()
	s.publishRX()
	s.publishTX()
	if err := s.bind(shared); err != nil {
		return nil, err
	}
	return s, nil
}

// mapRings sizes the socket's rings (no RX or TX ring with NoRX, NoTX)
// and maps them.
func (s *Socket) mapRings() error {
	fd, cfg := s.fd, s.cfg
	set := func(opt, v int, what string) error {
		if err := setsockoptInt(fd, unix.SOL_XDP, opt, v); err != nil {
			return fmt.Errorf("set %s to %d: %w", what, v, err)
		}
		return nil
	}
	if err := set(unix.XDP_UMEM_FILL_RING, cfg.FillRingSize, "fill ring size"); err != nil {
		return err
	}
	if err := set(unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionRingSize, "completion ring size"); err != nil {
		return err
	}
	if !cfg.NoRX {
		if err := set(unix.XDP_RX_RING, cfg.RXRingSize, "RX ring size"); err != nil {
			return err
		}
	}
	if !cfg.NoTX {
		if err := set(unix.XDP_TX_RING, cfg.TXRingSize, "TX ring size"); err != nil {
			return err
		}
	}
	off, err := getMmapOffsets(fd)
	if err != nil {
		return err
	}
	mem, err := mmapRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.fr, uint32(cfg.FillRingSize), 8)
	if err != nil {
		return fmt.Errorf("map fill ring: %w", err)
	}
	s.fill = newFillRing(mem, off.fr, uint32(cfg.FillRingSize))
	mem, err = mmapRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.cr, uint32(cfg.CompletionRingSize), 8)
	if err != nil {
		return fmt.Errorf("map completion ring: %w", err)
	}
	s.comp = newCompletionRing(mem, off.cr, uint32(cfg.CompletionRingSize))
	if !cfg.NoRX {
		mem, err = mmapRing(fd, unix.XDP_PGOFF_RX_RING, off.rx, uint32(cfg.RXRingSize), unsafe.Sizeof(Desc{}))
		if err != nil {
			return fmt.Errorf("map RX ring: %w", err)
		}
		s.rx = newRXRing(mem, off.rx, uint32(cfg.RXRingSize))
	}
	if !cfg.NoTX {
		mem, err = mmapRing(fd, unix.XDP_PGOFF_TX_RING, off.tx, uint32(cfg.TXRingSize), unsafe.Sizeof(Desc{}))
		if err != nil {
			return fmt.Errorf("map TX ring: %w", err)
		}
		s.tx = newTXRing(mem, off.tx, uint32(cfg.TXRingSize))
		if cfg.TXBudget > 0 {
			b := min(cfg.TXBudget, cfg.TXRingSize)
			// Best effort: older kernels lack the option and keep 32.
			setsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, b)
		}
	}
	return nil
}

// takeFrames takes the socket's share of the UMEM's frames into its
// pools: one, or an RX and a TX pool (SocketConfig.TXFrames).
func (s *Socket) takeFrames(share int) error {
	u, cfg := s.umem, s.cfg
	if cfg.TXFrames > 0 && (cfg.NoRX || cfg.NoTX) {
		return invalid("TX frames", cfg.TXFrames, "a TX pool of its own needs both an RX and a TX ring")
	}
	all := u.takeFrames(share) // capped at what is left
	s.txLen = make([]uint32, u.cfg.NumFrames)
	s.owned = len(all)
	if s.owned == 0 {
		return invalid("frames", cfg.Frames, fmt.Sprintf("the UMEM (%d frames) has none left for this socket", u.cfg.NumFrames))
	}
	s.rxPool = newFramePool(u, all)
	s.txPool = s.rxPool
	if cfg.TXFrames > 0 {
		if cfg.TXFrames >= len(all) {
			return invalid("TX frames", cfg.TXFrames, fmt.Sprintf("must leave RX some of the socket's %d frames", len(all)))
		}
		k := len(all) - cfg.TXFrames
		s.rxPool = newFramePool(u, all[:k])
		s.txPool = newFramePool(u, all[k:])
		s.split = true
	} else if !cfg.NoRX && !cfg.NoTX {
		s.reserve = s.owned / 2
	}
	return nil
}

// bind binds the socket to its queue (on a UMEM shared with another
// socket, with XDP_SHARED_UMEM) and records whether the kernel granted
// zero-copy.
func (s *Socket) bind(shared bool) error {
	cfg := s.cfg
	sa := &unix.SockaddrXDP{Ifindex: uint32(s.ifindex), QueueID: uint32(s.queue)}
	if shared {
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(s.umem.fd)
	} else {
		switch cfg.Bind {
		case BindCopy:
			sa.Flags |= unix.XDP_COPY
		case BindZeroCopy:
			sa.Flags |= unix.XDP_ZEROCOPY
		}
		if !cfg.DisableNeedWakeup {
			sa.Flags |= unix.XDP_USE_NEED_WAKEUP
		}
		if cfg.MultiBuffer {
			sa.Flags |= unix.XDP_USE_SG
		}
	}
	if err := bindRetry(s.fd, sa); err != nil {
		return bindError(err, cfg, shared)
	}
	if opt, err := getsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
		s.zeroCopy = opt&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return nil
}

// bindRetry binds, retrying for up to a second on EBUSY: right after a
// socket on the same queue closed, the kernel may still be tearing it down.
func bindRetry(fd int, sa *unix.SockaddrXDP) error {
	deadline := time.Now().Add(time.Second)
	for delay := time.Millisecond; ; delay *= 2 {
		err := unix.Bind(fd, sa)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(min(delay, 100*time.Millisecond))
	}
}

func bindError(err error, cfg SocketConfig, shared bool) error {
	switch {
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPROTONOSUPPORT):
		what := "this bind mode"
		switch {
		case cfg.Bind == BindZeroCopy && cfg.MultiBuffer:
			what = "zero-copy with multi-buffer (XDP_USE_SG; the driver's xdp-zc-max-segs is 1, or it has no zero-copy)"
		case cfg.Bind == BindZeroCopy:
			what = "zero-copy"
		case cfg.MultiBuffer:
			what = "multi-buffer (XDP_USE_SG)"
		}
		return fmt.Errorf("bind: the driver does not support %s: %w: %w", what, ErrNotSupported, err)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("bind: another AF_XDP socket is bound to this queue: %w: %w", ErrBusy, err)
	case errors.Is(err, unix.EINVAL) && cfg.Bind == BindZeroCopy:
		// The driver advertises zero-copy but its queue setup refused
		// this one (virtio-net: a device without VIRTIO_F_ACCESS_PLATFORM
		// gives its queues no DMA device; or the queue is beyond the
		// driver's queue pairs). BindAuto would have fallen back to copy.
		return fmt.Errorf("bind: the driver refused zero-copy on this queue (for virtio-net, the device must offer VIRTIO_F_ACCESS_PLATFORM, qemu's iommu_platform=on); BindAuto falls back to copy mode: %w: %w", ErrNotSupported, err)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("bind: queue does not exist on the device, or the rings do not fit the UMEM: %w: %w", ErrInvalidConfig, err)
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("bind: %w: %w", ErrNoDevice, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("bind: %w: %w", ErrPermission, err)
	}
	return fmt.Errorf("bind: %w", err)
}

func (s *Socket) setBusyPoll() error {
	bp := s.cfg.BusyPoll
	for _, o := range []struct {
		name string
		opt  int
		v    int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, int(bp.Timeout / time.Microsecond)},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, bp.Budget},
	} {
		if err := setsockoptInt(s.fd, unix.SOL_SOCKET, o.opt, o.v); err != nil {
			if errors.Is(err, unix.ENOPROTOOPT) {
				return fmt.Errorf("set %s: %w: %w", o.name, ErrNotSupported, err)
			}
			return fmt.Errorf("set %s to %d: %w", o.name, o.v, err)
		}
	}
	return nil
}

// wakeRX lets the kernel make RX progress when it asked for a wake-up
// (zero-copy drivers pause when the fill ring ran dry) or, when busy
// polling, runs one NAPI poll of the device in this thread. It reports
// whether it busy-polled, so the caller looks at the RX ring again.
func (s *Socket) wakeRX() bool {
	busy := s.busyPolling()
	if busy || (s.fill != nil && !s.cfg.DisableNeedWakeup && s.fill.needWakeup()) {
		s.ctr.wakeups.Add(1)
		_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.ENXIO {
			// The kernel unbound the socket: its device is gone.
			s.setGone(e)
			return false
		}
	}
	return busy
}

// busyPolling reports whether a syscall on the socket busy-polls a NAPI:
// busy polling is configured and the kernel has recorded the NAPI the
// socket's packets come from. The kernel records it when the first packet
// arrives, and only for drivers whose XDP RX queues carry a NAPI ID; until
// then (and forever on a device without one, such as veth) a busy-poll
// syscall would do nothing, so the library skips it and looks again every
// napiProbeEvery calls.
func (s *Socket) busyPolling() bool {
	if s.cfg.BusyPoll.Timeout <= 0 {
		return false
	}
	if s.napiID.Load() != 0 {
		return true
	}
	if s.napiProbe.Add(1)%napiProbeEvery != 1 {
		return false
	}
	if id, err := getsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID); err == nil && id != 0 {
		s.napiID.Store(int32(id))
	}
	return s.napiID.Load() != 0
}

// napiProbeEvery is how often a busy-polling socket without a NAPI ID yet
// asks the kernel again.
const napiProbeEvery = 256

// NAPIID returns the ID of the NAPI instance (the driver's receive
// context for the socket's queue) that the kernel recorded when the
// socket's first packet arrived (SO_INCOMING_NAPI_ID), or 0 if none was
// recorded. Busy polling (SocketConfig.BusyPoll) drives that NAPI from the
// application's thread; while the ID is 0 it cannot, and the library does
// not make busy-poll syscalls. Drivers whose XDP receive queues carry a
// NAPI ID record one after the first packet; veth (Linux 6.18) does not,
// so on veth busy polling never runs. It may be called from any goroutine.
func (s *Socket) NAPIID() (int, error) {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.closed.Load() {
		return 0, ErrClosed
	}
	id, err := getsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		return 0, &OpError{Op: "read NAPI ID of", Ifindex: s.ifindex, Queue: s.queue, Err: err}
	}
	return id, nil
}

func (s *Socket) kick() error {
	s.ctr.kicks.Add(1)
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
		// Transient: the kernel is busy with earlier frames; the next kick
		// (after completions are reclaimed) goes on.
		if e != 0 {
			s.ctr.kickErrors.Add(1)
		}
		return nil
	case unix.ENETDOWN:
		// Transient: the frames stay on the ring for the next kick.
		s.ctr.linkDown.Add(1)
		return &OpError{Op: "transmit on", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("%w (frames wait on the TX ring until it is up): %w", ErrLinkDown, e)}
	case unix.ENXIO:
		return s.setGone(e)
	}
	return &OpError{Op: "transmit on", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue, Err: e}
}

// probeGone asks the kernel whether it unbound the socket because the
// device went away: it then sets the socket's error to ENETDOWN
// (SO_ERROR, which reading clears; the library keeps it). It returns the
// error the socket ended with, or nil.
func (s *Socket) probeGone() error {
	if err := s.goneErr(); err != nil {
		return err
	}
	v, err := getsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil || v == 0 {
		return nil
	}
	return s.setGone(unix.Errno(v))
}

// goneCheckEvery bounds how long a wait without a limit blocks in poll
// before it looks at whether the device is gone: the kernel's poll of an
// unbound AF_XDP socket never reports anything, so a wait that only
// polled would block for ever.
const goneCheckEvery = 250 * time.Millisecond

// Wait blocks until the RX ring has descriptors (or, with tx set, the TX
// ring has room or completions arrived), the timeout passes, or Close is
// called. A negative timeout waits without limit. It reports whether the
// socket is ready; after Close it returns ErrClosed, and once the device
// is gone (deleted, or its namespace removed) an error matching
// ErrNoDevice, within goneCheckEvery (a quarter second) of it going. With
// SocketConfig.RXNap set and packets flowing, an RX wait first naps (see
// RXNap). An RX wait first lends the fill ring what the pool has.
func (s *Socket) Wait(timeout time.Duration, tx bool) (bool, error) {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.closed.Load() {
		return false, ErrClosed
	}
	if err := s.goneErr(); err != nil {
		return false, err
	}
	if !tx && s.feed() {
		s.publishRX()
	}
	if s.rx != nil && s.rx.consAvail(1) > 0 {
		return true, nil
	}
	if !tx && timeout != 0 {
		// A goroutine per queue naps the way the Go scheduler sees, so
		// that napping receivers never hold every P (a Poller's single
		// goroutine keeps its one).
		one, ev := [1]*Socket{s}, [1]unix.PollFd{}
		ready, left, err := napRX(one[:], ev[:], timeout, false)
		if err != nil || ready {
			return ready, err
		}
		if left == 0 {
			return false, s.probeRX()
		}
		timeout = left
	}
	var ev int16
	if s.rx != nil {
		ev |= unix.POLLIN
	}
	if tx {
		if s.comp.consAvail(1) > 0 {
			return true, nil
		}
		ev |= unix.POLLOUT
	}
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: ev}, {Fd: int32(s.eventFD), Events: unix.POLLIN}}
	s.ctr.polls.Add(1)
	return pollSliced(fds, timeout, func(n int) (bool, error) {
		if s.closed.Load() {
			return true, ErrClosed
		}
		if fds[1].Revents != 0 {
			// Woken without Close: a runner stopping on its context.
			return true, nil
		}
		if n == 0 {
			if tx {
				return false, s.probeGone()
			}
			return false, s.probeRX()
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			return true, &OpError{Op: "poll", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("socket error (revents %#x)", fds[0].Revents)}
		}
		return true, nil
	})
}

// pollSliced polls fds for up to timeout (negative: no limit) in slices of
// at most goneCheckEvery, and after each slice calls done with ppoll's
// count (0: the slice passed with nothing). done reports whether the wait
// is over and with what error; pollSliced then returns (n > 0 and no
// error, that error). When the whole timeout passes it returns false and
// done's error for the last empty slice.
func pollSliced(fds []unix.PollFd, timeout time.Duration, done func(n int) (bool, error)) (bool, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		slice := goneCheckEvery
		if timeout >= 0 {
			left := time.Until(deadline)
			if timeout == 0 {
				left = 0
			}
			slice = max(0, min(slice, left))
		}
		ts := unix.NsecToTimespec(int64(slice))
		n, err := unix.Ppoll(fds, &ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		over, err := done(n)
		if over || err != nil {
			return n > 0 && err == nil, err
		}
		if timeout >= 0 && (timeout == 0 || !time.Now().Before(deadline)) {
			return false, nil
		}
	}
}

// Sleep waits for d without looking at the rings, and returns early with
// ErrClosed when Close is called: the interruptible timer that batching
// policies need while a batch is open.
func (s *Socket) Sleep(d time.Duration) error {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.closed.Load() {
		return ErrClosed
	}
	return s.sleep(d)
}

// sleep is Sleep for a caller that already marked the call in progress.
// The thread sleeps in the kernel on the Close event only, not on the
// socket, so the driver's flushes to the socket find nobody to wake.
func (s *Socket) sleep(d time.Duration) error {
	one, ev := [1]*Socket{s}, [1]unix.PollFd{}
	return sleepOn(one[:], ev[:], d, false)
}

// Close unbinds the socket (the kernel drops it from any XSKMAP), unmaps
// its rings and gives its frames back. It may be called from any goroutine
// at any time: it wakes a blocked Wait or Sleep, lets a call in progress
// on the owning goroutine finish, and makes every later call return
// ErrClosed (or 0 frames). Frames still held in batches are dropped.
func (s *Socket) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.eventFD >= 0 {
		var one = [8]byte{1}
		unix.Write(s.eventFD, one[:])
	}
	for s.busy.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
	if s.fd >= 0 {
		if st, err := s.readStats(); err == nil {
			s.final.Store(&st)
		}
	}
	close(s.closeDone)
	s.teardown()
	return nil
}

// finalStats returns the counters Close kept, once it kept them.
func (s *Socket) finalStats() (Stats, error) {
	if s.closeDone == nil {
		return Stats{}, ErrClosed
	}
	<-s.closeDone
	if st := s.final.Load(); st != nil {
		return *st, nil
	}
	return Stats{}, ErrClosed
}

func (s *Socket) teardown() {
	if s.rx != nil {
		s.rx.unmap(unix.Munmap)
	}
	if s.tx != nil {
		s.tx.unmap(unix.Munmap)
	}
	if s.fill != nil {
		s.fill.unmap(unix.Munmap)
	}
	if s.comp != nil {
		s.comp.unmap(unix.Munmap)
	}
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
		s.umem.release()
	}
	if s.eventFD >= 0 {
		unix.Close(s.eventFD)
		s.eventFD = -1
	}
}
