// Command rxdrop receives packets on every chosen queue of an interface
// with one AF_XDP socket and one goroutine per queue, and drops them: the
// fastest possible receiver, and the measure of the RX path. It prints
// packets/s per queue once a second and the totals at the end.
//
//	rxdrop -i eth0 [-q 0-3] [-t 10s] [-port 9000]
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
		fmt.Fprintln(os.Stderr, "rxdrop:", err)
		os.Exit(1)
	}
}

func run() error {
	var f exutil.Flags
	f.Register(flag.CommandLine)
	port := flag.Int("port", 0, "only take UDP to this port (others reach the kernel); 0 takes everything")
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
	return rxdrop(ctx, f.Iface, cfg, f.Batch)
}

// rxdrop opens the sockets and drops everything until ctx ends.
func rxdrop(ctx context.Context, iface string, cfg xsk.Config, batch int) error {
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	socks := dev.Sockets()
	fmt.Printf("rxdrop on %s: %d queues, program in %v mode, zero-copy %v\n", iface, len(socks), dev.Program().Mode(), socks[0].ZeroCopy())
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(batch)
			for ctx.Err() == nil {
				if s.Receive(b) == 0 {
					s.Wait(100*time.Millisecond, false)
					continue
				}
				s.Release(b)
			}
		}(s)
	}
	exutil.Report(ctx, os.Stdout, socks, "received", func(st xsk.Stats) uint64 { return st.RxFrames })
	wg.Wait()
	for _, s := range socks {
		if st, err := s.Stats(); err == nil && (st.RxDropped+st.RxRingFull+st.RxFillRingEmpty) > 0 {
			fmt.Printf("queue %d kernel counters: rx_dropped %d, rx_ring_full %d, fill_ring_empty %d\n", s.Queue(), st.RxDropped, st.RxRingFull, st.RxFillRingEmpty)
		}
	}
	return nil
}
