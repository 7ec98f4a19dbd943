package nic_test

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/nic"
)

// Example prints each queue of eth0 with its NAPI and IRQ, and the NAPI
// deferral settings. It needs a device, so it only compiles.
func Example() {
	d, err := nic.Open("eth0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	qs, err := d.Queues()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range qs {
		fmt.Printf("%s %d: napi %d irq %d af_xdp %v\n", q.Type, q.ID, q.NAPIID, q.IRQ, q.XSK)
	}
	napis, err := d.NAPIs(nic.AllNAPIs())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range napis {
		fmt.Printf("napi %d: %v\n", n.ID, n.NAPISettings)
	}
}

// ExampleSnapshot_Delta turns two snapshots into per-second rates.
func ExampleSnapshot_Delta() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := nic.Snapshot{Time: t0, Queues: []nic.QueueStats{
		{Type: nic.RX, Queue: 0, Counters: map[string]uint64{"rx-packets": 1000, "rx-bytes": 64000}},
	}}
	cur := nic.Snapshot{Time: t0.Add(2 * time.Second), Queues: []nic.QueueStats{
		{Type: nic.RX, Queue: 0, Counters: map[string]uint64{"rx-packets": 5000, "rx-bytes": 320000}},
	}}
	d := cur.Delta(prev)
	for _, q := range d.Queues {
		for _, name := range nic.CounterNames(q.Counters) {
			fmt.Printf("%s %d %s %d (%.0f/s)\n", q.Type, q.Queue, name, q.Counters[name], d.Rate(q, name))
		}
	}
	// Output:
	// rx 0 rx-packets 4000 (2000/s)
	// rx 0 rx-bytes 256000 (128000/s)
}
