package labctl_test

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpio/xdpio/test/lab/labctl"
)

// Frame builds the Ethernet frame the host-side sender writes for a flow,
// and ParseFlow reads the flow back from it, as a guest test does with
// what its AF_XDP sockets received.
func ExampleFrame() {
	f := labctl.Flow{Src: netip.MustParseAddr("198.18.1.1"), Dst: netip.MustParseAddr("198.18.1.2"), SPort: 40000, DPort: 9000, Proto: 17}
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	frame, err := labctl.Frame(f, src, dst, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := labctl.ParseFlow(frame)
	fmt.Println(back, err)
	// Output: udp 198.18.1.1:40000 > 198.18.1.2:9000 <nil>
}
