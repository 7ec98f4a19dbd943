// Package metrics is the one definition of the Prometheus metrics xdpio
// exports: each family's name, type, help text and labels, and the
// functions that turn the library's counters (xsk.Stats, xdpnet.QueueStats,
// nic.Snapshot, nic.NAPI, nic.Queue) into samples. Two exporters use it:
// `xdpio exporter`, which writes the text exposition format itself (the
// core module never imports client_golang), and the collectors of
// contrib/prometheus, which turn the same samples into
// prometheus.Metrics.
//
// Names follow Prometheus's conventions: the xdpio_ prefix, _total on
// counters, base units (seconds, bytes). Labels are device (the
// interface), queue (the queue number; "kernel" for a conn's kernel
// socket; empty for a device's totals), conn (the name of an xdpnet conn's
// collector), and cause (why a frame was dropped: one label, not one
// family per cause).
//
// A scrape gathers its samples into a Set, which keeps them in flat,
// reused slices:
//
//	var s metrics.Set
//	for _, sk := range dev.Sockets() {
//		st, err := sk.Stats()
//		if err == nil {
//			metrics.AddSocket(&s, dev.Name(), metrics.Queue(sk.Queue()), st)
//		}
//	}
//	s.WriteText(w) // the text exposition format, version 0.0.4
//
// A NICReader reads a nic.Device (per-queue counters, NAPI settings, queues)
// inside the network namespace it was opened in, from any goroutine, and
// reports a failed read as xdpio_nic_scrape_success 0 instead of stale
// values.
package metrics
