//go:build linux

package trafficgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config describes a generator. Frame.Size defaults to 64 bytes, ports to
// 40000 -> 9, Flows to 64, CPUs to every CPU the process may run on.
type Config struct {
	// Ifindex is the sending interface, in the network namespace of the
	// thread that calls New. XDP_TX sends every frame out of it: on a veth
	// it arrives at the peer.
	Ifindex int
	// Frame describes the UDP/IPv4 frame.
	Frame FrameSpec
	// Flows is the number of source ports (Frame.SrcPort onwards) the
	// frames are spread over, a power of two from 1 to 1024.
	Flows int
	// CPUs lists the CPUs to run one worker each on.
	CPUs []int
	// BatchSize is how many frames the kernel prepares and flushes at a
	// time (1 to 256, default 64).
	BatchSize int
	// MaxChunk caps the frames of one BPF_PROG_RUN call (default 1<<20).
	// Calls are sized to last about 100 ms so that Run stops promptly.
	MaxChunk int
}

// Generator sends UDP frames out of an interface from XDP live frames.
// Run may not be called concurrently with itself; Sent may.
type Generator struct {
	cfg     Config
	frame   []byte
	xdpMD   []byte
	prog    *ebpf.Program
	state   *ebpf.Map
	ns      netns.NsHandle
	cpus    []int
	ncpu    int // possible CPUs: the length of per-CPU values
	running atomic.Bool
}

// callTarget is how long one BPF_PROG_RUN call should last.
const callTarget = 100 * time.Millisecond

// Result is what a run sent.
type Result struct {
	// Packets is the number of frames the program sent with XDP_TX,
	// counted exactly in the kernel. Frames the receiving device dropped
	// (a full ring) are included.
	Packets uint64
	// PerCPU is Packets per worker, in Config.CPUs order.
	PerCPU []uint64
	// Elapsed is the wall time of the run.
	Elapsed time.Duration
}

// PPS returns Packets per second of Elapsed.
func (r Result) PPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Packets) / r.Elapsed.Seconds()
}

// New validates cfg, builds the template frame, loads the program and
// records the network namespace of the calling thread: Run's workers enter
// it. Call it inside the sender's namespace (netnstest.Host.Do).
func New(cfg Config) (_ *Generator, err error) {
	if cfg.Frame.Size == 0 {
		cfg.Frame.Size = 64
	}
	if cfg.Frame.SrcPort == 0 {
		cfg.Frame.SrcPort = 40000
	}
	if cfg.Frame.DstPort == 0 {
		cfg.Frame.DstPort = 9
	}
	if cfg.Flows == 0 {
		cfg.Flows = 64
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 64
	}
	if cfg.MaxChunk == 0 {
		cfg.MaxChunk = 1 << 20
	}
	if cfg.Flows < 1 || cfg.Flows > maxFlows || cfg.Flows&(cfg.Flows-1) != 0 {
		return nil, fmt.Errorf("trafficgen: flows %d: must be a power of two from 1 to %d: %w", cfg.Flows, maxFlows, ErrInvalidConfig)
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 256 {
		return nil, fmt.Errorf("trafficgen: batch size %d: must be between 1 and 256: %w", cfg.BatchSize, ErrInvalidConfig)
	}
	if cfg.MaxChunk < 1 || cfg.MaxChunk > math.MaxInt32 {
		return nil, fmt.Errorf("trafficgen: max chunk %d: must be between 1 and %d: %w", cfg.MaxChunk, math.MaxInt32, ErrInvalidConfig)
	}
	if err := cfg.Frame.validate(cfg.Flows); err != nil {
		return nil, fmt.Errorf("trafficgen: %w", err)
	}
	if _, err := net.InterfaceByIndex(cfg.Ifindex); err != nil {
		return nil, fmt.Errorf("trafficgen: interface %d in this namespace: %w", cfg.Ifindex, err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("trafficgen: count possible CPUs: %w", err)
	}
	cpus := cfg.CPUs
	if len(cpus) == 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("trafficgen: read CPU affinity: %w", err)
		}
		for c := 0; c < ncpu; c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	seen := map[int]bool{}
	for _, c := range cpus {
		if c < 0 || c >= ncpu || seen[c] {
			return nil, fmt.Errorf("trafficgen: CPU %d: must be listed once and lie in 0..%d: %w", c, ncpu-1, ErrInvalidConfig)
		}
		seen[c] = true
	}
	frame, err := BuildFrame(cfg.Frame)
	if err != nil {
		return nil, fmt.Errorf("trafficgen: %w", err)
	}
	g := &Generator{cfg: cfg, frame: frame, cpus: append([]int(nil), cpus...), ncpu: ncpu, ns: netns.None()}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	// struct xdp_md: data, data_end, data_meta, ingress_ifindex,
	// rx_queue_index, egress_ifindex.
	g.xdpMD = make([]byte, 24)
	binary.NativeEndian.PutUint32(g.xdpMD[4:], uint32(len(frame)))
	binary.NativeEndian.PutUint32(g.xdpMD[12:], uint32(cfg.Ifindex))

	g.ns, err = netns.Get()
	if err != nil {
		return nil, fmt.Errorf("trafficgen: get network namespace: %w", err)
	}
	g.state, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tgen_state",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  uint32(unsafe.Sizeof(genState{})),
		MaxEntries: 1,
	})
	if err != nil {
		return nil, bpfError("trafficgen: create state map", err)
	}
	g.prog, err = loadXDP("tgen_udp", genInstructions(g.state.FD(), cfg.Frame.SrcPort, cfg.Flows))
	if err != nil {
		return nil, fmt.Errorf("trafficgen: %w", err)
	}
	return g, nil
}

