package nic

import (
	"fmt"
	"sort"
	"time"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/netdev"
)

// ErrNotSupported is matched (errors.Is) by errors that mean the running
// kernel or the device's driver lacks an operation or attribute; the
// error's text names it. It is the same value as xsk.ErrNotSupported and
// matches errors.ErrUnsupported.
var ErrNotSupported = errs.ErrNotSupported

// ErrClosed is matched (errors.Is) by the errors of a Device's methods
// after Close. It matches net.ErrClosed.
var ErrClosed = errs.ErrClosed

// ErrNoDevice is matched (errors.Is) by the error of Open when the calling
// thread's network namespace has no interface by that name (none at all,
// or it is in another namespace). The error's text says so in words.
var ErrNoDevice = errs.ErrNoDevice

// noDeviceError is ErrNoDevice for one interface name; it wraps the
// lookup's own error.
type noDeviceError struct {
	name string
	err  error
}

func (e *noDeviceError) Error() string {
	return fmt.Sprintf("no network interface %q in this network namespace", e.name)
}
func (e *noDeviceError) Unwrap() error        { return e.err }
func (e *noDeviceError) Is(target error) bool { return target == ErrNoDevice }

// QueueType is RX or TX (WholeDevice only in a Snapshot of device totals).
type QueueType string

// Queue types.
const (
	RX QueueType = "rx"
	TX QueueType = "tx"
	// WholeDevice marks the one row of a Snapshot whose Source is
	// StatsDevice: the counters of the device as a whole (its Queue is -1).
	WholeDevice QueueType = "device"
)

// Queue is one RX or TX queue of a device.
type Queue struct {
	// Type is RX or TX; ID is the queue's index among its type.
	Type QueueType
	ID   int
	// NAPIID is the NAPI instance that services the queue, 0 when the
	// driver does not say (veth does not link queues to NAPIs).
	NAPIID uint32
	// IRQ is the NAPI's interrupt vector, -1 when none or unknown.
	IRQ int
	// XSK reports that an AF_XDP socket is bound to the queue.
	XSK bool
}

// NAPISettings are the software interrupt-coalescing settings of a NAPI
// instance. In SetNAPI a nil field stays as it is; in a NAPI a nil field
// was not reported by the kernel.
type NAPISettings struct {
	// DeferHardIRQs is how many consecutive empty polls keep hardware
	// IRQs masked (napi_defer_hard_irqs).
	DeferHardIRQs *uint32
	// GROFlushTimeout arms a timer that polls instead of an IRQ while
	// IRQs are deferred (gro_flush_timeout; kernel resolution 1 ns).
	GROFlushTimeout *time.Duration
	// IRQSuspendTimeout suspends IRQs while a busy-polling application
	// keeps up (Linux 6.13+, per NAPI only).
	IRQSuspendTimeout *time.Duration
}

// String formats the settings as "defer-hard-irqs 2, gro-flush-timeout
// 200µs, irq-suspend-timeout 0s", leaving out absent ones.
func (s NAPISettings) String() string {
	out := ""
	add := func(k, v string) {
		if out != "" {
			out += ", "
		}
		out += k + " " + v
	}
	if s.DeferHardIRQs != nil {
		add("defer-hard-irqs", fmt.Sprint(*s.DeferHardIRQs))
	}
	if s.GROFlushTimeout != nil {
		add("gro-flush-timeout", s.GROFlushTimeout.String())
	}
	if s.IRQSuspendTimeout != nil {
		add("irq-suspend-timeout", s.IRQSuspendTimeout.String())
	}
	return out
}

// IsZero reports whether no field is set.
func (s NAPISettings) IsZero() bool {
	return s.DeferHardIRQs == nil && s.GROFlushTimeout == nil && s.IRQSuspendTimeout == nil
}

