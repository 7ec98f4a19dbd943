//go:build linux

package xsk_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/xsk"
)

// Count the frames to UDP port 9000 on every queue of eth0 for ten
// seconds, or until Ctrl-C, through the runner. Needs root.
func ExampleDevice_Receive() {
	dev, err := xsk.Open("eth0", xsk.Config{
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var frames atomic.Uint64 // the handler may run on a goroutine per queue
	err = dev.Receive(ctx, xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) {
		frames.Add(uint64(b.Len()))
	})
	if err != nil {
		log.Fatal(err) // ErrNoDevice when eth0 went away, ...
	}
	fmt.Println(frames.Load(), "frames")
}

// Send 1000 copies of a frame on every queue of eth0 through the runner,
// which reclaims completions and waits out a link that goes down. Needs
// root.
func ExampleDevice_Send() {
	dev, err := xsk.Open("eth0", xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	frame := make([]byte, 60) // an Ethernet frame built elsewhere
	copy(frame, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	sent := make([]int, len(dev.Sockets())) // by socket index: one goroutine each
	index := map[*xsk.Socket]int{}
	for i, s := range dev.Sockets() {
		index[s] = i
	}
	err = dev.Send(context.Background(), xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) error {
		i := index[s]
		for j := range b.Len() {
			if sent[i] == 1000 {
				return xsk.ErrStop // frames left at length 0 are not sent
			}
			b.SetLen(j, copy(b.Buffer(j), frame))
			sent[i]++
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
