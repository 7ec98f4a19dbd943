package netstack_test

import (
	"fmt"
	"io"
	"log"
	"net/netip"

	"github.com/xdpio/xdpio/netstack"
)

// A TCP echo server on an address of its own, 198.18.0.3, on eth1: the
// stack answers ARP for it and takes its frames; the kernel keeps the
// interface's other traffic.
func ExampleOpen() {
	st, err := netstack.Open("eth1", netstack.Config{
		Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.3/24")},
	})
	if err != nil {
		log.Fatal(err) // not root, no such device, another XDP program attached, ...
	}
	defer st.Close()
	l, err := st.ListenTCP(7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready:", st.Endpoint().Info())
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}
