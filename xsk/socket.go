package xsk

import (
	"fmt"
	"sync/atomic"
)

// Socket is an AF_XDP socket bound to one queue of one interface.
//
// A Socket must not be used concurrently: one goroutine owns it and its
// rings. Close and Stats are the exceptions and may be called from any
// goroutine at any time; Close wakes a blocked Wait or Sleep and waits for
// a call in progress to finish.
type Socket struct {
	fd       int
	eventFD  int // written by Close to wake a blocked poll
	umem     *UMEM
	ifindex  int
	ifname   string // the device's name when the socket was made, for errors
	queue    int
	zeroCopy bool
	cfg      SocketConfig

	rx   *rxRing
	tx   *txRing
	fill *fillRing
	comp *completionRing

	// rxPool feeds the fill ring and takes released frames; txPool gives
	// Alloc its frames and takes completed and freed ones. They are one
	// pool unless SocketConfig.TXFrames set TX frames apart (split), so
	// that the RX side and the TX side can run on two goroutines.
	rxPool, txPool *framePool
	split          bool
	// reserve is how many frames feeding the fill ring leaves in a shared
	// pool for Alloc: half the socket's frames when it has both rings.
	reserve int

	// txLen records the length of every frame on the TX ring, by frame
	// number, so completions count bytes actually sent.
	txLen []uint32

	// frame accounting: frames given to the kernel through the fill ring
	// and not yet received (RX side); frames on the TX ring not yet
	// completed (TX side); frames the application holds, taken through
	// the RX side (Receive) and the TX side (Alloc). Frames a Transmit
	// takes from a received batch make appTX negative and appRX too high
	// by as much: only the sum means anything.
	inFill, inTX, appRX, appTX int64
	owned                      int
	txHeld                     bool // Submit left frames on the TX ring for Flush

	// pub mirrors the frame accounting for readers on other goroutines
	// (Stats): stored once per operation, plain moves on x86-64.
	pub struct{ freeRX, freeTX, fill, tx, appRX, appTX atomic.Int64 }

	// gone is the error that ends the socket's life with its device
	// (ErrNoDevice), once noticed; fatalProbe paces the look at SO_ERROR
	// by a TX side that spins without waiting.
	gone       atomic.Pointer[error]
	fatalProbe uint32
	// prog is the Program the socket is registered with, whose detach
	// its RX waits look for (Program.Err).
	prog atomic.Pointer[Program]

	ctr counters

	// rxFlowing is set when Receive got frames and cleared when an RX nap
	// found none (owner goroutine only): Wait naps only while it is set.
	rxFlowing bool

	// napiID is the NAPI a busy poll drives, once the kernel recorded one;
	// napiProbe counts calls between looks. Both sides of a socket with
	// a TX pool of its own may busy-poll, hence the atomics.
	napiID    atomic.Int32
	napiProbe atomic.Uint32

	busy   atomic.Int32
	closed atomic.Bool
	// final is what Stats returns after Close: the counters Close read
	// before it closed the descriptor; closeDone is closed once it did.
	final     atomic.Pointer[Stats]
	closeDone chan struct{}
}