// NAPI is one NAPI instance of a device.
type NAPI struct {
	// ID is unique in the system.
	ID uint32
	// IRQ is the interrupt vector, -1 when none.
	IRQ int
	// PID is the NAPI's kernel thread when threaded, else 0.
	PID int
	// Queues lists the RX queues the NAPI services, when the driver says.
	Queues []int
	// Threaded is the NAPI's threaded mode ("disabled", "enabled",
	// "busy-poll"), "" when the kernel does not report it.
	Threaded string
	// NAPISettings are the current settings.
	NAPISettings
}

// Selector chooses NAPI instances of a device: AllNAPIs, NAPIByID or
// NAPIOfQueue. The zero value selects all.
type Selector struct {
	kind int // 0 all, 1 id, 2 queue
	v    uint32
}

// AllNAPIs selects every NAPI instance of the device.
func AllNAPIs() Selector { return Selector{} }

// NAPIByID selects one NAPI instance by its ID.
func NAPIByID(id uint32) Selector { return Selector{kind: 1, v: id} }

// NAPIOfQueue selects the NAPI instance that services RX queue q.
func NAPIOfQueue(q int) Selector { return Selector{kind: 2, v: uint32(q)} }

// String says what s selects.
func (s Selector) String() string {
	switch s.kind {
	case 1:
		return fmt.Sprintf("napi %d", s.v)
	case 2:
		return fmt.Sprintf("rx queue %d", s.v)
	}
	return "all NAPIs"
}

// NAPIChange is what SetNAPI did.
type NAPIChange struct {
	// Before and After are the selected NAPIs before and after the
	// change, in the same order.
	Before, After []NAPI
	// Fallback is "" when the settings went through napi-set, else it
	// says what was used instead (the device-wide sysfs files).
	Fallback string
}

// XDPFeatures is what a device offers to XDP and AF_XDP (netdev dev-get).
type XDPFeatures struct {
	// XDP names the XDP features ("basic", "redirect", "ndo-xmit",
	// "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg").
	XDP []string
	// Native: the driver runs XDP programs itself ("basic"), so
	// driver-mode attach works and copy mode skips the generic path.
	Native bool
	// MultiBuffer: the driver's XDP takes frames of several buffers
	// ("rx-sg"), so multi-buffer AF_XDP sockets receive jumbo frames.
	MultiBuffer bool
	// ZeroCopy reports that AF_XDP can bind in zero-copy mode
	// ("xsk-zerocopy").
	ZeroCopy bool
	// ZCMaxSegs is the most fragments of a zero-copy frame (multi-buffer);
	// 0 when the kernel did not say.
	ZCMaxSegs uint32
	// RXMetadata names the RX metadata kfuncs ("timestamp", "hash",
	// "vlan-tag").
	RXMetadata []string
	// RXHash: the driver hands XDP the NIC's RSS hash (RX metadata
	// "hash"), so xsk.ProgramConfig.RXHash delivers one.
	RXHash bool
	// XSK names the AF_XDP TX metadata features ("tx-timestamp",
	// "tx-checksum", "tx-launch-time-fifo").
	XSK []string
	// TXChecksum and TXTimestamp: AF_XDP TX metadata the driver honours
	// in zero-copy mode ("tx-checksum", "tx-timestamp").
	TXChecksum, TXTimestamp bool
}

// QueueStats are the counters one queue's driver keeps, by the netdev
// spec's names ("rx-packets", "tx-bytes", …; "attr-N" for counters newer
// than this package). A counter the driver does not keep is absent.
type QueueStats struct {
	Type     QueueType
	Queue    int
	Counters map[string]uint64
}

// Snapshot is the per-queue counters of a device at one time.
type Snapshot struct {
	Time time.Time
	// Source says where the counters come from, and so what their names
	// mean.
	Source StatsSource
	Queues []QueueStats
}

// StatsSource says where a Snapshot's counters come from.
type StatsSource string

