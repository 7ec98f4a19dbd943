//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BindMode chooses between copy and zero-copy.
type BindMode int

const (
	// BindAuto lets the kernel try zero-copy and fall back to copy mode.
	// Socket.ZeroCopy tells which one was granted.
	BindAuto BindMode = iota
	// BindCopy forces copy mode (XDP_COPY): works on every driver.
	BindCopy
	// BindZeroCopy forces zero-copy (XDP_ZEROCOPY); binding fails with
	// ErrNotSupported on drivers without it (veth among them).
	BindZeroCopy
)

func (m BindMode) String() string {
	switch m {
	case BindAuto:
		return "auto"
	case BindCopy:
		return "copy"
	case BindZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("BindMode(%d)", int(m))
}

// SocketConfig describes one AF_XDP socket. The zero value gives RX and TX
// rings of 2048 entries, fill and completion rings of 2048, auto bind mode
// and need_wakeup on.
type SocketConfig struct {
	// RxRingSize, TxRingSize: entries of the RX and TX rings, powers of two.
	// Default 2048. Set NoRX or NoTX to leave a ring out.
	RxRingSize, TxRingSize int
	// FillRingSize, CompletionRingSize: entries of this socket's fill and
	// completion rings, powers of two. Default 2048.
	FillRingSize, CompletionRingSize int
	// NoRX and NoTX leave out the RX or TX ring (a TX-only or RX-only
	// socket). At least one ring must remain.
	NoRX, NoTX bool
	// Frames is how many of the UMEM's frames this socket takes for its
	// own pool. Default: FillRingSize + TxRingSize (capped by what the UMEM
	// has left).
	Frames int
	// Bind chooses copy, zero-copy or auto.
	Bind BindMode
	// DisableNeedWakeup turns XDP_USE_NEED_WAKEUP off: the library then
	// kicks the kernel on every TX submit, and the kernel never pauses
	// RX processing waiting for a wake-up.
	DisableNeedWakeup bool
	// MultiBuffer enables XDP_USE_SG: packets larger than one frame arrive
	// and leave as several descriptors chained with OptContinues.
	MultiBuffer bool
	// BusyPoll, when its Timeout is non-zero, turns on SO_PREFER_BUSY_POLL,
	// SO_BUSY_POLL and SO_BUSY_POLL_BUDGET on the socket; Receive and
	// Transmit then drive the driver's NAPI from this goroutine.
	BusyPoll BusyPoll
	// TxBudget raises how many frames one TX kick sends in copy mode
	// (XDP_MAX_TX_SKB_BUDGET, Linux 6.17; default 32 in the kernel). 0
	// leaves the kernel's default. Values above the TX ring size are
	// clamped.
	TxBudget int
}

// BusyPoll configures preferred busy polling (SO_PREFER_BUSY_POLL).
type BusyPoll struct {
	// Timeout is SO_BUSY_POLL: how long a syscall busy-polls the device.
	Timeout time.Duration
	// Budget is SO_BUSY_POLL_BUDGET: packets per busy-poll round. Default 64.
	Budget int
}

func (c *SocketConfig) setDefaults() {
	if c.RxRingSize == 0 {
		c.RxRingSize = 2048
	}
	if c.TxRingSize == 0 {
		c.TxRingSize = 2048
	}
	if c.FillRingSize == 0 {
		c.FillRingSize = 2048
	}
	if c.CompletionRingSize == 0 {
		c.CompletionRingSize = 2048
	}
	if c.Frames == 0 {
		c.Frames = 0
		if !c.NoRX {
			c.Frames += c.FillRingSize
		}
		if !c.NoTX {
			c.Frames += c.TxRingSize
		}
	}
	if c.BusyPoll.Timeout != 0 && c.BusyPoll.Budget == 0 {
		c.BusyPoll.Budget = 64
	}
}

func (c *SocketConfig) validate() error {
	for _, r := range []struct {
		name string
		v    int
	}{{"RX ring size", c.RxRingSize}, {"TX ring size", c.TxRingSize}, {"fill ring size", c.FillRingSize}, {"completion ring size", c.CompletionRingSize}} {
		if r.v <= 0 || r.v&(r.v-1) != 0 || r.v > 1<<20 {
			return invalid(r.name, r.v, "must be a power of two between 1 and 1048576")
		}
	}
	if c.NoRX && c.NoTX {
		return invalid("rings", "none", "a socket needs an RX or a TX ring")
	}
	if c.Frames < 0 {
		return invalid("frames", c.Frames, "must not be negative")
	}
	if c.Bind < BindAuto || c.Bind > BindZeroCopy {
		return invalid("bind mode", int(c.Bind), "must be BindAuto, BindCopy or BindZeroCopy")
	}
	return nil
}

// Socket is an AF_XDP socket bound to one queue of one interface.
//
// A Socket must not be used concurrently, except Close, which unblocks a
// blocked Wait. One goroutine owns it and its rings; Stats may be read from
// any goroutine.
type Socket struct {
	fd       int
	eventFD  int // written by Close to wake a blocked poll
	umem     *UMEM
	ifindex  int
	queue    int
	zeroCopy bool
	cfg      SocketConfig

	rx   *descRing
	tx   *descRing
	fill *addrRing
	comp *addrRing

	pool framePool

	// frame accounting: frames given to the kernel through the fill ring
	// and not yet received; frames on the TX ring not yet completed; frames
	// the application holds.
	inFill, inTx, inApp int64
	owned               int

	ctr counters

	busy   atomic.Int32
	closed atomic.Bool
}

type counters struct {
	rxFrames, rxBytes, txFrames, txBytes atomic.Uint64
	kicks, kickErrors, polls, wakeups    atomic.Uint64
	rxBadDescs, txRingFull               atomic.Uint64
}

// NewSocket creates a socket on u and binds it to queue of the interface
// with index ifindex (in the caller's network namespace). The first socket
// on a UMEM owns its registration; the others bind with XDP_SHARED_UMEM and
// get their own fill and completion rings.
//
// The socket starts with its fill ring full, so the kernel can deliver as
// soon as an XDP program redirects to it (see Program.Register).
func NewSocket(u *UMEM, ifindex, queue int, cfg SocketConfig) (_ *Socket, err error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if queue < 0 {
		return nil, invalid("queue", queue, "must not be negative")
	}
	fd, shared, err := u.socketFD()
	if err != nil {
		return nil, err
	}
	s := &Socket{fd: fd, eventFD: -1, umem: u, ifindex: ifindex, queue: queue, cfg: cfg}
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
	set := func(opt, v int, what string) error {
		if err := setsockoptInt(fd, unix.SOL_XDP, opt, v); err != nil {
			return fmt.Errorf("set %s to %d: %w", what, v, err)
		}
		return nil
	}
	if err := set(unix.XDP_UMEM_FILL_RING, cfg.FillRingSize, "fill ring size"); err != nil {
		return nil, err
	}
	if err := set(unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionRingSize, "completion ring size"); err != nil {
		return nil, err
	}
	if !cfg.NoRX {
		if err := set(unix.XDP_RX_RING, cfg.RxRingSize, "RX ring size"); err != nil {
			return nil, err
		}
	}
	if !cfg.NoTX {
		if err := set(unix.XDP_TX_RING, cfg.TxRingSize, "TX ring size"); err != nil {
			return nil, err
		}
	}
	off, err := getMmapOffsets(fd)
	if err != nil {
		return nil, err
	}
	mem, err := mmapRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.fr, uint32(cfg.FillRingSize), 8)
	if err != nil {
		return nil, fmt.Errorf("map fill ring: %w", err)
	}
	s.fill = newAddrRing(mem, off.fr, uint32(cfg.FillRingSize), true)
	mem, err = mmapRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.cr, uint32(cfg.CompletionRingSize), 8)
	if err != nil {
		return nil, fmt.Errorf("map completion ring: %w", err)
	}
	s.comp = newAddrRing(mem, off.cr, uint32(cfg.CompletionRingSize), false)
	if !cfg.NoRX {
		mem, err = mmapRing(fd, unix.XDP_PGOFF_RX_RING, off.rx, uint32(cfg.RxRingSize), unsafe.Sizeof(Desc{}))
		if err != nil {
			return nil, fmt.Errorf("map RX ring: %w", err)
		}
		s.rx = newDescRing(mem, off.rx, uint32(cfg.RxRingSize), false)
	}
	if !cfg.NoTX {
		mem, err = mmapRing(fd, unix.XDP_PGOFF_TX_RING, off.tx, uint32(cfg.TxRingSize), unsafe.Sizeof(Desc{}))
		if err != nil {
			return nil, fmt.Errorf("map TX ring: %w", err)
		}
		s.tx = newDescRing(mem, off.tx, uint32(cfg.TxRingSize), true)
		if cfg.TxBudget > 0 {
			b := min(cfg.TxBudget, cfg.TxRingSize)
			// Best effort: older kernels lack the option and keep 32.
			setsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, b)
		}
	}
	if cfg.BusyPoll.Timeout > 0 {
		if err := s.setBusyPoll(); err != nil {
			return nil, err
		}
	}

	s.pool.init(u, u.takeFrames(cfg.Frames))
	s.owned = s.pool.len()
	if s.pool.len() == 0 {
		return nil, invalid("frames", cfg.Frames, fmt.Sprintf("the UMEM (%d frames) has none left for this socket", u.cfg.NumFrames))
	}
	// Fill before bind so the first packet finds a buffer.
	if !cfg.NoRX {
		s.refill()
	}

	sa := &unix.SockaddrXDP{Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if shared {
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(u.fd)
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
	if err := bindRetry(fd, sa); err != nil {
		return nil, bindError(err, cfg, shared)
	}
	opt, err := getsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS)
	if err == nil {
		s.zeroCopy = opt&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return s, nil
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
		case cfg.Bind == BindZeroCopy:
			what = "zero-copy"
		case cfg.MultiBuffer:
			what = "multi-buffer (XDP_USE_SG)"
		}
		return fmt.Errorf("bind: the driver does not support %s: %w: %w", what, ErrNotSupported, err)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("bind: another AF_XDP socket is bound to this queue: %w: %w", ErrBusy, err)
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

// FD returns the socket's file descriptor, for an XSKMAP or poll set.
func (s *Socket) FD() int { return s.fd }

// Queue returns the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// Ifindex returns the interface index the socket is bound to.
func (s *Socket) Ifindex() int { return s.ifindex }

// ZeroCopy reports whether the kernel granted zero-copy mode
// (XDP_OPTIONS_ZEROCOPY).
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// UMEM returns the region the socket's frames live in.
func (s *Socket) UMEM() *UMEM { return s.umem }

// NewBatch returns a batch that can hold up to n descriptors, for use with
// this socket (and others on the same UMEM).
func (s *Socket) NewBatch(n int) *Batch {
	return &Batch{descs: make([]Desc, 0, n), umem: s.umem}
}

// refill moves frames from the pool into the fill ring, as many as fit.
func (s *Socket) refill() {
	if s.fill == nil {
		return
	}
	n := uint32(s.pool.len())
	if n == 0 {
		return
	}
	free := s.fill.prodFree(n)
	if free < n {
		n = free
	}
	if n == 0 {
		return
	}
	r := s.fill
	idx := r.cachedProd
	for i := uint32(0); i < n; i++ {
		r.ring[(idx+i)&r.mask] = s.pool.get()
	}
	r.cachedProd = idx + n
	r.prodSubmit()
	s.inFill += int64(n)
}

// Receive appends received descriptors to b, up to its capacity, and
// returns how many it added. It does not block. With multi-buffer, it
// returns only whole packets: a packet whose fragments do not all fit, or
// have not all arrived, stays in the ring for the next call.
//
// The frames belong to the application until Release, Transmit or Free.
func (s *Socket) Receive(b *Batch) int {
	if s.rx == nil {
		return 0
	}
	room := uint32(cap(b.descs) - len(b.descs))
	if room == 0 {
		return 0
	}
	r := s.rx
	n := r.consAvail(room)
	if n == 0 {
		s.wakeRX()
		return 0
	}
	if n > room {
		n = room
	}
	idx := r.cachedCons
	if s.cfg.MultiBuffer {
		// Stop after the last descriptor that ends a packet.
		for n > 0 && r.ring[(idx+n-1)&r.mask].Options&OptContinues != 0 {
			n--
		}
		if n == 0 {
			return 0
		}
	}
	u := s.umem
	var bytes uint64
	got := 0
	for i := uint32(0); i < n; i++ {
		d := r.ring[(idx+i)&r.mask]
		if u.cfg.Unaligned {
			d.Addr = (d.Addr & unalignedAddrMask) + d.Addr>>unalignedOffsetShift
		}
		if !u.validRX(d.Addr, d.Len) {
			// The kernel handed us an address outside the UMEM: count it
			// and never slice it. The frame it names is lost to us.
			s.ctr.rxBadDescs.Add(1)
			s.inFill--
			continue
		}
		b.descs = append(b.descs, d)
		bytes += uint64(d.Len)
		got++
	}
	r.cachedCons = idx + n
	r.consRelease()
	s.inFill -= int64(got)
	s.inApp += int64(got)
	s.ctr.rxFrames.Add(uint64(got))
	s.ctr.rxBytes.Add(bytes)
	return got
}

// wakeRX lets the kernel make RX progress when it asked for a wake-up
// (zero-copy drivers pause when the fill ring ran dry) or when busy polling.
func (s *Socket) wakeRX() {
	if s.cfg.BusyPoll.Timeout > 0 || (s.fill != nil && !s.cfg.DisableNeedWakeup && s.fill.needWakeup()) {
		s.ctr.wakeups.Add(1)
		unix.Recvfrom(s.fd, nil, unix.MSG_DONTWAIT)
	}
}

// Release gives the frames of b back to the kernel through the fill ring
// (those that do not fit go to the pool) and empties b. Use it for received
// frames the application is done with.
func (s *Socket) Release(b *Batch) {
	n := len(b.descs)
	if n == 0 {
		return
	}
	if b.umem != s.umem {
		panic("xsk: Release of a batch from another UMEM")
	}
	s.inApp -= int64(n)
	if s.fill == nil {
		for _, d := range b.descs {
			s.pool.put(s.umem.frameBase(d.Addr))
		}
		b.descs = b.descs[:0]
		return
	}
	r := s.fill
	free := r.prodFree(uint32(n))
	k := uint32(min(uint32(n), free))
	idx := r.cachedProd
	u := s.umem
	for i := uint32(0); i < k; i++ {
		r.ring[(idx+i)&r.mask] = u.frameBase(b.descs[i].Addr)
	}
	r.cachedProd = idx + k
	r.prodSubmit()
	s.inFill += int64(k)
	for _, d := range b.descs[k:] {
		s.pool.put(u.frameBase(d.Addr))
	}
	b.descs = b.descs[:0]
	if s.pool.len() > 0 {
		s.refill()
	}
}

// Free returns the frames of b to this socket's pool without handing them
// to the kernel, and empties b. Use it for TX frames that will not be sent.
func (s *Socket) Free(b *Batch) {
	s.inApp -= int64(len(b.descs))
	for _, d := range b.descs {
		s.pool.put(s.umem.frameBase(d.Addr))
	}
	b.descs = b.descs[:0]
}

// Alloc appends up to n free frames to b for transmission, reclaiming
// completed TX frames first when the pool runs short, and returns how many
// it added. Each new descriptor has Len 0: write into b.Buffer(i) and set
// the length with b.SetLen(i, n).
func (s *Socket) Alloc(b *Batch, n int) int {
	n = min(n, cap(b.descs)-len(b.descs))
	if s.pool.len() < n {
		s.Complete()
	}
	n = min(n, s.pool.len())
	off := s.umem.txOffset
	for i := 0; i < n; i++ {
		b.descs = append(b.descs, Desc{Addr: s.pool.get() + off})
	}
	s.inApp += int64(n)
	return n
}

// Transmit puts the descriptors of b on the TX ring, kicks the kernel if it
// asked for it (or always, without need_wakeup), and returns how many it
// took. They leave b; descriptors that did not fit stay in b, in order, for
// a later call. Frames received on any socket of the same UMEM may be
// transmitted as they are (forwarding without a copy).
//
// A kick error that is transient (EAGAIN, EBUSY, ENOBUFS: the kernel is
// still working through earlier frames) is absorbed; errors that need
// attention (ENETDOWN, ENXIO, EINVAL) are returned, with the frames already
// on the ring.
func (s *Socket) Transmit(b *Batch) (int, error) {
	if s.tx == nil {
		return 0, fmt.Errorf("transmit: socket has no TX ring: %w", ErrInvalidConfig)
	}
	if b.umem != s.umem {
		return 0, fmt.Errorf("transmit: batch belongs to another UMEM: %w", ErrInvalidConfig)
	}
	want := uint32(len(b.descs))
	if want == 0 {
		// Kick only if frames wait on the ring for the kernel.
		if s.tx.cachedProd != atomic.LoadUint32(s.tx.consumer) {
			return 0, s.kickIfNeeded()
		}
		return 0, nil
	}
	r := s.tx
	free := r.prodFree(want)
	n := min(want, free)
	if s.cfg.MultiBuffer {
		// Never leave half a packet on the ring.
		for n > 0 && b.descs[n-1].Options&OptContinues != 0 {
			n--
		}
	}
	if n < want {
		s.ctr.txRingFull.Add(1)
	}
	idx := r.cachedProd
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		d := b.descs[i]
		r.ring[(idx+i)&r.mask] = d
		bytes += uint64(d.Len)
	}
	r.cachedProd = idx + n
	if n > 0 {
		r.prodSubmit()
	}
	rest := copy(b.descs, b.descs[n:])
	b.descs = b.descs[:rest]
	s.inApp -= int64(n)
	s.inTx += int64(n)
	s.ctr.txFrames.Add(uint64(n))
	s.ctr.txBytes.Add(bytes)
	return int(n), s.kickIfNeeded()
}

