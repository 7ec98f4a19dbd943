// Command l2fwd receives packets on every chosen queue, swaps the Ethernet
// source and destination addresses in place and sends each frame back out
// of the queue it came from, without copying it. It prints packets/s per
// queue once a second and the totals at the end.
//
//	l2fwd -i eth0 [-q 0-3] [-t 10s] [-port 9000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/xdpio/xdpio/examples/internal/exutil"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "l2fwd:", err)
		os.Exit(1)
	}
}

func run() error {
	var f exutil.Flags
	f.Register(flag.CommandLine)
	port := flag.Int("port", 0, "only forward UDP to this port (others reach the kernel); 0 forwards everything")
	flag.Parse()
	if f.Iface == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	if *port != 0 {
		cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(uint16(*port))}
	}
	ctx, cancel := exutil.Context(f.Duration)
	defer cancel()
	return l2fwd(ctx, f.Iface, cfg, f.Batch)
}

// SwapMAC exchanges the destination and source MAC addresses of frame.
func SwapMAC(frame []byte) {
	if len(frame) < 12 {
		return
	}
	var tmp [6]byte
	copy(tmp[:], frame[0:6])
	copy(frame[0:6], frame[6:12])
	copy(frame[6:12], tmp[:])
}

func l2fwd(ctx context.Context, iface string, cfg xsk.Config, batch int) error {
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	socks := dev.Sockets()
	fmt.Printf("l2fwd on %s: %d queues, program in %v mode, zero-copy %v\n", iface, len(socks), dev.Program().Mode(), socks[0].ZeroCopy())
	var wg sync.WaitGroup
	errs := make(chan error, len(socks))
	for _, s := range socks {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(batch)
			for ctx.Err() == nil {
				s.Complete()
				if s.Receive(b) == 0 {
					if s.TxPending() == 0 {
						s.Wait(100*time.Millisecond, false)
					}
					continue
				}
				for i := 0; i < b.Len(); i++ {
					SwapMAC(b.Frame(i))
				}
				for b.Len() > 0 && ctx.Err() == nil {
					if _, err := s.Transmit(b); err != nil {
						errs <- err
						return
					}
					if b.Len() > 0 {
						s.Complete() // TX ring full: make room
					}
				}
			}
			s.Free(b)
		}(s)
	}
	exutil.Report(ctx, os.Stdout, socks, "forwarded", func(st xsk.Stats) uint64 { return st.TxFrames })
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
