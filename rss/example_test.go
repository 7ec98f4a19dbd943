package rss_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/rss"
)

// The first flow of Microsoft's RSS verification suite, hashed with the
// default key, and the queue it lands on with the kernel's default table
// for 4 queues.
func Example() {
	t, err := rss.NewToeplitz(nil) // nil: the default key
	if err != nil {
		panic(err)
	}
	k := rss.FlowKey{
		Src: netip.MustParseAddr("66.9.149.187"), SrcPort: 2794,
		Dst: netip.MustParseAddr("161.142.100.80"), DstPort: 1766,
		Ports: true,
	}
	fmt.Printf("hash %#08x\n", t.HashFlow(k, rss.SymmetricNone))

	table, _ := rss.Equal(4, rss.DefaultTableSize)
	p, err := rss.NewPredictor(rss.PredictorOptions{Indirection: table})
	if err != nil {
		panic(err)
	}
	q, _ := p.Queue(k)
	fmt.Println("queue", q)
	// Output:
	// hash 0x51ccc178
	// queue 0
}

// A client that opens 4 connections to a server with 4 RX queues picks
// source ports that put them on 4 different queues.
func ExamplePredictor_Spread() {
	table, _ := rss.Equal(4, rss.DefaultTableSize)
	p, _ := rss.NewPredictor(rss.PredictorOptions{Indirection: table})
	k := rss.FlowKey{
		Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
		DstPort: 5201, Proto: 6, Ports: true,
	}
	placed, err := p.Spread(k, 4, rss.PlaceOptions{}) // source ports from 32768
	if err != nil {
		panic(err)
	}
	for _, x := range placed {
		k.SrcPort = x.Port
		q, _ := p.Queue(k)
		fmt.Printf("port %d -> queue %d (predicted %d)\n", x.Port, x.Queue, q)
	}
	// Output:
	// port 32768 -> queue 3 (predicted 3)
	// port 32769 -> queue 2 (predicted 2)
	// port 32776 -> queue 1 (predicted 1)
	// port 32777 -> queue 0 (predicted 0)
}

// udpFrame builds an Ethernet/IPv4/UDP frame (checksums left zero).
func udpFrame(src, dst [4]byte, sport, dport uint16) []byte {
	b := make([]byte, 14+20+8)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 28)
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	binary.BigEndian.PutUint16(ip[24:], 8)
	return b
}

// Software RSS: frames from one source spread over 2 workers by flow.
func ExampleDispatcher() {
	d, err := rss.NewDispatcher(rss.DispatchOptions{Workers: 2}, func(worker int, frames [][]byte) {
		// Runs on the worker's goroutine; a flow's frames arrive in order.
	})
	if err != nil {
		panic(err)
	}
	for port := range uint16(100) {
		frame := udpFrame([4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 2}, 40000+port, 5201)
		if _, err := d.Dispatch(frame, frame); err != nil { // two frames of each flow
			panic(err)
		}
	}
	d.Close() // delivers what was accepted, then stops the workers
	s := d.Stats()
	fmt.Println("frames", s.Frames, "delivered", s.Delivered, "dropped", s.Dropped, "pending", s.Pending)
	fmt.Println("both workers busy:", s.Workers[0].Delivered > 0 && s.Workers[1].Delivered > 0)
	// Output:
	// frames 200 delivered 200 dropped 0 pending 0
	// both workers busy: true
}
