//go:build linux

package xsk

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Receive runs h on every batch the device's sockets receive until ctx is
// done, then returns nil. It returns early with the first error a socket
// meets: ErrClosed when the device is closed under it, an error matching
// ErrNoDevice within about a second of the device going away. It is the
// receive loop the package recommends: it picks the shape
// (RunConfig.Shape), hands h batches of up to RunConfig.Batch frames,
// gives the frames back to the kernel after h, keeps the fill rings fed,
// reclaims frames h transmitted, and naps NAPI style while traffic is
// heavy (RunConfig.Nap), polling with no timer while it is light.
//
// Receive owns the sockets while it runs: nothing else may use them until
// it returns.
func (d *Device) Receive(ctx context.Context, cfg RunConfig, h Handler) error {
	rc, err := cfg.withDefaults(64)
	if err != nil {
		return err
	}
	if h == nil {
		return invalid("Receive handler", "nil", "want a function")
	}
	return d.run(ctx, rc, false, func(r *runner, socks []*Socket) error {
		if len(socks) == 1 && rc.BusyPoll.Timeout == 0 {
			return r.receiveOne(socks[0], h)
		}
		return r.receivePoller(socks, h)
	})
}

// Send runs f to fill batches of frames and sends them on every socket of
// the device until each socket's filler returned ErrStop or ctx is done,
// and returns nil once what was sent has completed (or after a second,
// for frames the kernel still holds). Sockets opened without
// SocketConfig.TXBudget get a TX budget of one batch, so that one kick
// sends a batch in copy mode. It returns early with the first
// error a filler or socket returns other than ErrStop. A link that is
// down is waited out: frames stay on the TX rings and sending resumes
// when it is up (RunConfig.LinkChange tells). It reclaims completions
// ahead of every allocation and kicks the kernel once per batch.
//
// Send owns the sockets while it runs.
func (d *Device) Send(ctx context.Context, cfg RunConfig, f Filler) error {
	rc, err := cfg.withDefaults(256)
	if err != nil {
		return err
	}
	if f == nil {
		return invalid("Send filler", "nil", "want a function")
	}
	return d.run(ctx, rc, true, func(r *runner, socks []*Socket) error {
		return r.send(socks, f)
	})
}

// runner is one Receive or Send in progress.
type runner struct {
	rc      RunConfig
	stopped atomic.Bool // ctx is done or a sibling failed
}

