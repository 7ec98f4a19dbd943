//go:build linux

package coalesce_test

import (
	"context"
	"log"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// One goroutine per queue receives in batches: at most 50µs after its first
// frame, or as soon as 64 frames are there.
func ExampleReceiver() {
	dev, err := xsk.Open("eth0", xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ctx := context.Background()
	for _, s := range dev.Sockets() {
		go func() {
			unlock, err := coalesce.LockThread() // µs-precise sleeps
			if err != nil {
				log.Fatal(err)
			}
			defer unlock()
			r, err := coalesce.NewReceiver(s, coalesce.Params{RXUsecs: 50, RXFrames: 64}, coalesce.Options{})
			if err != nil {
				log.Fatal(err)
			}
			for {
				b, err := r.Next(ctx)
				if err != nil {
					return // ctx done or socket closed
				}
				for i := 0; i < b.Len(); i++ {
					_ = b.Frame(i) // handle the packet
				}
				r.Release()
			}
		}()
	}
	time.Sleep(time.Minute)
}

// One goroutine receives every queue of a device in batches: on a machine
// with fewer CPUs than queues, one wake-up per window serves them all.
func ExampleGroupReceiver() {
	dev, err := xsk.Open("eth0", xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	unlock, err := coalesce.LockThread()
	if err != nil {
		log.Fatal(err)
	}
	defer unlock()
	g, err := coalesce.NewGroupReceiver(dev.Sockets(), coalesce.Params{RXUsecs: 50}, coalesce.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		batches, err := g.Next(ctx)
		if err != nil {
			return // ctx done or a socket closed
		}
		for q, b := range batches { // one per socket, in queue order
			for i := 0; i < b.Len(); i++ {
				_, _ = q, b.Frame(i) // handle the packet
			}
		}
		g.Release()
	}
}

// Frames submitted one by one leave in batches: one kick per 50µs.
func ExampleTransmitter() {
	dev, err := xsk.Open("eth0", xsk.Config{NoProgram: true})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	tx, err := coalesce.NewTransmitter(dev.Sockets()[0], coalesce.TXParams{TXUsecs: 50}, coalesce.Options{})
	if err != nil {
		log.Fatal(err)
	}
	b := dev.Sockets()[0].NewBatch(1)
	for i := 0; i < 1000; i++ {
		if tx.Alloc(b, 1) == 0 {
			tx.Poll()
			continue
		}
		n := copy(b.Buffer(0), []byte("a whole Ethernet frame"))
		b.SetLen(0, n)
		if _, err := tx.Submit(b); err != nil {
			log.Fatal(err)
		}
		tx.Poll() // flushes when 50µs have passed since the oldest frame
	}
	if err := tx.Flush(); err != nil {
		log.Fatal(err)
	}
}