type counters struct {
	rxFrames, rxBytes, txFrames, txBytes atomic.Uint64
	txSubmitted, txSubmittedBytes        atomic.Uint64
	kicks, kickErrors, polls, wakeups    atomic.Uint64
	naps, linkDown                       atomic.Uint64
	rxBadDescs, txRingFull               atomic.Uint64
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
// this socket (and others on the same UMEM). On a multi-buffer socket the
// capacity is at least MaxFragments, so that the largest packet the kernel
// can deliver fits in one batch (Receive returns whole packets only).
func (s *Socket) NewBatch(n int) *Batch {
	if s.cfg.MultiBuffer {
		n = max(n, MaxFragments)
	}
	return &Batch{descs: make([]Desc, 0, max(n, 1)), umem: s.umem}
}

// enter marks a call in progress, so that Close from another goroutine
// waits for it before unmapping the rings; it reports false after Close.
// The increment comes before the check and Close sets its flag before it
// looks at the count, so one of the two always sees the other.
func (s *Socket) enter() bool {
	s.busy.Add(1)
	if s.closed.Load() {
		s.busy.Add(-1)
		return false
	}
	return true
}

func (s *Socket) leave() { s.busy.Add(-1) }

// Receive appends received descriptors to b, up to its capacity, and
// returns how many it added. It does not block. With multi-buffer, it
// returns only whole packets: a packet whose fragments do not all fit, or
// have not all arrived, stays in the ring for the next call.
//
// Before it looks at the RX ring it lends the kernel what the fill ring
// has room for from the socket's pool (see "Who feeds the fill ring" in
// the package documentation).
//
// The frames belong to the application until Release, Transmit or Free.
func (s *Socket) Receive(b *Batch) int {
	if !s.enter() {
		return 0
	}
	defer s.leave()
	return s.receive(b)
}

// Release gives the frames of b back to the kernel through the fill ring
// (those that do not fit go to the pool) and empties b. Use it for received
// frames the application is done with.
func (s *Socket) Release(b *Batch) {
	if !s.enter() {
		b.descs = b.descs[:0]
		return
	}
	defer s.leave()
	s.release(b)
}

// Free returns the frames of b to this socket's pool without handing them
// to the kernel, and empties b. Use it for TX frames that will not be sent.
// (Received frames freed this way are lent to the kernel again by the
// next Receive, unless SocketConfig.TXFrames keeps a TX pool apart: then
// they join the TX pool.)
func (s *Socket) Free(b *Batch) {
	if !s.enter() {
		b.descs = b.descs[:0]
		return
	}
	defer s.leave()
	s.free(b)
}

// FreeTail returns the descriptors of b from index from on to this
// socket's pool, as Free does, and keeps the first from in b: for frames
// allocated for a packet that will not be sent after all.
func (s *Socket) FreeTail(b *Batch, from int) {
	if from < 0 || from >= len(b.descs) {
		return
	}
	tail := Batch{descs: b.descs[from:], umem: b.umem}
	b.descs = b.descs[:from]
	if !s.enter() {
		return
	}
	defer s.leave()
	s.free(&tail)
}

// Alloc appends up to n free frames to b for transmission, reclaiming
// completed TX frames first, and returns how many it added. Each new
// descriptor has Len 0: write into b.Buffer(i) and set the length with
// b.SetLen(i, n).
//
// Reclaiming first matters for speed, not only for room: the pool is a
// stack, so frames that just completed (still in the CPU cache) are the
// ones handed out again, instead of cold frames from across the UMEM.
func (s *Socket) Alloc(b *Batch, n int) int {
	if !s.enter() {
		return 0
	}
	defer s.leave()
	return s.alloc(b, n)
}

// Transmit puts the descriptors of b on the TX ring, kicks the kernel if it
// asked for it (or always, without need_wakeup), and returns how many it
// took. They leave b; descriptors that did not fit stay in b, in order, for
// a later call. Frames received on any socket of the same UMEM may be
// transmitted as they are (forwarding without a copy).
//
// A kick error that is transient (EAGAIN, EBUSY, ENOBUFS: the kernel is
// still working through earlier frames) is absorbed. A link that is down
// returns an error matching ErrLinkDown at once, with the frames left on
// the ring: they leave when the link is up again and a later Transmit,
// Flush or Kick wakes the kernel, so a sender that retries (after a
// pause) resumes by itself. A device that is gone returns an error
// matching ErrNoDevice, now and on every later call. A descriptor that
// does not lie inside one frame of the UMEM (a bad Append) is refused
// with ErrInvalidConfig before anything of b reaches the ring.
func (s *Socket) Transmit(b *Batch) (int, error) {
	if !s.enter() {
		return 0, ErrClosed
	}
	defer s.leave()
	return s.transmit(b)
}

// Submit puts the descriptors of b on the TX ring like Transmit, but does
// not wake the kernel: the frames wait on the ring until Flush, Transmit or
// Kick, so that one syscall can send several batches (see package
// coalesce). With need_wakeup off, or in zero-copy mode where the driver
// polls the ring by itself, frames may still leave before Flush.
func (s *Socket) Submit(b *Batch) (int, error) {
	if !s.enter() {
		return 0, ErrClosed
	}
	defer s.leave()
	return s.submit(b)
}

// Flush wakes the kernel for frames waiting on the TX ring, if any wait
// and the kernel asks for a wake-up. Its errors are Transmit's.
func (s *Socket) Flush() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.goneErr(); err != nil {
		return err
	}
	return s.flush()
}

