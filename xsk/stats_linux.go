//go:build linux

package xsk

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stats returns the socket's counters. It may be called from any
// goroutine. The frame accounting is published after each operation, so it
// is exact when read by the goroutine that owns the socket; read from
// another goroutine it may mix two consecutive operations. After Close it
// returns the counters as they were when the socket closed (the kernel's
// read last, just before its descriptor was closed), so that what the
// kernel dropped stays visible.
func (s *Socket) Stats() (Stats, error) {
	if !s.enter() {
		return s.finalStats()
	}
	defer s.leave()
	return s.readStats()
}

// readStats reads the counters; the caller keeps the descriptor open.
func (s *Socket) readStats() (Stats, error) {
	var st Stats
	var raw unix.XDPStatistics
	n, err := getsockopt(s.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&raw), unsafe.Sizeof(raw))
	if err != nil {
		return st, fmt.Errorf("getsockopt XDP_STATISTICS: %w", err)
	}
	st.KernelStatsPresent = n == unsafe.Sizeof(raw)
	st.RXDropped = raw.Rx_dropped
	st.RXInvalidDescs = raw.Rx_invalid_descs
	st.TXInvalidDescs = raw.Tx_invalid_descs
	st.RXRingFull = raw.Rx_ring_full
	st.RXFillRingEmpty = raw.Rx_fill_ring_empty_descs
	st.TXRingEmptyDescs = raw.Tx_ring_empty_descs

	c := &s.ctr
	st.RXFrames, st.RXBytes = c.rxFrames.Load(), c.rxBytes.Load()
	st.TXFrames, st.TXBytes = c.txFrames.Load(), c.txBytes.Load()
	st.TXSubmitted, st.TXSubmittedBytes = c.txSubmitted.Load(), c.txSubmittedBytes.Load()
	st.Kicks, st.KickErrors, st.LinkDown = c.kicks.Load(), c.kickErrors.Load(), c.linkDown.Load()
	st.Polls, st.Wakeups, st.Naps = c.polls.Load(), c.wakeups.Load(), c.naps.Load()
	st.BadDescs, st.TXRingFull = c.rxBadDescs.Load(), c.txRingFull.Load()

	st.FramesFree = int(s.pub.freeRX.Load() + s.pub.freeTX.Load())
	st.FramesFill = int(s.pub.fill.Load())
	st.FramesTX = int(s.pub.tx.Load())
	st.FramesApp = int(s.pub.appRX.Load() + s.pub.appTX.Load())
	st.FramesLost = int(st.BadDescs)
	st.FramesOwned = s.owned
	st.ZeroCopy = s.zeroCopy
	st.NeedWakeupOn = !s.cfg.DisableNeedWakeup
	return st, nil
}
