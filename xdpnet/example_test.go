package xdpnet_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/xdpio/xdpio/xdpnet"
)

// An echo server on UDP port 7 of eth0, as a net.PacketConn. (It needs
// root and an interface, so the example only compiles.)
func ExampleListenUDP() {
	c, err := xdpnet.ListenUDP("eth0", netip.MustParseAddrPort("[::]:7"), xdpnet.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			log.Fatal(err) // net.ErrClosed after Close
		}
		if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
			log.Print(err) // this sender is unreachable: go on
		}
	}
}

// The fast path: one goroutine per RX queue reads datagrams in place and
// answers through its own queue.
func ExampleUDPConn_Queues() {
	c, err := xdpnet.ListenUDP("eth0", netip.MustParseAddrPort("198.18.0.2:7"), xdpnet.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, q := range c.Queues() {
		go func(q *xdpnet.Queue) {
			msgs := make([]xdpnet.Message, 64)
			for {
				n, err := q.ReadView(msgs, -1) // views valid until the next ReadView
				if err != nil {
					return
				}
				for i := range msgs[:n] {
					msgs[i].Buf = msgs[i].Buf[:msgs[i].N]
				}
				q.WriteBatch(msgs[:n])
			}
		}(q)
	}
	select {}
}

// Drops are counted by cause: what a conn got and did not deliver.
func ExampleDrops() {
	d := xdpnet.Drops{BadChecksum: 2, PartialChecksum: 10}
	fmt.Println(d.Total())
	// Output: 12
}