// Kick wakes the kernel to process the TX ring now, whether or not it
// asked for it.
func (s *Socket) Kick() error { return s.kick() }

func (s *Socket) kickIfNeeded() error {
	if s.tx == nil {
		return nil
	}
	if s.cfg.DisableNeedWakeup || s.cfg.BusyPoll.Timeout > 0 || s.tx.needWakeup() {
		return s.kick()
	}
	return nil
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
		return &OpError{Op: "transmit on", Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("interface is down: %w", e)}
	case unix.ENXIO:
		return &OpError{Op: "transmit on", Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("device gone: %w: %w", ErrNoDevice, e)}
	}
	return &OpError{Op: "transmit on", Ifindex: s.ifindex, Queue: s.queue, Err: e}
}

// Complete reclaims frames the kernel has finished sending from the
// completion ring into the pool and returns how many. If frames still wait
// on the TX ring and the kernel asks for a wake-up (copy mode sends only a
// budget of frames per kick), it kicks again, so a caller that just loops
// on Complete drains the ring.
func (s *Socket) Complete() int {
	r := s.comp
	n := r.consAvail(r.size)
	if s.tx != nil && s.inTx > int64(n) && s.tx.cachedProd != atomic.LoadUint32(s.tx.consumer) {
		s.kickIfNeeded()
	}
	if n == 0 {
		return 0
	}
	idx := r.cachedCons
	u := s.umem
	for i := uint32(0); i < n; i++ {
		addr := r.ring[(idx+i)&r.mask]
		if u.cfg.Unaligned {
			addr &= unalignedAddrMask
		}
		if addr >= u.size {
			s.ctr.rxBadDescs.Add(1)
			continue
		}
		s.pool.put(u.frameBase(addr))
	}
	r.cachedCons = idx + n
	r.consRelease()
	s.inTx -= int64(n)
	return int(n)
}

