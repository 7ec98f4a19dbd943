//go:build linux

package xsk

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