// Frame returns a copy of the template frame (flow 0).
func (g *Generator) Frame() []byte { return append([]byte(nil), g.frame...) }

// Close frees the program and its map.
func (g *Generator) Close() error {
	if g.prog != nil {
		g.prog.Close()
		g.prog = nil
	}
	if g.state != nil {
		g.state.Close()
		g.state = nil
	}
	if g.ns.IsOpen() {
		g.ns.Close()
		g.ns = netns.None()
	}
	return nil
}

// Sent returns the frames sent so far by the current (or last) run. It is
// safe to call while Run is running.
func (g *Generator) Sent() (uint64, error) {
	st, err := g.readState()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range g.cpus {
		n += st[c].Sent
	}
	return n, nil
}

func (g *Generator) readState() ([]genState, error) {
	var st []genState
	if err := g.state.Lookup(uint32(0), &st); err != nil {
		return nil, fmt.Errorf("trafficgen: read counters: %w", err)
	}
	if len(st) < g.ncpu {
		return nil, fmt.Errorf("trafficgen: read counters: %d per-CPU values, want %d", len(st), g.ncpu)
	}
	return st, nil
}

// ErrRunning is returned by Run when another Run is in progress.
var ErrRunning = errors.New("trafficgen: a run is already in progress")

// Run sends until packets frames went out (0: no packet limit), duration
// passed, or ctx is done, whichever comes first, and returns what was
// sent. duration must be positive: every run is bounded in time.
func (g *Generator) Run(ctx context.Context, packets uint64, duration time.Duration) (Result, error) {
	if duration <= 0 {
		return Result{}, fmt.Errorf("trafficgen: run duration %v: must be positive: %w", duration, ErrInvalidConfig)
	}
	if !g.running.CompareAndSwap(false, true) {
		return Result{}, ErrRunning
	}
	defer g.running.Store(false)

	limits := make([]uint64, len(g.cpus))
	for i := range limits {
		if packets == 0 {
			limits[i] = math.MaxUint64
		} else {
			limits[i] = packets / uint64(len(g.cpus))
			if uint64(i) < packets%uint64(len(g.cpus)) {
				limits[i]++
			}
		}
	}
	st := make([]genState, g.ncpu)
	for i, c := range g.cpus {
		st[c].Limit = limits[i]
	}
	if err := g.state.Put(uint32(0), st); err != nil {
		return Result{}, fmt.Errorf("trafficgen: reset counters: %w", err)
	}

	start := time.Now()
	deadline := start.Add(duration)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(g.cpus))
	tids := make([]atomic.Int32, len(g.cpus))
	for i, c := range g.cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.worker(ctx, c, limits[i], &tids[i])
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		// A BPF_PROG_RUN call only ends early on a pending signal:
		// interrupt the workers' threads (SIGURG, which the Go runtime
		// tolerates at any time) until they have all returned.
		pid := unix.Getpid()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for done := false; !done; {
			for i := range tids {
				if tid := tids[i].Load(); tid != 0 {
					unix.Tgkill(pid, int(tid), unix.SIGURG)
				}
			}
			select {
			case <-finished:
				done = true
			case <-tick.C:
			}
		}
	}
	res := Result{Elapsed: time.Since(start), PerCPU: make([]uint64, len(g.cpus))}
	final, err := g.readState()
	if err != nil {
		return res, err
	}
	for i, c := range g.cpus {
		res.PerCPU[i] = final[c].Sent
		res.Packets += final[c].Sent
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	return res, nil
}

