package netdev_test

import (
	"fmt"
	"net"

	"github.com/xdpio/xdpio/internal/netdev"
)

// Example lists the NAPI instances of a device with their deferral
// settings. It needs a device with NAPI instances, so it only compiles.
func Example() {
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := netdev.Dial()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	napis, err := c.NAPIs(ifi.Index)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range napis {
		fmt.Printf("napi %d irq %d defer-hard-irqs %v\n", n.ID, n.IRQ, n.DeferHardIRQs)
	}
}

// ExampleCounter prints the names of the per-queue counters.
func ExampleCounter() {
	var s netdev.QStats
	s.Set(netdev.RXPackets, 10)
	s.Set(netdev.Counter(99), 1) // a counter from a newer kernel
	for _, c := range s.Reported() {
		v, _ := s.Get(c)
		fmt.Println(c, v)
	}
	// Output:
	// rx-packets 10
	// attr-99 1
}
