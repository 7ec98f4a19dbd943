package ethtool_test

import (
	"errors"
	"fmt"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// Read a device's channel counts, then ask for two combined channels. A
// value the device refuses comes back with the kernel's own message.
func ExampleClient() {
	c, err := ethtool.Dial() // in the calling thread's network namespace
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	dev := ethtool.Device{Name: "eth1"}
	ch, err := c.Channels(dev)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("combined %d of %d\n", ch.Combined, ch.CombinedMax)
	two := uint32(2)
	err = c.SetChannels(dev, ethtool.ChannelsConfig{Combined: &two})
	var e *ethtool.Error
	switch {
	case errors.Is(err, ethtool.ErrNotSupported):
		fmt.Println("not supported:", err)
	case errors.As(err, &e):
		fmt.Println("kernel says:", e.Message, "about", e.Attr)
	}
}
