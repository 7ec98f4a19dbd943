package xsk

import (
	"sync"
	"time"
)

// Config describes the sockets Open creates on a device. The zero value
// binds one socket to every RX queue, each with its own UMEM of 4096
// frames of 4096 bytes, RX and TX rings, need_wakeup on, auto bind and
// attach modes, and redirects every frame.
type Config struct {
	// Queues lists the queues to bind; nil means every RX queue.
	Queues []int
	// UMEM configures each socket's UMEM (or the one shared UMEM). With
	// NumFrames left 0, each queue gets 4096 frames (with SharedUMEM, the
	// region 4096 per queue), or, when the process lacks CAP_IPC_LOCK and
	// its RLIMIT_MEMLOCK is too small for that, the largest power of two
	// that fits the limit (Stats.FramesOwned tells).
	UMEM UMEMConfig
	// SharedUMEM puts all sockets on one UMEM (XDP_SHARED_UMEM), so a
	// frame received on one queue can be transmitted on another without a
	// copy.
	SharedUMEM bool
	// Socket configures every socket.
	Socket SocketConfig
	// Program configures the XDP program (filter, RX hash, attach mode).
	Program ProgramConfig
	// NoProgram loads no XDP program: for TX-only sockets, or when the
	// caller attaches its own program and registers the sockets in its
	// XSKMAP (Socket.FD).
	NoProgram bool
	// NAPIDeferral, when not nil, applies NAPI deferral to the NAPI
	// instances of the bound queues for as long as the Device is open
	// (netdev napi-set, Linux 6.13+), and puts the previous values back
	// on Close. The previous values are recorded in
	// /run/xdpio/<ifname>-<ifindex>.json first, so that after a crash
	// the next Open of the device (with or without this option) or
	// `xdpio napi reset DEV` restores them. Open fails when a bound queue
	// has no NAPI instance the driver reports (veth reports none).
	NAPIDeferral *NAPIDeferral
}

// NAPIDeferral is the kernel's software interrupt coalescing for the NAPI
// instances of an AF_XDP receiver's queues: after a poll that found
// packets, hardware IRQs stay masked for DeferHardIRQs empty polls, and a
// timer of GROFlushTimeout polls instead of the IRQ.
type NAPIDeferral struct {
	// DeferHardIRQs is how many consecutive empty polls keep IRQs
	// masked; 2 is a common choice.
	DeferHardIRQs uint32
	// GROFlushTimeout is the timer; 200µs is a common choice.
	GROFlushTimeout time.Duration
	// IRQSuspendTimeout, when positive, suspends the queues' IRQs for up
	// to this long while a busy-polling receiver keeps finding packets
	// (Linux 6.13; see Poller.BusyPoll). It is the safety net: if the
	// receiver stalls, IRQs come back after it. 0 leaves it as it is.
	IRQSuspendTimeout time.Duration
}

// Device holds the sockets bound to the queues of one interface, the XDP
// program that feeds them, and their UMEMs.
type Device struct {
	name    string
	ifindex int
	sockets []*Socket
	umems   []*UMEM
	prog    *Program
	napi    napiHolder // NAPI deferral to restore on Close; nil without

	// mu orders Close against the runners: their look at the sockets,
	// and their count (runs), which keeps the UMEMs mapped while a
	// handler or filler may still touch frames after Close.
	mu     sync.Mutex
	runs   int
	closed bool
}

// startRun registers a runner and returns the sockets, or false once the
// device is closed. Until the runner calls endRun, Close leaves the UMEMs
// mapped: a handler may be reading, or a filler writing, a frame when the
// sockets close under it.
func (d *Device) startRun() ([]*Socket, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, false
	}
	d.runs++
	return append([]*Socket(nil), d.sockets...), true
}

// endRun unregisters a runner; the last one out after Close unmaps the
// UMEMs Close left.
func (d *Device) endRun() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.runs--; d.runs == 0 && d.closed {
		d.closeUMEMs()
	}
}

func (d *Device) closeUMEMs() {
	for _, u := range d.umems {
		u.Close()
	}
	d.umems = nil
}

// napiHolder restores NAPI settings on Close.
type napiHolder interface {
	Close() error
	NAPIs() []uint32
}

// NAPIDeferred returns the NAPI instances whose deferral this Device set
// (Config.NAPIDeferral), nil when none.
func (d *Device) NAPIDeferred() []uint32 {
	if d.napi == nil {
		return nil
	}
	return d.napi.NAPIs()
}

// Sockets returns the sockets in queue order. It may be called from any
// goroutine, also during and after Close: the sockets are then closed,
// and their Stats keep the final counters.
func (d *Device) Sockets() []*Socket { return d.sockets }

// Program returns the XDP program, or nil with Config.NoProgram (after
// Close, the detached program).
func (d *Device) Program() *Program { return d.prog }

// Ifindex returns the interface index.
func (d *Device) Ifindex() int { return d.ifindex }

// Name returns the interface name.
func (d *Device) Name() string { return d.name }

// Close detaches the program and closes the sockets and UMEMs. Sockets may
// be blocked in Wait on other goroutines: Close wakes them. While
// Device.Receive or Device.Send runs, the UMEMs stay mapped until it has
// returned (ErrClosed), so that a handler or filler busy with a frame
// when Close comes does not touch unmapped memory. Close may be called
// from any goroutine, a handler's included.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var first error
	if d.napi != nil {
		if err := d.napi.Close(); err != nil {
			first = err
		}
		d.napi = nil
	}
	if d.prog != nil {
		if err := d.prog.Close(); err != nil {
			first = err
		}
	}
	// Each close waits for an RCU grace period in the kernel: close the
	// sockets at once rather than one after another.
	var wg sync.WaitGroup
	for _, s := range d.sockets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
		}()
	}
	wg.Wait()
	// d.sockets and d.prog stay: Sockets and Program may be called from
	// any goroutine, and closed sockets keep their final counters.
	// A runner's handler or filler may still hold frames: the last
	// runner out unmaps the UMEMs (endRun).
	if d.runs == 0 {
		d.closeUMEMs()
	}
	return first
}
