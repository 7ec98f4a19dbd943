package nsdo_test

import (
	"fmt"
	"net"

	"github.com/xdpio/xdpio/internal/nsdo"
)

// A UDP socket opened inside the namespace "blue" (made with `ip netns add
// blue`) stays there; the calling goroutine's thread comes back to its own
// namespace.
func ExampleDoNamed() {
	var c net.PacketConn
	err := nsdo.DoNamed("blue", func() (err error) {
		c, err = net.ListenPacket("udp", "198.18.0.1:9000")
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("listening in blue on", c.LocalAddr())
}
