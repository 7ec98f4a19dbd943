package asavieplane_test

import (
	"context"
	"log"
	"net"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/asavieplane"
	"github.com/xdpio/xdpio/bench/plane"
)

// An iperf3-compatible server whose UDP streams arrive through
// asavie/xdp's AF_XDP sockets on every queue of eth1, while the control
// connection stays with the kernel. (Needs root and an interface:
// compiled, not run.)
func ExampleDataPlane() {
	dp := &asavieplane.DataPlane{Iface: "eth1", OnClose: func(qs []plane.QueueCount) {
		for _, q := range qs {
			log.Printf("queue %d: %d packets, %d dropped", q.Queue, q.Packets, q.Dropped)
		}
	}}
	if err := dp.Check(); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":5201")
	if err != nil {
		log.Fatal(err)
	}
	srv := &bench.Server{DataPlane: dp}
	log.Fatal(srv.Serve(context.Background(), ln))
}