// run spreads the device's sockets with an RX ring (with tx, a TX ring)
// over goroutines by the configured shape and runs loop on each share,
// ending all of them at the first error.
func (d *Device) run(ctx context.Context, rc RunConfig, tx bool, loop func(*runner, []*Socket) error) error {
	all, ok := d.startRun()
	if !ok {
		return ErrClosed
	}
	defer d.endRun()
	var socks []*Socket
	for _, s := range all {
		if tx && s.tx != nil || !tx && s.rx != nil {
			socks = append(socks, s)
		}
	}
	if len(socks) == 0 {
		ring := map[bool]string{false: "RX", true: "TX"}[tx]
		return invalid("runner sockets", 0, "the device has no socket with a "+ring+" ring (open it with "+ring+" rings)")
	}
	r := &runner{rc: rc}
	stop := func() {
		if r.stopped.Swap(true) {
			return
		}
		for _, s := range socks {
			s.interrupt()
		}
	}
	unhook := context.AfterFunc(ctx, stop)
	defer unhook()
	defer func() {
		for _, s := range socks {
			s.clearInterrupt()
		}
	}()
	if ctx.Err() != nil {
		return nil
	}
	// Sockets are dealt round-robin to the goroutines.
	shares := make([][]*Socket, goroutines(rc.Shape, len(socks), tx))
	for i, s := range socks {
		shares[i%len(shares)] = append(shares[i%len(shares)], s)
	}
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	for i, share := range shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := lockThread()
			defer unlock()
			if err := loop(r, share); err != nil {
				errs[i] = err
				stop()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// goroutines is how many goroutines serve n sockets in shape s. ShapeAuto
// counts the CPUs the process may use (GOMAXPROCS and its CPU set). A
// receiver leaves a CPU to the kernel's softirq work that fills its ring
// (in copy mode, that is where the copy into the UMEM happens): two CPUs
// per goroutine. A sender's kick does the kernel's work in its own
// syscall: one CPU per goroutine.
func goroutines(s Shape, n int, tx bool) int {
	switch s {
	case ShapeOne:
		return 1
	case ShapePerQueue:
		return n
	}
	cpus := min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	if !tx {
		cpus /= 2
	}
	return max(1, min(n, cpus))
}

// lockThread locks the goroutine to its thread and asks the kernel for
// timers that fire on time (a slack of 1 ns instead of 50 µs), since a
// nap of 20-100 µs must not become 70-150. It returns the undo.
func lockThread() func() {
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		runtime.UnlockOSThread()
	}
}

// handle runs h on a non-empty batch from s, gives back what h left in
// it and reclaims what h transmitted.
func handle(s *Socket, b *Batch, h Handler) {
	h(s, b)
	if b.Len() > 0 {
		s.Release(b)
	}
	if s.tx != nil && s.inTX > 0 {
		s.Complete()
	}
}

// receiveOne is the loop of a goroutine that owns one socket.
func (r *runner) receiveOne(s *Socket, h Handler) error {
	b := s.NewBatch(r.rc.Batch)
	nap := NewNapper(r.rc.Nap, s)
	for {
		n := s.Receive(b)
		if n > 0 {
			nap.Received(n)
			handle(s, b, h)
			if n == b.Cap() {
				continue
			}
		}
		if r.stopped.Load() {
			return nil
		}
		if s.Closed() {
			return ErrClosed
		}
		if n > 0 {
			continue
		}
		if d := nap.idle(time.Now()); d > 0 {
			s.ctr.naps.Add(1)
			if err := s.Sleep(d); err != nil {
				return err
			}
			continue
		}
		timeout := time.Duration(-1)
		if s.tx != nil && s.inTX > 0 {
			timeout = time.Millisecond // completions to reclaim
		}
		if _, err := s.Wait(timeout, false); err != nil {
			return err
		}
	}
}

// receivePoller is the loop of a goroutine that owns several sockets.
func (r *runner) receivePoller(socks []*Socket, h Handler) error {
	// A batch belongs to one UMEM: one per socket.
	bs := make([]*Batch, len(socks))
	for i, s := range socks {
		bs[i] = s.NewBatch(r.rc.Batch)
	}
	p := NewPoller(socks...)
	nap := NewNapper(r.rc.Nap, socks...)
	if r.rc.BusyPoll.Timeout != 0 {
		if err := p.BusyPoll(r.rc.BusyPoll); err != nil {
			return err
		}
		defer p.Close()
		nap = NewNapper(-1) // epoll_wait busy-polls instead
	}
	for {
		total, pending := 0, false
		for i, s := range socks {
			b := bs[i]
			// A full batch may mean more waits: take a few more turns
			// on this ring before the next one.
			for range 4 {
				n := s.Receive(b)
				if n == 0 {
					break
				}
				total += n
				handle(s, b, h)
				if n < b.Cap() {
					break
				}
			}
			pending = pending || (s.tx != nil && s.inTX > 0)
		}
		if r.stopped.Load() {
			return nil
		}
		if total > 0 {
			nap.Received(total)
			continue
		}
		if anyClosed(socks) {
			return ErrClosed
		}
		if d := nap.idle(time.Now()); d > 0 {
			for _, s := range socks {
				s.ctr.naps.Add(1)
			}
			if err := p.SleepShort(d); err != nil {
				return err
			}
			continue
		}
		timeout := time.Duration(-1)
		if pending {
			timeout = time.Millisecond
		}
		if _, err := p.WaitRX(timeout); err != nil {
			return err
		}
	}
}

// sender is the send side of one socket.
type sender struct {
	s         *Socket
	b, spare  *Batch
	down      bool // the link was down at the last Transmit
	stopAfter bool // the filler returned ErrStop: send what is left, then done
	done      bool
}

// send is the loop of a goroutine that owns the send side of socks.
func (r *runner) send(socks []*Socket, f Filler) error {
	ss := make([]*sender, len(socks))
	for i, s := range socks {
		// One kick per batch: in copy mode the kernel sends at most its
		// TX budget (32 by default) per kick. Best effort: kernels before
		// 6.17 lack the option.
		if s.cfg.TXBudget == 0 && s.enter() {
			setsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, min(r.rc.Batch, int(s.tx.mask+1)))
			s.leave()
		}
		ss[i] = &sender{s: s, b: s.NewBatch(r.rc.Batch), spare: s.NewBatch(r.rc.Batch)}
	}
	defer func() {
		for _, t := range ss {
			t.s.Free(t.b)
		}
		drain(socks, time.Second)
	}()
	return r.sendLoop(socks, ss, f)
}