// worker runs the program on cpu, on a locked thread inside the
// generator's namespace, until its share is sent or the deadline passes.
func (g *Generator) worker(ctx context.Context, cpu int, limit uint64, tid *atomic.Int32) (err error) {
	runtime.LockOSThread()
	deadline, _ := ctx.Deadline()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("trafficgen: get namespace: %w", err)
	}
	defer orig.Close()
	var origSet unix.CPUSet
	if err := unix.SchedGetaffinity(0, &origSet); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("trafficgen: read CPU affinity: %w", err)
	}
	// Block SIGPROF on this thread: a CPU profile of the process would
	// otherwise interrupt every BPF_PROG_RUN call after 10 ms of CPU time
	// and the generator would spend its time setting up page pools.
	var prof, origMask unix.Sigset_t
	prof.Val[(unix.SIGPROF-1)/64] |= 1 << ((uint(unix.SIGPROF) - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &prof, &origMask); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("trafficgen: block SIGPROF: %w", err)
	}
	restore := true
	defer func() {
		// Stop being a signal target before the thread is unlocked.
		tid.Store(0)
		// A thread we could not put back stays locked: the runtime
		// discards it when the goroutine exits.
		if unix.PthreadSigmask(unix.SIG_SETMASK, &origMask, nil) != nil {
			restore = false
		}
		if unix.SchedSetaffinity(0, &origSet) != nil {
			restore = false
		}
		if netns.Set(orig) != nil {
			restore = false
		}
		if restore {
			runtime.UnlockOSThread()
		}
	}()
	if err := netns.Set(g.ns); err != nil {
		return fmt.Errorf("trafficgen: enter namespace: %w", err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("trafficgen: pin to CPU %d: %w", cpu, err)
	}

	tid.Store(int32(unix.Gettid()))
	chunk := uint64(min(1<<14, g.cfg.MaxChunk))
	var sent uint64
	for ctx.Err() == nil && sent < limit {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		n := min(chunk, limit-sent)
		if err := g.testRun(uint32(n)); err != nil {
			return fmt.Errorf("trafficgen: run on CPU %d: %w", cpu, err)
		}
		took := time.Since(now)
		st, err := g.readState()
		if err != nil {
			return err
		}
		sent = st[cpu].Sent
		// Size the next call to last about callTarget (and not past the
		// deadline): long enough to amortise the few milliseconds each
		// call spends setting up and tearing down its page pool, short
		// enough to honour cancellation and the deadline.
		if took > 0 {
			target := min(callTarget, time.Until(deadline))
			next := uint64(float64(n) * float64(target) / float64(took))
			// Grow at most fourfold per call: the rate can drop
			// suddenly (a receiver that starts to work the stack).
			chunk = max(64, min(next, 4*n, uint64(g.cfg.MaxChunk)))
		}
	}
	return nil
}

// testRunAttr is the BPF_PROG_TEST_RUN part of union bpf_attr.
type testRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// testRun runs the program repeat times in live-frames mode. It calls the
// syscall directly: an interrupted run (EINTR, e.g. a profiling signal)
// is simply over, and the per-CPU counter says how much it sent, whereas
// ebpf.Program.Run would start the whole repeat count again.
func (g *Generator) testRun(repeat uint32) error {
	attr := testRunAttr{
		progFD:     uint32(g.prog.FD()),
		dataSizeIn: uint32(len(g.frame)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&g.frame[0]))),
		repeat:     repeat,
		ctxSizeIn:  uint32(len(g.xdpMD)),
		ctxIn:      uint64(uintptr(unsafe.Pointer(&g.xdpMD[0]))),
		flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		batchSize:  uint32(g.cfg.BatchSize),
	}
	_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(g.frame)
	runtime.KeepAlive(g.xdpMD)
	switch e {
	case 0, unix.EINTR:
		return nil
	case unix.EINVAL:
		return fmt.Errorf("BPF_PROG_RUN with live frames (needs Linux 5.18, an interface in this namespace): %w", e)
	}
	return fmt.Errorf("BPF_PROG_RUN: %w", e)
}
