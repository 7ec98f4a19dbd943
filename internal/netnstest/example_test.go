package netnstest_test

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// NewPair builds two namespaces joined by a 2-queue veth pair outside a
// test (the bench demo does this); tests use New, which also removes them
// at cleanup. A UDP datagram from A reaches a socket in B.
func ExampleNewPair() {
	pair, err := netnstest.NewPair(netnstest.Config{Queues: 2})
	if err != nil {
		fmt.Println(err) // needs root
		return
	}
	defer pair.Close()
	var rx *net.UDPConn
	dst := netip.AddrPortFrom(pair.B.IPv4, 9000)
	if err := pair.B.Do(func() (err error) {
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()
	err = pair.A.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
	buf := make([]byte, 16)
	n, _, _ := rx.ReadFrom(buf)
	fmt.Println(err, string(buf[:n]))
}
