package metrics

import (
	"sort"
	"strings"
	"sync"
)

// Type is a family's metric type.
type Type int

// Metric types. A counter only goes up (its name ends in _total); a gauge
// goes up and down.
const (
	Counter Type = iota
	Gauge
)

// String returns the type as the text format's TYPE line spells it.
func (t Type) String() string {
	if t == Counter {
		return "counter"
	}
	return "gauge"
}

// Family is one metric family: a name, a type, a help text and the names
// of its labels, in the order Set.Add takes their values.
type Family struct {
	Name   string
	Type   Type
	Help   string
	Labels []string
}

// The label sets.
var (
	queueLabels      = []string{"device", "queue"}
	queueCauseLabels = []string{"device", "queue", "cause"}
	connLabels       = []string{"conn", "device", "queue"}
	connCauseLabels  = []string{"conn", "device", "queue", "cause"}
)

// MaxLabels is the most labels a family has.
const MaxLabels = 4

func counter(name, help string, labels []string) *Family {
	return &Family{Name: name, Type: Counter, Help: help, Labels: labels}
}

func gauge(name, help string, labels []string) *Family {
	return &Family{Name: name, Type: Gauge, Help: help, Labels: labels}
}

// AF_XDP sockets (xsk.Stats), labels device and queue.
var (
	XSKRxFrames          = counter("xdpio_xsk_rx_frames_total", "Frames the application received from the AF_XDP socket's RX ring.", queueLabels)
	XSKRxBytes           = counter("xdpio_xsk_rx_bytes_total", "Bytes of the frames the application received from the AF_XDP socket's RX ring.", queueLabels)
	XSKTxFrames          = counter("xdpio_xsk_tx_frames_total", "Frames the kernel finished sending (returned through the completion ring).", queueLabels)
	XSKTxBytes           = counter("xdpio_xsk_tx_bytes_total", "Bytes of the frames the kernel finished sending.", queueLabels)
	XSKTxSubmittedFrames = counter("xdpio_xsk_tx_submitted_frames_total", "Frames put on the TX ring, sent or not yet.", queueLabels)
	XSKTxSubmittedBytes  = counter("xdpio_xsk_tx_submitted_bytes_total", "Bytes of the frames put on the TX ring, sent or not yet.", queueLabels)
	XSKRxDrops           = counter("xdpio_xsk_rx_drops_total", "Frames for the socket it did not get, by cause: rx_dropped (the kernel's: no fill-ring frame to copy into, or too long), rx_ring_full (the kernel's: the RX ring was full), bad_desc (the library's: a descriptor outside the UMEM).", queueCauseLabels)
	XSKRxInvalidDescs    = counter("xdpio_xsk_rx_invalid_descs_total", "Descriptors the kernel found invalid on the RX side (XDP_STATISTICS rx_invalid_descs).", queueLabels)
	XSKTxInvalidDescs    = counter("xdpio_xsk_tx_invalid_descs_total", "TX descriptors the kernel found invalid (XDP_STATISTICS tx_invalid_descs).", queueLabels)
	XSKFillRingEmpty     = counter("xdpio_xsk_fill_ring_empty_total", "Times a frame came and the fill ring was empty (XDP_STATISTICS rx_fill_ring_empty_descs): the application did not give frames back fast enough.", queueLabels)
	XSKTxRingEmpty       = counter("xdpio_xsk_tx_ring_empty_total", "Times the kernel found the TX ring empty (XDP_STATISTICS tx_ring_empty_descs).", queueLabels)
	XSKTxRingFull        = counter("xdpio_xsk_tx_ring_full_total", "Transmit calls that found the TX ring full.", queueLabels)
	XSKKicks             = counter("xdpio_xsk_kicks_total", "TX wake-up system calls.", queueLabels)
	XSKKickErrors        = counter("xdpio_xsk_kick_errors_total", "TX wake-ups that met a transient EAGAIN, EBUSY or ENOBUFS.", queueLabels)
	XSKLinkDown          = counter("xdpio_xsk_link_down_total", "TX wake-ups refused because the link was down.", queueLabels)
	XSKPolls             = counter("xdpio_xsk_polls_total", "Blocking waits in poll.", queueLabels)
	XSKNaps              = counter("xdpio_xsk_naps_total", "RX waits that napped on a timer first.", queueLabels)
	XSKWakeups           = counter("xdpio_xsk_wakeups_total", "RX wake-up system calls (need_wakeup, busy poll).", queueLabels)
	XSKFrames            = gauge("xdpio_xsk_frames", "Frames of the socket by where they are now: free (in its pools), fill (lent to the kernel for RX), tx (on the TX ring or awaiting completion), app (held by the application), lost (dropped as bad descriptors).", []string{"device", "queue", "place"})
	XSKZeroCopy          = gauge("xdpio_xsk_zero_copy", "1 when the socket is bound in zero-copy mode, 0 in copy mode.", queueLabels)
)

