//go:build linux

package xsk

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stats are a socket's counters: the kernel's XDP_STATISTICS, the library's
// own, and where every frame of the socket is right now.
type Stats struct {
	// Kernel counters (XDP_STATISTICS).
	RxDropped          uint64 // dropped for reasons other than invalid descriptors
	RxInvalidDescs     uint64 // RX descriptors the kernel found invalid
	TxInvalidDescs     uint64 // TX descriptors the kernel found invalid
	RxRingFull         uint64 // dropped because the RX ring was full
	RxFillRingEmpty    uint64 // times the fill ring was empty when a packet came
	TxRingEmptyDescs   uint64 // times the kernel found the TX ring empty
	KernelStatsPresent bool   // false if the kernel lacks XDP_STATISTICS fields

	// Library counters.
	RxFrames, RxBytes uint64 // received through Receive
	TxFrames, TxBytes uint64 // put on the TX ring through Transmit
	Kicks             uint64 // TX wake-up syscalls
	KickErrors        uint64 // kicks that met a transient EAGAIN/EBUSY/ENOBUFS
	Polls             uint64 // blocking waits
	Wakeups           uint64 // RX wake-up syscalls (need_wakeup, busy poll)
	BadDescs          uint64 // descriptors from the kernel outside the UMEM, dropped
	TxRingFull        uint64 // Transmit calls that found the TX ring full

	// Frame accounting: every frame of the socket is in exactly one place.
	FramesFree   int // in the socket's pool
	FramesFill   int // given to the kernel for RX (fill ring, RX ring, in flight)
	FramesTx     int // on the TX ring or awaiting completion
	FramesApp    int // held by the application in batches
	FramesLost   int // dropped as bad descriptors
	FramesOwned  int // taken from the UMEM at creation
	ZeroCopy     bool
	NeedWakeupOn bool
}

// Stats returns the socket's counters. The kernel and library counters may
// be read from any goroutine; the frame accounting is exact only when read
// by the goroutine that owns the socket.
func (s *Socket) Stats() (Stats, error) {
	var st Stats
	var raw unix.XDPStatistics
	if s.fd < 0 || s.closed.Load() {
		return st, ErrClosed
	}
	n, err := getsockopt(s.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&raw), unsafe.Sizeof(raw))
	if err != nil {
		return st, fmt.Errorf("getsockopt XDP_STATISTICS: %w", err)
	}
	st.KernelStatsPresent = n == unsafe.Sizeof(raw)
	st.RxDropped = raw.Rx_dropped
	st.RxInvalidDescs = raw.Rx_invalid_descs
	st.TxInvalidDescs = raw.Tx_invalid_descs
	st.RxRingFull = raw.Rx_ring_full
	st.RxFillRingEmpty = raw.Rx_fill_ring_empty_descs
	st.TxRingEmptyDescs = raw.Tx_ring_empty_descs

	c := &s.ctr
	st.RxFrames, st.RxBytes = c.rxFrames.Load(), c.rxBytes.Load()
	st.TxFrames, st.TxBytes = c.txFrames.Load(), c.txBytes.Load()
	st.Kicks, st.KickErrors = c.kicks.Load(), c.kickErrors.Load()
	st.Polls, st.Wakeups = c.polls.Load(), c.wakeups.Load()
	st.BadDescs, st.TxRingFull = c.rxBadDescs.Load(), c.txRingFull.Load()

	st.FramesFree = s.pool.len()
	st.FramesFill = int(s.inFill)
	st.FramesTx = int(s.inTx)
	st.FramesApp = int(s.inApp)
	st.FramesLost = int(st.BadDescs)
	st.FramesOwned = s.owned
	st.ZeroCopy = s.zeroCopy
	st.NeedWakeupOn = !s.cfg.DisableNeedWakeup
	return st, nil
}
