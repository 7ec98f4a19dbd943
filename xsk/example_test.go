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

// Redirect VXLAN from outside one subnet to the sockets, chosen with a
// tcpdump expression; check first what it does to some frames.
func ExampleProgramConfig_expr() {
	cfg := xsk.ProgramConfig{Expr: "udp dst port 4789 and not src net 198.18.1.0/24"}
	frame := make([]byte, 64) // a captured frame
	verdicts, err := xsk.Verdicts(cfg, [][]byte{frame})
	if err != nil {
		log.Fatal(err) // an unsupported construct is named here
	}
	fmt.Println("redirected:", verdicts[0])

	dev, err := xsk.Open("eth0", xsk.Config{Program: cfg})
	if err != nil {
		log.Fatal(err) // errors.Is(err, xsk.ErrBusy): another XDP program is attached
	}
	defer dev.Close()
}

// Run next to xdp-filter (or any program loaded with libxdp's
// xdp-loader): xdp-filter's rules run first (priority 10), frames they
// pass and that match the filter go to the sockets, the rest on to the
// kernel. `xdp-loader status eth0` lists xdpio's program as
// xdpio_redirect; Close takes it out again.
func ExampleProgramConfig_share() {
	dev, err := xsk.Open("eth0", xsk.Config{Program: xsk.ProgramConfig{
		Filter:   []xsk.Rule{xsk.UDPPort(9000)},
		Share:    xsk.ShareDispatcher, // join the dispatcher, or start one others can join
		Priority: 20,                  // after xdp-filter's 10
	}})
	if err != nil {
		log.Fatal(err) // no bpffs, or a kernel that refuses freplace: the error says which
	}
	defer dev.Close()
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
	for s.TXPending() > 0 {
		s.Complete()
	}
}

// One goroutine drains every queue of eth0 and, when all are empty, waits
// on all of them at once, napping 30µs first while packets flow: on a
// machine with fewer CPUs than queues, the fastest receiver. Needs root.
func ExamplePoller() {
	dev, err := xsk.Open("eth0", xsk.Config{
		Socket:  xsk.SocketConfig{RXNap: 30 * time.Microsecond},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	socks := dev.Sockets()
	p := xsk.NewPoller(socks...)
	batches := make([]*xsk.Batch, len(socks))
	for i, s := range socks {
		batches[i] = s.NewBatch(64)
	}
	var frames int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n := 0
		for i, s := range socks {
			n += s.Receive(batches[i])
			s.Release(batches[i]) // handle the frames first
		}
		frames += n
		if n == 0 {
			if _, err := p.WaitRX(100 * time.Millisecond); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println(frames, "frames")
}
