package xskplane_test

import (
	"context"
	"log"
	"net/netip"
	"os"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/xskplane"
)

// A UDP client whose four streams leave through AF_XDP sockets on eth1
// (package xdpnet), against an iperf3 server; the control connection
// stays with the kernel. (Needs root and an interface: compiled, not
// run.)
func ExampleDataPlane() {
	cl := &bench.Client{
		Server:    netip.MustParseAddrPort("198.18.0.2:5201"),
		UDP:       true,
		DataPlane: &xskplane.DataPlane{Iface: "eth1"},
		Streams:   4,
		Bitrate:   100e6,
	}
	rep, err := cl.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	rep.WriteText(os.Stdout)
}