func (r *runner) sendLoop(socks []*Socket, ss []*sender, f Filler) error {
	for {
		progress, live, allDown := false, 0, true
		for _, t := range ss {
			if t.done {
				continue
			}
			live++
			p, err := r.step(t, f)
			if err != nil {
				return err
			}
			progress = progress || p
			allDown = allDown && t.down
		}
		if live == 0 || r.stopped.Load() {
			return nil
		}
		if progress {
			continue
		}
		d := 20 * time.Microsecond
		if allDown {
			d = 10 * time.Millisecond
		}
		var err error
		if len(socks) == 1 {
			err = socks[0].Sleep(d)
		} else {
			err = sleepSocks(socks, d)
		}
		if err != nil {
			return err
		}
	}
}

// step moves one socket's sender on by one batch, if it can: it reports
// whether frames went out.
func (r *runner) step(t *sender, f Filler) (bool, error) {
	s := t.s
	if t.down {
		if err := s.Kick(); err != nil {
			if errors.Is(err, ErrLinkDown) {
				// A device being deleted goes down first: ask the
				// kernel whether the socket is still bound.
				return false, s.Err()
			}
			return false, err
		}
		t.down = false
		if r.rc.LinkChange != nil {
			r.rc.LinkChange(s, true)
		}
	}
	s.Complete()
	if t.b.Len() == 0 {
		if t.stopAfter {
			t.done = true
			return false, nil
		}
		if s.Alloc(t.b, r.rc.Batch) == 0 {
			if s.Closed() {
				return false, ErrClosed
			}
			if err := s.Err(); err != nil {
				return false, err
			}
			return false, nil
		}
		ferr := f(s, t.b)
		t.dropEmpty()
		switch {
		case errors.Is(ferr, ErrStop):
			t.stopAfter = true
		case ferr != nil:
			s.Free(t.b)
			return false, ferr
		}
		if t.b.Len() == 0 {
			return false, nil
		}
	}
	n, err := s.Transmit(t.b)
	if err != nil {
		if errors.Is(err, ErrLinkDown) {
			t.down = true
			if r.rc.LinkChange != nil {
				r.rc.LinkChange(s, false)
			}
			return n > 0, nil
		}
		return false, err
	}
	return n > 0, nil
}

// dropEmpty frees the frames the filler left at length 0 and keeps the
// others in order.
func (t *sender) dropEmpty() {
	b := t.b
	k := 0
	for i := range b.descs {
		if b.descs[i].Len == 0 {
			t.spare.descs = append(t.spare.descs, b.descs[i])
			continue
		}
		b.descs[k] = b.descs[i]
		k++
	}
	b.descs = b.descs[:k]
	if t.spare.Len() > 0 {
		t.s.Free(t.spare)
	}
}

// drain waits up to limit for the frames on the TX rings of socks to
// complete.
func drain(socks []*Socket, limit time.Duration) {
	deadline := time.Now().Add(limit)
	var live []*Socket
	for _, s := range socks {
		// Frames on the ring of a socket whose device is gone never
		// complete.
		if s.Err() == nil {
			live = append(live, s)
		}
	}
	for time.Now().Before(deadline) {
		left := 0
		for _, s := range live {
			if s.Closed() {
				continue
			}
			s.Complete()
			left += s.TXPending()
		}
		if left == 0 {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// sleepSocks sleeps d on the Close events of socks, ending early when one
// is closed or the runner is interrupted.
func sleepSocks(socks []*Socket, d time.Duration) error {
	for i, s := range socks {
		if !s.enter() {
			for _, t := range socks[:i] {
				t.leave()
			}
			return ErrClosed
		}
	}
	defer func() {
		for _, s := range socks {
			s.leave()
		}
	}()
	ev := make([]unix.PollFd, len(socks))
	return sleepOn(socks, ev, d, true)
}

// interrupt wakes a Wait, WaitRX or Sleep of the socket's owner without
// closing the socket (the runner stops this way on ctx). clearInterrupt
// takes the wake back once the owner is done with its waits.
func (s *Socket) interrupt() {
	if !s.enter() {
		return
	}
	defer s.leave()
	one := [8]byte{1}
	unix.Write(s.eventFD, one[:])
}

func (s *Socket) clearInterrupt() {
	if !s.enter() {
		return
	}
	defer s.leave()
	var buf [8]byte
	unix.Read(s.eventFD, buf[:])
}