// xdpnet conns (xdpnet.QueueStats), labels conn, device and queue.
var (
	ConnDatagrams = counter("xdpio_conn_datagrams_total", "UDP datagrams delivered to the application.", connLabels)
	ConnBytes     = counter("xdpio_conn_bytes_total", "Payload bytes of the UDP datagrams delivered to the application.", connLabels)
	ConnTruncated = counter("xdpio_conn_truncated_total", "Datagrams that did not fit the reader's buffer.", connLabels)
	ConnDrops     = counter("xdpio_conn_drops_total", "Received frames not delivered, by cause (xdpnet.Drops): not_ip, malformed, fragment, not_udp, not_for_us, bad_checksum, partial_checksum, zero_checksum6, other_peer, martian_source.", connCauseLabels)
	ConnSent      = counter("xdpio_conn_sent_datagrams_total", "UDP datagrams handed to the kernel for sending.", connLabels)
	ConnSentBytes = counter("xdpio_conn_sent_bytes_total", "Payload bytes of the UDP datagrams handed to the kernel for sending.", connLabels)
	ConnDetached  = gauge("xdpio_conn_detached", "1 once someone else detached the conn's XDP program: datagrams reach it through its kernel socket only.", []string{"conn", "device"})
)

// Network devices (package nic). The per-queue counters are one family per
// counter name (NICCounter).
var (
	NICStatsSource     = gauge("xdpio_nic_stats_source", "1 for the source of the device's xdpio_nic_*_total counters: qstats (the kernel's per-queue statistics), driver (the driver's per-queue ethtool -S counters), device (the device's totals from /proc/net/dev).", []string{"device", "source"})
	NICQueueInfo       = gauge("xdpio_nic_queue_info", "1 for each RX and TX queue of the device, with the NAPI instance that services it (napi_id empty when the driver does not say).", []string{"device", "type", "queue", "napi_id"})
	NICQueueAFXDP      = gauge("xdpio_nic_queue_af_xdp", "1 when an AF_XDP socket is bound to the queue.", []string{"device", "type", "queue"})
	NICNAPIDeferHard   = gauge("xdpio_nic_napi_defer_hard_irqs", "How many consecutive empty polls keep the NAPI instance's hardware IRQs masked (napi_defer_hard_irqs).", []string{"device", "napi_id"})
	NICNAPIGROFlush    = gauge("xdpio_nic_napi_gro_flush_timeout_seconds", "The NAPI instance's gro_flush_timeout: the timer that polls instead of an IRQ while IRQs are deferred.", []string{"device", "napi_id"})
	NICNAPIIRQSuspend  = gauge("xdpio_nic_napi_irq_suspend_timeout_seconds", "The NAPI instance's irq-suspend-timeout: how long IRQs stay suspended while a busy-polling application keeps up.", []string{"device", "napi_id"})
	NICScrapeSuccess   = gauge("xdpio_nic_scrape_success", "1 when the part of the device (stats, napi, queues) was read in this scrape, 0 when reading it failed (the device is gone, for one); a part the kernel or driver does not offer is left out.", []string{"device", "part"})
	NICScrapeDuration  = gauge("xdpio_nic_scrape_duration_seconds", "How long reading the device took in this scrape.", []string{"device"})
	nicCounterTemplate = "Per-queue counter %s of the device (the source xdpio_nic_stats_source names: the kernel's netdev qstats, the driver's ethtool -S, or /proc/net/dev's totals, queue empty)."
)

// Families returns every family with a fixed name, sorted by name. The
// per-queue counters of a device (NICCounter) come on top.
func Families() []*Family {
	fs := []*Family{
		XSKRxFrames, XSKRxBytes, XSKTxFrames, XSKTxBytes, XSKTxSubmittedFrames, XSKTxSubmittedBytes, XSKRxDrops,
		XSKRxInvalidDescs, XSKTxInvalidDescs, XSKFillRingEmpty, XSKTxRingEmpty, XSKTxRingFull,
		XSKKicks, XSKKickErrors, XSKLinkDown, XSKPolls, XSKNaps, XSKWakeups, XSKFrames, XSKZeroCopy,
		ConnDatagrams, ConnBytes, ConnTruncated, ConnDrops, ConnSent, ConnSentBytes, ConnDetached,
		NICStatsSource, NICQueueInfo, NICQueueAFXDP, NICNAPIDeferHard, NICNAPIGROFlush, NICNAPIIRQSuspend,
		NICScrapeSuccess, NICScrapeDuration,
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	return fs
}

// NICCounterPrefix starts the name of every per-queue counter family of a
// device.
const NICCounterPrefix = "xdpio_nic_"

var nicCounters sync.Map // counter name → *Family

// NICCounter returns the family of a device's per-queue counter by the
// name nic gives it ("rx-packets" from qstats, "rx_xdp_packets" from
// veth's ethtool -S, "rx_drop" from /proc/net/dev): xdpio_nic_ and the
// name in snake case with _total, each character a metric name cannot
// hold turned into "_" ("xdpio_nic_rx_packets_total"). Labels device and
// queue. It returns the same *Family for the same name.
func NICCounter(name string) *Family {
	if f, ok := nicCounters.Load(name); ok {
		return f.(*Family)
	}
	help := strings.Replace(nicCounterTemplate, "%s", strings.ToValidUTF8(name, "\uFFFD"), 1)
	f, _ := nicCounters.LoadOrStore(name, counter(NICCounterName(name), help, queueLabels))
	return f.(*Family)
}

// NICCounterName is the family name NICCounter gives counter name.
func NICCounterName(name string) string {
	var b strings.Builder
	b.Grow(len(NICCounterPrefix) + len(name) + len("_total"))
	b.WriteString(NICCounterPrefix)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c - 'A' + 'a')
		default:
			b.WriteByte('_')
		}
	}
	if !strings.HasSuffix(b.String(), "_total") {
		b.WriteString("_total")
	}
	return b.String()
}
