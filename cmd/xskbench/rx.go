//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/asaviefix"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xsk"
)

// receiver is one backend under test. start sets it up on host h and
// starts its goroutines; count returns the packets it has received (or,
// for senders, that the peer's counter saw); stop ends the goroutines and
// releases everything start created.
type receiver interface {
	start(h *vethpair.Host, o *Options) error
	count() (uint64, error)
	stop() error
}

// padded keeps per-goroutine counters on separate cache lines.
type padded struct {
	n atomic.Uint64
	_ [56]byte
}

func sum(cs []padded) uint64 {
	var n uint64
	for i := range cs {
		n += cs[i].n.Load()
	}
	return n
}

// loops runs one goroutine per index until stop is called, each on its
// own locked OS thread, so that the CPU time of the application's threads
// (what the library under test costs, syscalls included) can be read
// apart from the generator's and the kernel's.
type loops struct {
	quit atomic.Bool
	// ctx ends when quit is set, for loops that wait with a context.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	ctr    []padded
	tids   []atomic.Int64
	// runner holds the threads of a runner's goroutines (by queue), which
	// the loop's own goroutine starts: their CPU time is the library's.
	runner [64]atomic.Int64
}

// thread records the calling thread as the one that serves queue q, once.
func (l *loops) thread(q int) {
	if q < len(l.runner) && l.runner[q].Load() == 0 {
		l.runner[q].Store(int64(unix.Gettid()))
	}
}

func (l *loops) run(n int, body func(i int, ctr *atomic.Uint64) error) {
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.ctr = make([]padded, n)
	l.tids = make([]atomic.Int64, n)
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			l.tids[i].Store(int64(unix.Gettid()))
			if err := body(i, &l.ctr[i].n); err != nil {
				l.mu.Lock()
				l.err = errors.Join(l.err, err)
				l.mu.Unlock()
			}
		}()
	}
}

func (l *loops) halt() error {
	l.quit.Store(true)
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	return l.err
}

// threads returns the IDs of the loop threads and of a runner's threads,
// each once.
func (l *loops) threads() []int64 {
	var ts []int64
	for i := range len(l.tids) + len(l.runner) {
		var tid int64
		if i < len(l.tids) {
			tid = l.tids[i].Load()
		} else {
			tid = l.runner[i-len(l.tids)].Load()
		}
		if tid != 0 && !slices.Contains(ts, tid) {
			ts = append(ts, tid)
		}
	}
	return ts
}