// TxPending returns how many transmitted frames have not come back through
// the completion ring yet.
func (s *Socket) TxPending() int { return int(s.inTx) }

// Wait blocks until the RX ring has descriptors (or, with tx set, the TX
// ring has room or completions arrived), the timeout passes, or Close is
// called. A negative timeout waits without limit. It reports whether the
// socket is ready; after Close it returns ErrClosed.
func (s *Socket) Wait(timeout time.Duration, tx bool) (bool, error) {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.closed.Load() {
		return false, ErrClosed
	}
	if s.rx != nil && s.rx.consAvail(1) > 0 {
		return true, nil
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
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	s.ctr.polls.Add(1)
	for {
		n, err := unix.Ppoll(fds, ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		if fds[1].Revents != 0 || s.closed.Load() {
			return false, ErrClosed
		}
		if n == 0 {
			return false, nil
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			return false, &OpError{Op: "poll", Ifindex: s.ifindex, Queue: s.queue, Err: fmt.Errorf("socket error (revents %#x)", fds[0].Revents)}
		}
		return true, nil
	}
}

// Close unbinds the socket (the kernel drops it from any XSKMAP), unmaps
// its rings and gives its frames back. It may be called from another
// goroutine to unblock Wait; the owning goroutine must not call anything
// else on the socket afterwards.
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
	s.teardown()
	return nil
}

func (s *Socket) teardown() {
	for _, m := range []*ringHeader{ringOf(s.rx), ringOf(s.tx), addrOf(s.fill), addrOf(s.comp)} {
		if m != nil && m.mem != nil {
			unix.Munmap(m.mem)
			m.mem = nil
		}
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

func ringOf(r *descRing) *ringHeader {
	if r == nil {
		return nil
	}
	return &r.ringHeader
}

func addrOf(r *addrRing) *ringHeader {
	if r == nil {
		return nil
	}
	return &r.ringHeader
}
