package napictl_test

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
)

// Example defers hard IRQs on one NAPI of eth0 while the program runs.
// It changes a device, so it only compiles.
func Example() {
	c, err := netdev.Dial()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	h, err := napictl.Apply(c, napictl.Request{
		Ifname: "eth0", Ifindex: 2, NAPIs: []uint32{8193},
		Settings: napictl.Settings{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close() // restores; after a crash, the next Apply does
}

// ExamplePath shows where the originals are recorded.
func ExamplePath() {
	fmt.Println(napictl.Path("", "eth0", 2))
	// Output: /run/xdpio/eth0-2.json
}
