package xsk

import (
	"fmt"
	"time"
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

// String returns the mode's name as the CLI and the docs spell it.
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

// SocketConfig describes one AF_XDP socket. The zero value gives TX and
// completion rings of 2048 entries, fill and RX rings of half the
// socket's frames (2048 for the default 4096, up to 16384), auto bind
// mode and need_wakeup on.
type SocketConfig struct {
	// RXRingSize, TXRingSize: entries of the RX and TX rings, powers of two.
	// Default: RX as the fill ring, TX 2048. Set NoRX or NoTX to leave a
	// ring out.
	RXRingSize, TXRingSize int
	// FillRingSize, CompletionRingSize: entries of this socket's fill and
	// completion rings, powers of two. Default fill: half the socket's
	// frames, from 2048 to 16384 (a receiver that is not scheduled for a
	// while loses nothing as long as the frames lent in the fill ring
	// last); completion 2048.
	FillRingSize, CompletionRingSize int
	// NoRX and NoTX leave out the RX or TX ring (a TX-only or RX-only
	// socket). At least one ring must remain.
	NoRX, NoTX bool
	// Frames is how many of the UMEM's frames this socket takes for its
	// own pool. Default: every frame the UMEM has left. More frames than
	// the fill ring holds are not wasted: while received frames sit in the
	// RX ring or in the application's batches, the rest keep the fill ring
	// full. (While the receiver is not running, only the frames already in
	// the fill ring serve the kernel: its default size grows with Frames.)
	// Sockets sharing a UMEM set their share (Open does).
	Frames int
	// TXFrames, when positive, sets this many of the socket's frames apart
	// in a pool of their own for Alloc. Then the RX side (Receive,
	// Release, Wait for RX) and the TX side (Alloc, Transmit, Submit,
	// Flush, Kick, Complete, Free, Wait for TX) share no state, and may
	// each be driven by a goroutine of its own: one receiving goroutine
	// and one sending one per queue, or a sender behind a lock. The fill
	// ring is never fed from the TX pool, so an RX flood cannot starve the
	// sender of frames. Frames come back to the pool of the side that
	// returns them (Complete and Free: TX; Release: RX), so a forwarder
	// that transmits received frames moves them to the TX pool for good:
	// forward on sockets without TXFrames. Needs both rings. Default 0: one
	// pool, one goroutine for everything.
	TXFrames int
	// TXShare, when TXFrames is 0, sets apart that fraction of the
	// socket's frames as TXFrames would (0.25: a quarter), for a caller
	// that leaves the number of frames to Open. 0: none; it must be below
	// 1.
	TXShare float64
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
	// SO_BUSY_POLL and SO_BUSY_POLL_BUDGET on the socket; Receive (on an
	// empty RX ring) and Transmit then run the driver's NAPI from this
	// goroutine, one poll of up to Budget packets per call, instead of
	// the driver's interrupt and softirq. See BusyPoll for when it pays.
	BusyPoll BusyPoll
	// RXNap, when positive, changes how Wait waits for RX while packets
	// are flowing: instead of blocking in poll on the socket at once, it
	// first sleeps RXNap (or the timeout, if shorter) on a timer, off the
	// socket's wait queue, and blocks in poll only if the RX ring is still
	// empty after that nap; the next packets turn napping on again.
	//
	// A thread blocked in poll on the socket makes the kernel wake it (a
	// wait-queue lock with interrupts off, and an inter-processor wake-up)
	// every time the driver flushes frames to the socket, and at a high
	// packet rate that wake-up, not the copy, is most of the kernel's cost
	// per packet: with the queue off the wait queue, a NAPI poll that
	// delivers frames finds nobody to wake. The price is latency: a packet
	// may wait up to RXNap (plus the kernel's timer slack, 50 µs by default)
	// before the application sees it. Tens of microseconds suit
	// throughput-bound receivers; leave it 0 (poll at once) when latency
	// matters more. Measure with cmd/xskbench's xdpio-nap backend.
	RXNap time.Duration
	// TXBudget raises how many frames one TX kick sends in copy mode
	// (XDP_MAX_TX_SKB_BUDGET, Linux 6.17; default 32 in the kernel). 0
	// leaves the kernel's default. Values above the TX ring size are
	// clamped.
	TXBudget int
}

// BusyPoll configures preferred busy polling (SO_PREFER_BUSY_POLL).
//
// It pays when a core is dedicated to the socket's goroutine and the
// driver's receive work should run there instead of in interrupts and
// softirq on some other core: the goroutine then calls Receive in a loop
// (Wait only after many empty polls), and the device's
// napi_defer_hard_irqs and gro_flush_timeout (sysfs, or per NAPI through
// netdev netlink) are set so that the kernel leaves the NAPI to the
// busy poller while it keeps coming back. It cannot work before the
// kernel records the NAPI the socket's packets come from (Socket.NAPIID),
// which happens on the first packet for drivers whose XDP receive queues
// carry a NAPI ID. veth's do not (Linux 6.18): there the library makes no
// busy-poll syscalls and the option changes nothing. On a machine whose
// cores are all busy, a spinning receiver takes CPU from the work that
// produces its packets; measure before turning it on.
type BusyPoll struct {
	// Timeout is SO_BUSY_POLL: how long a syscall busy-polls the device.
	Timeout time.Duration
	// Budget is SO_BUSY_POLL_BUDGET: packets per busy-poll round. Default 64.
	Budget int
}

// setDefaults fills in the zero fields for a socket that gets frames
// frames of its UMEM (0: unknown).
func (c *SocketConfig) setDefaults(frames int) {
	rx := defaultRXRing(frames)
	if c.RXRingSize == 0 {
		c.RXRingSize = rx
	}
	if c.TXRingSize == 0 {
		c.TXRingSize = 2048
	}
	if c.FillRingSize == 0 {
		c.FillRingSize = rx
	}
	if c.CompletionRingSize == 0 {
		c.CompletionRingSize = 2048
	}
	if c.BusyPoll.Timeout != 0 && c.BusyPoll.Budget == 0 {
		c.BusyPoll.Budget = 64
	}
}

// defaultRXRing is the fill and RX rings' default size for a socket with
// frames frames: half of them (the other half stays for TX and for
// frames the application holds), as a power of two from 2048 to 16384.
// What protects a receiver that is not scheduled for a while (a Go
// process whose other goroutines hold every P for a 10 ms slice) is the
// frames already lent to the kernel in the fill ring, not those in the
// pool: with 4096 frames the ring holds 2048, 13 ms at 150k packets/s,
// and more frames make it deeper.
func defaultRXRing(frames int) int {
	n := 2048
	for n < 16384 && 2*n <= frames/2 {
		n *= 2
	}
	return n
}

func (c *SocketConfig) validate() error {
	for _, r := range []struct {
		name string
		v    int
	}{{"RX ring size", c.RXRingSize}, {"TX ring size", c.TXRingSize}, {"fill ring size", c.FillRingSize}, {"completion ring size", c.CompletionRingSize}} {
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
	if c.TXShare < 0 || c.TXShare >= 1 {
		return invalid("TX share", c.TXShare, "must be at least 0 and below 1")
	}
	if c.TXFrames < 0 {
		return invalid("TX frames", c.TXFrames, "must not be negative")
	}
	if c.RXNap < 0 {
		return invalid("RX nap", c.RXNap, "must not be negative")
	}
	if c.Bind < BindAuto || c.Bind > BindZeroCopy {
		return invalid("bind mode", int(c.Bind), "must be BindAuto, BindCopy or BindZeroCopy")
	}
	return nil
}
