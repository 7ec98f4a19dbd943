//go:build linux

package xsk_test

import (
	"fmt"
	"log"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Receive UDP port 9000 on every queue of eth0 and count frames; the rest
// of the traffic (ARP, SSH, ...) still reaches the kernel. Needs root.
func Example() {
	dev, err := xsk.Open("eth0", xsk.Config{
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	done := make(chan int)
	for _, s := range dev.Sockets() {
		go func(s *xsk.Socket) {
			b := s.NewBatch(64)
			n := 0
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if s.Receive(b) == 0 {
					s.Wait(100*time.Millisecond, false)
					continue
				}
				n += b.Len()
				s.Release(b)
			}
			done <- n
		}(s)
	}
	total := 0
	for range dev.Sockets() {
		total += <-done
	}
	fmt.Println("frames:", total)
}

// Send one frame from queue 0.
func ExampleSocket_Transmit() {
	dev, err := xsk.Open("eth0", xsk.Config{Queues: []int{0}})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s := dev.Sockets()[0]
	frame := []byte{ /* an Ethernet frame */ }

	b := s.NewBatch(1)
	if s.Alloc(b, 1) == 1 {
		b.SetLen(0, copy(b.Buffer(0), frame))
		if _, err := s.Transmit(b); err != nil {
			log.Fatal(err)
		}
	}
	for s.TxPending() > 0 {
		s.Complete()
	}
}
