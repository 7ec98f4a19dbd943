package nic_test

import (
	"fmt"

	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
)

// Read a device's channel counts and RSS table (needs a device with RSS),
// and predict the RX queue of a flow from it.
func ExampleDevice_RSS() {
	d, err := nic.Open("eth0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	ch, err := d.Channels()
	if err != nil {
		fmt.Println(err)
		return
	}
	t, err := d.RSS()
	if err != nil {
		fmt.Println(err) // errors.Is(err, nic.ErrNotSupported) on devices without RSS
		return
	}
	fmt.Println(ch.Combined, len(t.Indir), t.HFunc)
	p, err := t.Predictor(rss.IndexLowBits)
	if err != nil {
		fmt.Println(err) // a hash function other than Toeplitz
		return
	}
	fmt.Println(p.Indirection()[:4])
}
