package metrics_test

import (
	"os"
	"time"

	"github.com/xdpio/xdpio/internal/metrics"
	"github.com/xdpio/xdpio/nic"
)

// A scrape's samples go into a Set, which writes them in the text
// exposition format: families sorted by name, each with its HELP and TYPE.
func ExampleSet_WriteText() {
	defer2, flush := uint32(2), 200*time.Microsecond
	var s metrics.Set
	metrics.AddNAPIs(&s, "eth0", []nic.NAPI{{ID: 8193, NAPISettings: nic.NAPISettings{DeferHardIRQs: &defer2, GROFlushTimeout: &flush}}})
	s.Add(metrics.NICCounter("rx-packets"), 1234567, "eth0", metrics.Queue(0))
	s.WriteText(os.Stdout)
	// Output:
	// # HELP xdpio_nic_napi_defer_hard_irqs How many consecutive empty polls keep the NAPI instance's hardware IRQs masked (napi_defer_hard_irqs).
	// # TYPE xdpio_nic_napi_defer_hard_irqs gauge
	// xdpio_nic_napi_defer_hard_irqs{device="eth0",napi_id="8193"} 2
	// # HELP xdpio_nic_napi_gro_flush_timeout_seconds The NAPI instance's gro_flush_timeout: the timer that polls instead of an IRQ while IRQs are deferred.
	// # TYPE xdpio_nic_napi_gro_flush_timeout_seconds gauge
	// xdpio_nic_napi_gro_flush_timeout_seconds{device="eth0",napi_id="8193"} 0.0002
	// # HELP xdpio_nic_rx_packets_total Per-queue counter rx-packets of the device (the source xdpio_nic_stats_source names: the kernel's netdev qstats, the driver's ethtool -S, or /proc/net/dev's totals, queue empty).
	// # TYPE xdpio_nic_rx_packets_total counter
	// xdpio_nic_rx_packets_total{device="eth0",queue="0"} 1234567
}
