package xdpprom_test

import (
	"log"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	xdpprom "github.com/xdpio/xdpio/contrib/prometheus"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xdpnet"
)

// An xdpnet server exports its conn's counters and its device's on
// /metrics, and keeps them counting when it opens the conn again.
// (It needs root and an interface, so it only compiles here.)
func Example() {
	laddr := netip.MustParseAddrPort("192.0.2.1:5353")
	conn, err := xdpnet.ListenUDP("eth0", laddr, xdpnet.Config{})
	if err != nil {
		log.Fatal(err)
	}
	conns := xdpprom.NewConnCollector("mdns", conn)
	d, err := nic.Open("eth0") // one netlink client for the process's life
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	devs, err := xdpprom.NewNICCollector(d)
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(conns, devs)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go http.ListenAndServe("127.0.0.1:9436", nil)

	// … later, a reconfiguration: the conn is opened again, and the
	// exported counters go on from the old conn's.
	conn.Close()
	if conn, err = xdpnet.ListenUDP("eth0", laddr, xdpnet.Config{Queues: []int{0, 1}}); err != nil {
		log.Fatal(err)
	}
	conns.Replace(conn)
}