// Kick wakes the kernel to process the TX ring now, whether or not it
// asked for it. Its errors are Transmit's.
func (s *Socket) Kick() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.goneErr(); err != nil {
		return err
	}
	return s.kickNow()
}

// Complete reclaims frames the kernel has finished sending from the
// completion ring into the pool and returns how many; Stats counts them
// as sent (TXFrames) only now. If frames still wait on the TX ring and
// the kernel asks for a wake-up (copy mode sends only a budget of frames
// per kick), it kicks again, so a caller that just loops on Complete
// drains the ring. Frames put there with Submit are left alone until
// Flush. Without SocketConfig.TXFrames, the reclaimed frames are lent to
// the fill ring as far as it has room, so a forwarder's frames go round.
func (s *Socket) Complete() int {
	if !s.enter() {
		return 0
	}
	defer s.leave()
	n := s.complete()
	if n > 0 && !s.split && s.rx != nil && s.feed() {
		s.publishRX()
	}
	return n
}

// publishRX makes the RX side's frame accounting visible to Stats on
// other goroutines; publishTX the TX side's. Without a TX pool of its own
// the socket's one pool is published as the RX side's.
func (s *Socket) publishRX() {
	s.pub.freeRX.Store(int64(s.rxPool.len()))
	s.pub.fill.Store(s.inFill)
	s.pub.appRX.Store(s.appRX)
}

func (s *Socket) publishTX() {
	if s.split {
		s.pub.freeTX.Store(int64(s.txPool.len()))
	} else {
		s.pub.freeRX.Store(int64(s.txPool.len()))
	}
	s.pub.tx.Store(s.inTX)
	s.pub.appTX.Store(s.appTX)
}

// feed lends the kernel frames from the RX pool, as many as the fill ring
// has room for, and reports whether it lent any. The kernel's consumer
// index is read only when the cached view has less room than the pool has
// frames. The caller publishes.
func (s *Socket) feed() bool {
	p := s.rxPool
	if p.len() <= s.reserve || s.rx == nil {
		return false
	}
	n := uint32(p.len() - s.reserve)
	r := s.fill
	n = min(n, r.prodFree(n))
	if n == 0 {
		return false
	}
	idx := r.cachedProd
	for i := uint32(0); i < n; i++ {
		r.ring[(idx+i)&r.mask] = p.get()
	}
	r.cachedProd = idx + n
	r.prodSubmit()
	s.inFill += int64(n)
	return true
}

