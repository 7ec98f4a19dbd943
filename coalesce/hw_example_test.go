package coalesce_test

import (
	"errors"
	"fmt"

	"github.com/xdpio/xdpio/coalesce"
)

// Set a device's RX interrupt coalescing to 50 µs and turn adaptive RX
// moderation off, leaving every other parameter as it is.
func ExampleSet() {
	dev := coalesce.Device{Name: "eth1"}
	usecs, off := uint32(50), false
	err := coalesce.Set(dev, coalesce.HW{RXUsecs: &usecs, UseAdaptiveRX: &off})
	if errors.Is(err, coalesce.ErrNotSupported) {
		fmt.Println("no hardware coalescing:", err) // names the missing parameter
		return
	}
	if err != nil {
		fmt.Println(err) // the kernel's message for a refused value
		return
	}
	hw, _ := coalesce.Get(dev)
	fmt.Println("rx-usecs", *hw.RXUsecs)
}