// appCPU returns the CPU time the loop threads have used so far, from the
// scheduler's nanosecond accounting (/proc/self/task/TID/schedstat).
func (l *loops) appCPU() time.Duration {
	var d time.Duration
	for _, tid := range l.threads() {
		d += schedstat(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	}
	return d
}

// appSys returns the part of appCPU spent in the kernel (system time, at
// the kernel's tick resolution).
func (l *loops) appSys() time.Duration {
	var d time.Duration
	for _, tid := range l.threads() {
		d += threadSys(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	}
	return d
}

// recoverInto turns a panic of a peer library (asavie/xdp panics on
// unexpected sendto errors) into an error.
func recoverInto(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("panic: %v", p)
	}
}

// idle is how long a receiver with nothing to do sleeps in poll.
const idle = 10 * time.Millisecond

// ---- XDP_DROP: the generator's own rate ----

type dropRX struct{ c *trafficgen.Counter }

func (r *dropRX) start(h *vethpair.Host, o *Options) error {
	return h.Do(func() (err error) {
		r.c, err = trafficgen.AttachCounter(h.Ifindex, trafficgen.Drop)
		return err
	})
}
func (r *dropRX) count() (uint64, error) { return r.c.Count() }
func (r *dropRX) stop() error {
	if r.c == nil {
		return nil
	}
	return r.c.Close()
}

// ---- xdpio rxdrop ----

type xdpioRX struct {
	dev *xsk.Device
	l   loops
	// busyPoll selects preferred busy polling: the receiving goroutine
	// runs veth's NAPI itself (SO_PREFER_BUSY_POLL) instead of the
	// sender's softirq, with the device's napi_defer_hard_irqs and
	// gro_flush_timeout set so the kernel leaves the NAPI to it.
	busyPoll bool
	// nap sets SocketConfig.RXNap to Options.Nap: while packets flow, Wait
	// sleeps on a timer instead of on the socket.
	nap bool
	// group receives every queue in one goroutine (xsk.Poller), with
	// RXNap when nap is set.
	group bool
	// coalesce receives every queue in one goroutine through one
	// coalesce.GroupReceiver, rx-usecs Options.Nap (group is then moot).
	coalesce bool
	// touch reads the first byte of every frame before it drops it: the
	// least any receiver that looks at its packets does, and what the
	// kernel's copy into the UMEM costs the first reader of a frame (its
	// cache lines come from the CPU that wrote them).
	touch bool
	// run receives through the runner with its defaults (Device.Receive,
	// RunConfig{}): its shape, batch and naps are the library's choice.
	run bool
	// program, when set, gives the XDP program's configuration (a
	// filter); nil redirects every frame.
	program func(o *Options) xsk.ProgramConfig
	h       *vethpair.Host
	napiSet bool
}

func (r *xdpioRX) start(h *vethpair.Host, o *Options) error {
	r.h = h
	sc := xsk.SocketConfig{NoTX: true, RXRingSize: o.RingSize, FillRingSize: o.RingSize}
	spin := o.Spin
	if r.busyPoll {
		sc.BusyPoll = xsk.BusyPoll{Timeout: o.BusyPoll, Budget: o.BusyPollBudget}
		spin = o.BusyPollSpin
		if err := setNAPIDefer(h, o.NAPIDefer, o.GROFlushTimeout); err != nil {
			return err
		}
		r.napiSet = true
	}
	if r.nap {
		sc.RXNap = o.Nap
	}
	err := h.Do(func() (err error) {
		cfg := xsk.Config{
			UMEM:   xsk.UMEMConfig{FrameSize: o.FrameSize, NumFrames: o.NumFrames},
			Socket: sc,
		}
		if r.program != nil {
			cfg.Program = r.program(o)
		}
		r.dev, err = xsk.Open(h.Link, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("xdpio: %w", err)
	}
	socks := r.dev.Sockets()
	if r.run {
		r.l.run(1, func(_ int, ctr *atomic.Uint64) error {
			return r.dev.Receive(r.l.ctx, xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) {
				r.l.thread(s.Queue())
				ctr.Add(uint64(b.Len()))
			})
		})
		return nil
	}
	if r.coalesce {
		r.l.run(1, func(_ int, ctr *atomic.Uint64) error { return coalesceDrop(&r.l, socks, o, ctr) })
		return nil
	}
	if r.group {
		r.l.run(1, func(_ int, ctr *atomic.Uint64) error { return groupDrop(&r.l, socks, o.Batch, ctr) })
		return nil
	}
	r.l.run(len(socks), func(i int, ctr *atomic.Uint64) error {
		s := socks[i]
		b := s.NewBatch(o.Batch)
		empty := 0
		for !r.l.quit.Load() {
			// With busy polling, a Receive that finds the RX ring empty
			// runs one NAPI poll of the queue (a recvfrom) before it
			// returns.
			n := s.Receive(b)
			if n == 0 {
				if empty++; empty <= spin {
					continue
				}
				empty = 0
				if _, err := s.Wait(idle, false); err != nil {
					return err
				}
				continue
			}
			empty = 0
			if r.touch {
				var sum byte
				for j := 0; j < n; j++ {
					if f := b.Frame(j); len(f) > 0 {
						sum += f[0]
					}
				}
				touched[i].n.Add(uint64(sum))
			}
			ctr.Add(uint64(n))
			s.Release(b)
		}
		return nil
	})
	return nil
}

// touched keeps the bytes xdpio-touch read, so the loads stay.
var touched [64]padded

// coalesceDrop is rxdrop of every socket through one
// coalesce.GroupReceiver with rx-usecs o.Nap: the library's batching
// policy doing what groupDrop does by hand.
func coalesceDrop(l *loops, socks []*xsk.Socket, o *Options, ctr *atomic.Uint64) error {
	unlock, err := coalesce.LockThread()
	if err != nil {
		return err
	}
	defer unlock()
	g, err := coalesce.NewGroupReceiver(socks, coalesce.Params{RXUsecs: int(o.Nap / time.Microsecond), BatchSize: o.Batch}, coalesce.Options{IdleWait: idle})
	if err != nil {
		return err
	}
	for {
		bs, err := g.Next(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := 0
		for _, b := range bs {
			n += b.Len()
		}
		g.Release()
		ctr.Add(uint64(n))
	}
}

// groupDrop is rxdrop of every socket in one goroutine: it drains each
// ring in turn and, when all were empty, waits on all the sockets at once
// (xsk.Poller, which naps first with SocketConfig.RXNap while packets
// flow).
func groupDrop(l *loops, socks []*xsk.Socket, batch int, ctr *atomic.Uint64) error {
	p := xsk.NewPoller(socks...)
	bs := make([]*xsk.Batch, len(socks))
	for i, s := range socks {
		bs[i] = s.NewBatch(batch)
	}
	for !l.quit.Load() {
		n := 0
		for i, s := range socks {
			if k := s.Receive(bs[i]); k > 0 {
				n += k
				s.Release(bs[i])
			}
		}
		if n > 0 {
			ctr.Add(uint64(n))
			continue
		}
		if _, err := p.WaitRX(idle); err != nil {
			return err
		}
	}
	return nil
}

func (r *xdpioRX) count() (uint64, error) { return sum(r.l.ctr), nil }

func (r *xdpioRX) stats() map[string]uint64 {
	m := map[string]uint64{}
	for _, s := range r.dev.Sockets() {
		st, err := s.Stats()
		if err != nil {
			continue
		}
		m["rx_dropped"] += st.RXDropped
		m["rx_ring_full"] += st.RXRingFull
		m["fill_ring_empty"] += st.RXFillRingEmpty
		m["polls"] += st.Polls
		m["wakeups"] += st.Wakeups
	}
	return m
}

func (r *xdpioRX) stop() error {
	err := r.l.halt()
	if r.dev != nil {
		err = errors.Join(err, r.dev.Close())
	}
	if r.napiSet {
		err = errors.Join(err, setNAPIDefer(r.h, 0, 0))
	}
	return err
}

// setNAPIDefer sets napi_defer_hard_irqs and gro_flush_timeout of h's
// veth (every NAPI of the device). With both non-zero, a busy-polling
// socket that stops polling leaves its NAPI scheduled under a timer of
// gro_flush_timeout instead of handing it back to the sender's softirq,
// and the kernel takes over only if the application does not come back
// within that time. The files are the netns's own, so the tool runs
// inside h's namespace (ip netns exec mounts its sysfs).
func setNAPIDefer(h *vethpair.Host, defer_ int, flush time.Duration) error {
	script := fmt.Sprintf("echo %d > /sys/class/net/%s/napi_defer_hard_irqs && echo %d > /sys/class/net/%s/gro_flush_timeout",
		defer_, h.Link, flush.Nanoseconds(), h.Link)
	if out, err := h.Command(context.Background(), "sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("set napi_defer_hard_irqs %d, gro_flush_timeout %v on %s: %w: %s", defer_, flush, h.Link, err, out)
	}
	return nil
}

// napiIDs returns SO_INCOMING_NAPI_ID of every socket: the NAPI a busy
// poll of that socket drives (0: none recorded yet, so no busy polling).
func (r *xdpioRX) napiIDs() []int {
	var ids []int
	for _, s := range r.dev.Sockets() {
		id, _ := s.NAPIID()
		ids = append(ids, id)
	}
	return ids
}

// ---- asavie/xdp rxdrop ----

type asavieRX struct {
	h     *vethpair.Host
	prog  *asavie.Program
	socks []*asavie.Socket
	l     loops
	doc   bool // the loop of asavie's documentation (poll before every receive)
	// nap gives the tuned loop xdpio's RXNap policy, written by hand:
	// while packets flow, an empty RX ring means a timer sleep of
	// Options.Nap, and poll only when the ring is still empty after it.
	nap bool
	// group receives every queue in one goroutine, which polls all the
	// sockets' descriptors at once when every ring was empty.
	group bool
}

func asavieOptions(o *Options) *asavie.SocketOptions {
	return &asavie.SocketOptions{
		NumFrames:              o.NumFrames,
		FrameSize:              o.FrameSize,
		FillRingNumDescs:       o.RingSize,
		CompletionRingNumDescs: o.RingSize,
		RxRingNumDescs:         o.RingSize,
		TxRingNumDescs:         o.RingSize,
	}
}

func (r *asavieRX) start(h *vethpair.Host, o *Options) error {
	r.h = h
	err := h.Do(func() (err error) {
		r.prog, err = asavie.NewProgram(o.Queues)
		if err != nil {
			return err
		}
		if err := r.prog.Attach(h.Ifindex); err != nil {
			return err
		}
		for q := 0; q < o.Queues; q++ {
			s, err := newAsavieSocket(h.Ifindex, q, asavieOptions(o))
			if err != nil {
				return err
			}
			r.socks = append(r.socks, s)
			if err := r.prog.Register(q, s.FD()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("asavie/xdp: %w", err)
	}
	if r.group {
		r.l.run(1, func(_ int, ctr *atomic.Uint64) (err error) {
			defer recoverInto(&err)
			fds := make([]unix.PollFd, len(r.socks))
			for i, s := range r.socks {
				fds[i] = unix.PollFd{Fd: int32(s.FD()), Events: unix.POLLIN}
			}
			flowing := false
			for !r.l.quit.Load() {
				got := 0
				for _, s := range r.socks {
					if free := s.NumFreeFillSlots(); free > 0 {
						s.Fill(s.GetDescs(free))
					}
					if n := s.NumReceived(); n > 0 {
						got += len(s.Receive(min(n, o.Batch)))
					}
				}
				if got > 0 {
					ctr.Add(uint64(got))
					flowing = true
					continue
				}
				if r.nap && flowing {
					nap(o.Nap)
					flowing = false
					continue
				}
				if _, err := unix.Poll(fds, int(idle/time.Millisecond)); err != nil && err != unix.EINTR {
					return err
				}
			}
			return nil
		})
		return nil
	}
	r.l.run(len(r.socks), func(i int, ctr *atomic.Uint64) (err error) {
		defer recoverInto(&err)
		s := r.socks[i]
		if r.doc {
			// The receive loop of asavie/xdp's README and examples: fill,
			// then poll before every receive.
			for !r.l.quit.Load() {
				if free := s.NumFreeFillSlots(); free > 0 {
					s.Fill(s.GetDescs(free))
				}
				n, _, err := s.Poll(int(idle / time.Millisecond))
				if err != nil {
					return err
				}
				if n > 0 {
					ctr.Add(uint64(len(s.Receive(min(n, o.Batch)))))
				}
			}
			return nil
		}
		// asavie/xdp's loop made as good as ours: poll only when the RX
		// ring is empty.
		empty := 0
		flowing := false
		for !r.l.quit.Load() {
			if free := s.NumFreeFillSlots(); free > 0 {
				s.Fill(s.GetDescs(free))
			}
			n := s.NumReceived()
			if n == 0 {
				if empty++; empty <= o.Spin {
					continue
				}
				empty = 0
				if r.nap && flowing {
					nap(o.Nap)
					if s.NumReceived() > 0 {
						continue
					}
					flowing = false
				}
				if _, _, err := s.Poll(int(idle / time.Millisecond)); err != nil {
					return err
				}
				continue
			}
			empty = 0
			flowing = true
			descs := s.Receive(min(n, o.Batch))
			ctr.Add(uint64(len(descs)))
		}
		return nil
	})
	return nil
}

func (r *asavieRX) count() (uint64, error) { return sum(r.l.ctr), nil }

func (r *asavieRX) stats() map[string]uint64 {
	m := map[string]uint64{}
	for _, s := range r.socks {
		st, err := s.Stats()
		if err != nil {
			continue
		}
		m["rx_dropped"] += st.KernelStats.Rx_dropped
		m["rx_ring_full"] += st.KernelStats.Rx_ring_full
		m["fill_ring_empty"] += st.KernelStats.Rx_fill_ring_empty_descs
	}
	return m
}

func (r *asavieRX) stop() error {
	err := r.l.halt()
	if r.prog != nil {
		err = errors.Join(err, r.h.Do(func() error { return r.prog.Detach(r.h.Ifindex) }))
		r.prog.Close()
	}
	for _, s := range r.socks {
		err = errors.Join(err, closeAsavie(s))
	}
	return err
}

// ---- kernel UDP sockets with recvmmsg ----

type socketRX struct {
	fds []int
	l   loops
}

// mmsghdr is struct mmsghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// udpSinks opens o.Sockets kernel UDP sockets on h's address and o.Port
// (SO_REUSEPORT, a 32 MiB receive buffer, reads that time out after idle,
// UDP_GRO when gro), inside h's namespace.
func udpSinks(h *vethpair.Host, o *Options, gro bool) ([]int, error) {
	var fds []int
	err := h.Do(func() error {
		for range o.Sockets {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("socket: %w", err)
			}
			fds = append(fds, fd)
			type sockopt struct {
				level, name, v int
				what           string
			}
			opts := []sockopt{
				{unix.SOL_SOCKET, unix.SO_REUSEPORT, 1, "SO_REUSEPORT"},
				{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32 << 20, "SO_RCVBUFFORCE"},
			}
			if gro {
				opts = append(opts, sockopt{unix.IPPROTO_UDP, unix.UDP_GRO, 1, "UDP_GRO"})
			}
			for _, opt := range opts {
				if err := unix.SetsockoptInt(fd, opt.level, opt.name, opt.v); err != nil {
					return fmt.Errorf("%s: %w", opt.what, err)
				}
			}
			tv := unix.NsecToTimeval(int64(idle))
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return fmt.Errorf("SO_RCVTIMEO: %w", err)
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(o.Port), Addr: h.IPv4.As4()}); err != nil {
				return fmt.Errorf("bind %v:%d: %w", h.IPv4, o.Port, err)
			}
		}
		return nil
	})
	if err != nil {
		return fds, fmt.Errorf("kernel socket: %w", err)
	}
	return fds, nil
}

func (r *socketRX) start(h *vethpair.Host, o *Options) error {
	n := o.Sockets
	var err error
	if r.fds, err = udpSinks(h, o, false); err != nil {
		return err
	}
	r.l.run(n, func(i int, ctr *atomic.Uint64) error {
		fd := r.fds[i]
		msgs := make([]mmsghdr, o.Batch)
		iovs := make([]unix.Iovec, o.Batch)
		buf := make([]byte, o.Batch*2048)
		for j := range msgs {
			iovs[j].Base = &buf[j*2048]
			iovs[j].SetLen(2048)
			msgs[j].hdr.Iov = &iovs[j]
			msgs[j].hdr.SetIovlen(1)
		}
		for !r.l.quit.Load() {
			// Blocking recvmmsg: wait for the first datagram (up to
			// SO_RCVTIMEO), then take what is queued, up to the batch.
			got, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), unix.MSG_WAITFORONE, 0, 0)
			switch e {
			case 0:
				ctr.Add(uint64(got))
			case unix.EAGAIN, unix.EINTR:
			default:
				return fmt.Errorf("recvmmsg: %w", e)
			}
		}
		return nil
	})
	return nil
}

func (r *socketRX) count() (uint64, error) { return sum(r.l.ctr), nil }

func (r *socketRX) stop() error {
	err := r.l.halt()
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	return err
}

// newAsavieSocket is asavie.NewSocket (through asaviefix, which unmaps
// what a failed bind leaks), retried for a second while bind
// says EBUSY: the kernel releases the previous backend's socket on the
// queue asynchronously (xdpio's own bind retries the same way).
func newAsavieSocket(ifindex, queue int, opts *asavie.SocketOptions) (*asavie.Socket, error) {
	deadline := time.Now().Add(time.Second)
	for {
		s, err := asaviefix.NewSocket(ifindex, queue, opts)
		// asavie/xdp formats errors with %v: match the text.
		if err == nil || !strings.Contains(err.Error(), "busy") || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *xdpioRX) appCPU() time.Duration  { return r.l.appCPU() }
func (r *xdpioRX) appSys() time.Duration  { return r.l.appSys() }
func (r *asavieRX) appCPU() time.Duration { return r.l.appCPU() }
func (r *asavieRX) appSys() time.Duration { return r.l.appSys() }
func (r *socketRX) appCPU() time.Duration { return r.l.appCPU() }
func (r *socketRX) appSys() time.Duration { return r.l.appSys() }

// nap sleeps d in one nanosleep system call on the calling (locked)
// thread, without Go's timers (time.Sleep wakes a locked thread late and
// through the runtime): the kernel's hrtimer wakes it directly, as
// xdpio's Socket.Sleep does.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