// Sources of counters, in the order Device.Stats tries them.
const (
	// StatsQstats: the kernel's per-queue statistics (netdev qstats-get),
	// named as the netdev spec names them ("rx-packets").
	StatsQstats StatsSource = "netdev qstats"
	// StatsDriver: the driver's own per-queue counters, as `ethtool -S`
	// prints them, for drivers without qstats (veth). A counter is named
	// by the driver's string with the queue number taken out:
	// rx_queue_3_xdp_packets (veth), rx3_packets (mlx5, virtio-net),
	// rx-3.packets (i40e) and rxq3_packets are rx queue 3's
	// "rx_xdp_packets" or "rx_packets". What the counters count is the
	// driver's to say: veth's count only frames its NAPI or XDP path saw.
	StatsDriver StatsSource = "ethtool -S (driver strings)"
	// StatsDevice: the device's totals from /proc/net/dev (the thread's
	// network namespace), one WholeDevice row, for drivers that keep no
	// per-queue counters at all (lo). Counters are named by the file's
	// columns: rx_bytes, rx_packets, rx_errs, rx_drop, …, tx_colls,
	// tx_carrier, tx_compressed.
	StatsDevice StatsSource = "device totals (/proc/net/dev)"
)

// Delta is the change of the counters between two snapshots.
type Delta struct {
	// Interval is the time between the snapshots.
	Interval time.Duration
	// Source is the later snapshot's.
	Source StatsSource
	// Queues hold the counter differences. A counter that went backwards
	// (the queue was reconfigured) counts from 0.
	Queues []QueueStats
}

// Delta returns s minus prev, matching queues by type and ID. Queues only
// in s count from 0; queues only in prev are left out.
func (s Snapshot) Delta(prev Snapshot) Delta {
	d := Delta{Interval: s.Time.Sub(prev.Time), Source: s.Source}
	old := map[[2]any]QueueStats{}
	for _, q := range prev.Queues {
		old[[2]any{q.Type, q.Queue}] = q
	}
	for _, q := range s.Queues {
		p := old[[2]any{q.Type, q.Queue}]
		out := QueueStats{Type: q.Type, Queue: q.Queue, Counters: map[string]uint64{}}
		for k, v := range q.Counters {
			if pv, ok := p.Counters[k]; ok && pv <= v {
				out.Counters[k] = v - pv
			} else {
				out.Counters[k] = v
			}
		}
		d.Queues = append(d.Queues, out)
	}
	return d
}

// Rate returns counter name of q per second over the delta's interval.
func (d Delta) Rate(q QueueStats, name string) float64 {
	if d.Interval <= 0 {
		return 0
	}
	return float64(q.Counters[name]) / d.Interval.Seconds()
}

// Total sums each counter over the queues.
func Total(qs []QueueStats) map[string]uint64 {
	t := map[string]uint64{}
	for _, q := range qs {
		for k, v := range q.Counters {
			t[k] += v
		}
	}
	return t
}

// CounterNames returns the names in m, in the spec's order (rx before tx,
// packets before bytes as the spec lists them), unknown ones last.
func CounterNames(m map[string]uint64) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := counterRank(names[i]), counterRank(names[j])
		if a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	return names
}

var counterRanks = func() map[string]int {
	m := map[string]int{}
	for i, c := range netdev.Counters() {
		m[c.String()] = i
	}
	return m
}()

func counterRank(name string) int {
	if r, ok := counterRanks[name]; ok {
		return r
	}
	return len(counterRanks)
}

// Error is the error of one operation on a device. It wraps the cause
// (errors.Is(err, unix.ENOENT) works) and matches ErrNotSupported when
// NotSupported is set.
type Error struct {
	// Op names the operation, e.g. "set NAPI".
	Op string
	// Device is the interface name.
	Device string
	// NotSupported reports that the error means "not supported".
	NotSupported bool
	// Err is the cause.
	Err error
}

// Error formats the operation, the device and the cause.
func (e *Error) Error() string {
	s := "nic " + e.Device + ": " + e.Op
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrNotSupported and e means "not supported".
func (e *Error) Is(target error) bool {
	return target == ErrNotSupported && e.NotSupported
}
