package nic_test

import (
	"errors"
	"fmt"

	"github.com/xdpio/xdpio/nic"
)

// Set a device's RX interrupt coalescing to 50 µs and turn adaptive RX
// moderation off, leaving every other parameter as it is.
func ExampleDevice_SetCoalesce() {
	d, err := nic.Open("eth1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	usecs, off := uint32(50), false
	err = d.SetCoalesce(nic.Coalesce{RXUsecs: &usecs, UseAdaptiveRX: &off})
	if errors.Is(err, nic.ErrNotSupported) {
		fmt.Println("no hardware coalescing:", err) // names the missing parameter
		return
	}
	if err != nil {
		fmt.Println(err) // the kernel's message for a refused value
		return
	}
	hw, _ := d.Coalesce()
	fmt.Println("rx-usecs", *hw.RXUsecs)
}
