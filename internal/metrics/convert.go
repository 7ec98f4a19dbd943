package metrics

import (
	"strconv"
	"time"

	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// queueNames are the queue labels of the common queue numbers, so that a
// scrape does not format them again.
var queueNames = func() []string {
	s := make([]string, 256)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

// Queue returns the queue label of queue number q: the number, "kernel"
// for xdpnet.KernelQueue (a conn's kernel socket), "" for a negative one
// (a device's totals).
func Queue(q int) string {
	switch {
	case q >= 0 && q < len(queueNames):
		return queueNames[q]
	case q == xdpnet.KernelQueue:
		return "kernel"
	case q < 0:
		return ""
	}
	return strconv.Itoa(q)
}

// XSK drop causes (the cause label of xdpio_xsk_rx_drops_total).
const (
	CauseRxDropped  = "rx_dropped"
	CauseRxRingFull = "rx_ring_full"
	CauseBadDesc    = "bad_desc"
)

// AddSocket adds the samples of one AF_XDP socket's counters.
func AddSocket(s *Set, device, queue string, st xsk.Stats) {
	s.Add(XSKRxFrames, float64(st.RXFrames), device, queue)
	s.Add(XSKRxBytes, float64(st.RXBytes), device, queue)
	s.Add(XSKTxFrames, float64(st.TXFrames), device, queue)
	s.Add(XSKTxBytes, float64(st.TXBytes), device, queue)
	s.Add(XSKTxSubmittedFrames, float64(st.TXSubmitted), device, queue)
	s.Add(XSKTxSubmittedBytes, float64(st.TXSubmittedBytes), device, queue)
	s.Add(XSKRxDrops, float64(st.RXDropped), device, queue, CauseRxDropped)
	s.Add(XSKRxDrops, float64(st.RXRingFull), device, queue, CauseRxRingFull)
	s.Add(XSKRxDrops, float64(st.BadDescs), device, queue, CauseBadDesc)
	s.Add(XSKRxInvalidDescs, float64(st.RXInvalidDescs), device, queue)
	s.Add(XSKTxInvalidDescs, float64(st.TXInvalidDescs), device, queue)
	s.Add(XSKFillRingEmpty, float64(st.RXFillRingEmpty), device, queue)
	s.Add(XSKTxRingEmpty, float64(st.TXRingEmptyDescs), device, queue)
	s.Add(XSKTxRingFull, float64(st.TXRingFull), device, queue)
	s.Add(XSKKicks, float64(st.Kicks), device, queue)
	s.Add(XSKKickErrors, float64(st.KickErrors), device, queue)
	s.Add(XSKLinkDown, float64(st.LinkDown), device, queue)
	s.Add(XSKPolls, float64(st.Polls), device, queue)
	s.Add(XSKNaps, float64(st.Naps), device, queue)
	s.Add(XSKWakeups, float64(st.Wakeups), device, queue)
	s.Add(XSKFrames, float64(st.FramesFree), device, queue, "free")
	s.Add(XSKFrames, float64(st.FramesFill), device, queue, "fill")
	s.Add(XSKFrames, float64(st.FramesTX), device, queue, "tx")
	s.Add(XSKFrames, float64(st.FramesApp), device, queue, "app")
	s.Add(XSKFrames, float64(st.FramesLost), device, queue, "lost")
	s.Add(XSKZeroCopy, b2f(st.ZeroCopy), device, queue)
}

// ConnDropCauses are the cause labels of xdpio_conn_drops_total, in the
// order of xdpnet.Drops's fields (and named as its JSON names them).
var ConnDropCauses = []string{"not_ip", "malformed", "fragment", "not_udp", "not_for_us",
	"bad_checksum", "partial_checksum", "zero_checksum6", "other_peer", "martian_source"}

// connDrops returns d's counters in the order of ConnDropCauses.
func connDrops(d xdpnet.Drops) [10]uint64 {
	return [10]uint64{d.NotIP, d.Malformed, d.Fragment, d.NotUDP, d.NotForUs,
		d.BadChecksum, d.PartialChecksum, d.ZeroChecksum6, d.OtherPeer, d.MartianSource}
}

// AddConnQueue adds the samples of one queue of an xdpnet conn called conn
// on device: its datagram counters, and, for an AF_XDP queue (not the
// kernel's socket), its socket's (AddSocket).
func AddConnQueue(s *Set, conn, device string, st xdpnet.QueueStats) {
	queue := Queue(st.Queue)
	s.Add(ConnDatagrams, float64(st.Datagrams), conn, device, queue)
	s.Add(ConnBytes, float64(st.Bytes), conn, device, queue)
	s.Add(ConnTruncated, float64(st.Truncated), conn, device, queue)
	for i, v := range connDrops(st.Drops) {
		s.Add(ConnDrops, float64(v), conn, device, queue, ConnDropCauses[i])
	}
	s.Add(ConnSent, float64(st.Sent), conn, device, queue)
	s.Add(ConnSentBytes, float64(st.SentBytes), conn, device, queue)
	if st.Queue != xdpnet.KernelQueue {
		AddSocket(s, device, queue, st.Socket)
	}
}

// AddConn adds the samples of an xdpnet conn's Stats.
func AddConn(s *Set, conn, device string, st xdpnet.Stats) {
	for _, q := range st.Queues {
		AddConnQueue(s, conn, device, q)
	}
	s.Add(ConnDetached, b2f(st.Detached), conn, device)
}

// Stats sources (the source label of xdpio_nic_stats_source).
var sourceNames = map[nic.StatsSource]string{
	nic.StatsQstats: "qstats",
	nic.StatsDriver: "driver",
	nic.StatsDevice: "device",
}

// SourceName returns the source label of a nic.StatsSource: "qstats",
// "driver", "device", or the source's own text for one this package does
// not know.
func SourceName(src nic.StatsSource) string {
	if n, ok := sourceNames[src]; ok {
		return n
	}
	return string(src)
}

// AddNICStats adds a device's per-queue counters (a nic.Snapshot): one
// NICCounter family per counter name, and xdpio_nic_stats_source.
func AddNICStats(s *Set, device string, snap nic.Snapshot) {
	s.Add(NICStatsSource, 1, device, SourceName(snap.Source))
	for _, q := range snap.Queues {
		queue := Queue(q.Queue)
		if q.Type == nic.WholeDevice {
			queue = ""
		}
		for _, name := range nic.CounterNames(q.Counters) {
			s.Add(NICCounter(name), float64(q.Counters[name]), device, queue)
		}
	}
}

// AddNAPIs adds the settings of a device's NAPI instances; a setting the
// kernel did not report is left out.
func AddNAPIs(s *Set, device string, napis []nic.NAPI) {
	for _, n := range napis {
		id := strconv.FormatUint(uint64(n.ID), 10)
		if v := n.DeferHardIRQs; v != nil {
			s.Add(NICNAPIDeferHard, float64(*v), device, id)
		}
		if v := n.GROFlushTimeout; v != nil {
			s.Add(NICNAPIGROFlush, seconds(*v), device, id)
		}
		if v := n.IRQSuspendTimeout; v != nil {
			s.Add(NICNAPIIRQSuspend, seconds(*v), device, id)
		}
	}
}

// AddQueues adds a device's queues: xdpio_nic_queue_info and
// xdpio_nic_queue_af_xdp.
func AddQueues(s *Set, device string, qs []nic.Queue) {
	for _, q := range qs {
		napi := ""
		if q.NAPIID != 0 {
			napi = strconv.FormatUint(uint64(q.NAPIID), 10)
		}
		s.Add(NICQueueInfo, 1, device, string(q.Type), Queue(q.ID), napi)
		s.Add(NICQueueAFXDP, b2f(q.XSK), device, string(q.Type), Queue(q.ID))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func seconds(d time.Duration) float64 { return d.Seconds() }
