// Package xdpprom exports xdpio's counters to Prometheus: a
// prometheus.Collector for the AF_XDP sockets of an xsk.Device
// (SocketCollector), one for an xdpnet.UDPConn (ConnCollector) and one for
// a network device's per-queue counters, NAPI settings and queues
// (NICCollector).
//
//	reg := prometheus.NewRegistry()
//	conns := xdpprom.NewConnCollector("dns", conn)
//	reg.MustRegister(conns)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//	...
//	conn.Close()
//	conn, err = xdpnet.ListenUDP(...) // a reconfiguration
//	conns.Replace(conn)               // the counters go on from the old conn's
//
// The metric families are the ones `xdpio exporter` serves, defined once in
// the xdpio module (names, help texts, labels): xdpio_xsk_* for sockets,
// xdpio_conn_* for conns, xdpio_nic_* for devices. Counters end in _total,
// durations are in seconds; the labels are device, queue, conn (the name a
// ConnCollector was given) and cause (why frames were dropped, one label
// over all causes).
//
// # Counters that never go backwards
//
// The counters of a socket or conn live as long as it does. A
// SocketCollector or ConnCollector keeps, per series, what the endpoints it
// was handed before had counted: after Replace the new one's counters are
// added to the old one's last values, so a reopen of the device or the
// conn (a configuration change, a restart of its queues) continues every
// counter instead of restarting it at zero. After Close, xsk and xdpnet
// report the counters as they were at Close, and the collectors keep
// exporting those; if a socket's counters cannot be read at all, the last
// values read are exported. A device's own counters (NICCollector) are the
// kernel's, exported as they are.
//
// # Cost
//
// Collect reads counters the data path keeps in atomics, without a lock
// the data path takes: for a socket, one getsockopt(XDP_STATISTICS) system
// call and its library counters; for a conn, the same per queue. A
// NICCollector holds the nic.Device's netlink clients for its life, so a
// scrape opens no socket. Each collector serialises its own Collects.
// On the project's 2-core VM (BenchmarkCollect, 4 queues): a
// SocketCollector's Collect takes about 25 µs and 104 allocations (one per
// metric), a ConnCollector's about 60 µs, a NICCollector's of a veth in
// another namespace about 0.9 ms (the kernel's netlink and ethtool work).
// BenchmarkScrapeEffect scrapes every 10 ms, 100 times Prometheus's usual
// rate, while an rxdrop receiver takes 12.5 Mpps: with the sockets' collector
// no change shows; with the veth's too, the receiver loses about 12% of its
// packets/s then, so about 0.1% at one scrape a second.
//
// The collectors are unchecked (Describe sends no descriptors): their
// series depend on the devices' queues and counters, and several of them
// share families, so several may be registered in one registry.
//
// It is a separate Go module, so that xdpio's own module does not pull in
// client_golang.
package xdpprom