func (s *Socket) receive(b *Batch) int {
	if s.rx == nil {
		return 0
	}
	fed := s.feed()
	room := uint32(cap(b.descs) - len(b.descs))
	if room == 0 {
		if fed {
			s.publishRX()
		}
		return 0
	}
	r := s.rx
	n := r.consAvail(room)
	if n == 0 {
		if !s.wakeRX() {
			if fed {
				s.publishRX()
			}
			return 0
		}
		// A busy poll just ran the driver: take what it delivered.
		if n = r.consAvail(room); n == 0 {
			if fed {
				s.publishRX()
			}
			return 0
		}
	}
	if n > room {
		n = room
	}
	idx := r.cachedCons
	if s.cfg.MultiBuffer {
		// Stop after the last descriptor that ends a packet.
		if n = r.wholePackets(n); n == 0 {
			if fed {
				s.publishRX()
			}
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
	s.rxFlowing = true
	s.inFill -= int64(got)
	s.appRX += int64(got)
	s.publishRX()
	s.ctr.rxFrames.Add(uint64(got))
	s.ctr.rxBytes.Add(bytes)
	return got
}

func (s *Socket) release(b *Batch) {
	n := len(b.descs)
	if n == 0 {
		return
	}
	if b.umem != s.umem {
		panic("xsk: Release of a batch from another UMEM")
	}
	s.appRX -= int64(n)
	u := s.umem
	if s.rx == nil {
		// No RX ring: nothing is lent to the kernel.
		for _, d := range b.descs {
			s.rxPool.put(u.frameBase(d.Addr))
		}
		b.descs = b.descs[:0]
		s.publishRX()
		return
	}
	// The kernel's consumer index is read only when the cached view has no
	// room for this batch: it sits on a cache line the kernel writes.
	r := s.fill
	free := r.prodFree(uint32(n))
	k := min(uint32(n), free)
	idx := r.cachedProd
	for i := uint32(0); i < k; i++ {
		r.ring[(idx+i)&r.mask] = u.frameBase(b.descs[i].Addr)
	}
	// Top the ring up from the pool with what room is left, in the same
	// submission.
	p := s.rxPool
	extra := min(free-k, uint32(max(0, p.len()-s.reserve)))
	for i := uint32(0); i < extra; i++ {
		r.ring[(idx+k+i)&r.mask] = p.get()
	}
	r.cachedProd = idx + k + extra
	r.prodSubmit()
	s.inFill += int64(k + extra)
	for _, d := range b.descs[k:] {
		p.put(u.frameBase(d.Addr))
	}
	b.descs = b.descs[:0]
	s.publishRX()
}

func (s *Socket) free(b *Batch) {
	s.appTX -= int64(len(b.descs))
	for _, d := range b.descs {
		s.txPool.put(s.umem.frameBase(d.Addr))
	}
	b.descs = b.descs[:0]
	s.publishTX()
}

func (s *Socket) alloc(b *Batch, n int) int {
	n = min(n, cap(b.descs)-len(b.descs))
	if s.tx != nil {
		s.complete()
	}
	p := s.txPool
	n = min(n, p.len())
	off := s.umem.txOffset
	for i := 0; i < n; i++ {
		b.descs = append(b.descs, Desc{Addr: p.get() + off})
	}
	s.appTX += int64(n)
	s.publishTX()
	return n
}

func (s *Socket) transmit(b *Batch) (int, error) {
	n, err := s.submit(b)
	if err != nil {
		return n, err
	}
	return n, s.flush()
}

func (s *Socket) submit(b *Batch) (int, error) {
	if s.tx == nil {
		return 0, fmt.Errorf("transmit: socket has no TX ring: %w", ErrInvalidConfig)
	}
	if b.umem != s.umem {
		return 0, fmt.Errorf("transmit: batch belongs to another UMEM: %w", ErrInvalidConfig)
	}
	if err := s.goneErr(); err != nil {
		return 0, err
	}
	want := uint32(len(b.descs))
	if want == 0 {
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
	if n == 0 {
		return 0, nil
	}
	u := s.umem
	for i, d := range b.descs[:n] {
		if !u.validTX(d.Addr, d.Len) {
			return 0, fmt.Errorf("transmit: descriptor %d (addr %#x, len %d) does not lie inside one frame of the UMEM: %w", i, d.Addr, d.Len, ErrInvalidConfig)
		}
	}
	idx := r.cachedProd
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		d := b.descs[i]
		r.ring[(idx+i)&r.mask] = d
		if f := u.frameIndex(d.Addr); f < uint64(len(s.txLen)) {
			s.txLen[f] = d.Len
		}
		bytes += uint64(d.Len)
	}
	r.cachedProd = idx + n
	r.prodSubmit()
	rest := copy(b.descs, b.descs[n:])
	b.descs = b.descs[:rest]
	s.appTX -= int64(n)
	s.inTX += int64(n)
	s.publishTX()
	s.txHeld = true
	s.ctr.txSubmitted.Add(uint64(n))
	s.ctr.txSubmittedBytes.Add(bytes)
	return int(n), nil
}

func (s *Socket) flush() error {
	if s.tx == nil {
		return nil
	}
	s.txHeld = false
	if !s.tx.unsent() {
		return nil
	}
	return s.kickIfNeeded()
}

func (s *Socket) kickNow() error {
	s.txHeld = false
	return s.kick()
}

func (s *Socket) kickIfNeeded() error {
	if s.tx == nil {
		return nil
	}
	if s.cfg.DisableNeedWakeup || s.busyPolling() || s.tx.needWakeup() {
		return s.kick()
	}
	return nil
}

// fatalProbeEvery paces how often a TX side whose frames make no progress
// asks the kernel whether the device is gone.
const fatalProbeEvery = 4096

// complete reclaims the completion ring into the TX pool and counts the
// frames (and their bytes) as sent.
func (s *Socket) complete() int {
	r := s.comp
	n := r.consAvail(r.size)
	if s.tx != nil && !s.txHeld && s.inTX > int64(n) && s.tx.unsent() {
		s.kickIfNeeded()
	}
	if n == 0 {
		if s.inTX > 0 {
			// A sender that spins on Complete without ever waiting must
			// still learn that the device went away.
			if s.fatalProbe++; s.fatalProbe%fatalProbeEvery == 0 {
				s.probeGone()
			}
		}
		return 0
	}
	idx := r.cachedCons
	u := s.umem
	p := s.txPool
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		addr := r.ring[(idx+i)&r.mask]
		if u.cfg.Unaligned {
			addr &= unalignedAddrMask
		}
		if addr >= u.size {
			s.ctr.rxBadDescs.Add(1)
			continue
		}
		if f := u.frameIndex(addr); f < uint64(len(s.txLen)) {
			bytes += uint64(s.txLen[f])
		}
		p.put(u.frameBase(addr))
	}
	r.cachedCons = idx + n
	r.consRelease()
	s.inTX -= int64(n)
	s.publishTX()
	s.ctr.txFrames.Add(uint64(n))
	s.ctr.txBytes.Add(bytes)
	return int(n)
}

// goneErr returns the error that ended the socket with its device, once
// noticed, or nil.
func (s *Socket) goneErr() error {
	if p := s.gone.Load(); p != nil {
		return *p
	}
	return nil
}

// setGone records that the kernel unbound the socket because its device
// went away (cause is the errno that told), and returns the error every
// later call reports.
func (s *Socket) setGone(cause error) error {
	var err error = &OpError{Op: "socket on", Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.queue,
		Err: fmt.Errorf("the device is gone (deleted, or its network namespace removed): %w: %w", ErrNoDevice, cause)}
	s.gone.CompareAndSwap(nil, &err)
	return *s.gone.Load()
}

// Closed reports whether Close was called.
func (s *Socket) Closed() bool { return s.closed.Load() }

// Err returns the error that ended the socket's use without Close: one
// matching ErrNoDevice when the kernel unbound the socket because its
// device went away. It asks the kernel (a getsockopt) unless the library
// already knows. Wait, Poller.WaitRX and the TX calls return the same
// error; Receive, which reports only a count, finds nothing more. Err may
// be called from any goroutine; after Close it returns ErrClosed.
func (s *Socket) Err() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.probeGone()
}

// TXPending returns how many transmitted frames have not come back through
// the completion ring yet.
func (s *Socket) TXPending() int { return int(s.inTX) }
