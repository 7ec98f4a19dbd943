// Command rxdrop receives packets on every chosen queue of an interface
// with one AF_XDP socket and one goroutine per queue, and drops them: the
// fastest possible receiver, and the measure of the RX path. It prints
// packets/s per queue once a second and the totals at the end.
//
//	rxdrop -i eth0 [-q 0-3] [-t 10s] [-port 9000]
//	rxdrop -demo [-t 5s] [-demo-queues 2]   # on a veth pair it creates, with its own generator
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
	demo := flag.Bool("demo", false, "create a veth pair in two namespaces, send 64-byte UDP into it with an XDP generator, and receive it here")
	demoQueues := flag.Int("demo-queues", 2, "queues of the demo veth pair")
	oneThread := flag.Bool("one-thread", false, "receive every queue in one goroutine (xsk.Poller) instead of one per queue: fewer wake-ups when there are fewer CPUs than queues; with -nap, the fastest rxdrop on a small machine")
	flag.Parse()
	if *demo {
		return runDemo(&f, *demoQueues, *oneThread)
	}
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
	return rxdrop(ctx, f.Iface, cfg, f.Batch, *oneThread)
}

// summary is what a run received and what the kernel dropped on the way
// to the sockets.
type summary struct {
	Received      uint64
	KernelDropped uint64 // rx_dropped: fill ring empty, frame too large, ...
	RingFull      uint64 // rx_ring_full: the application was too slow
}

// rxdrop opens the sockets and drops everything until ctx ends.
func rxdrop(ctx context.Context, iface string, cfg xsk.Config, batch int, oneThread bool) error {
	_, err := rxdropStarted(ctx, iface, cfg, batch, oneThread, func() {})
	return err
}

// dropAll drops what every socket receives, in one goroutine: it drains
// each RX ring in turn and, when all were empty, waits on all the sockets
// at once (naps first with SocketConfig.RxNap while packets flow).
func dropAll(ctx context.Context, socks []*xsk.Socket, batch int) {
	p := xsk.NewPoller(socks...)
	bs := make([]*xsk.Batch, len(socks))
	for i, s := range socks {
		bs[i] = s.NewBatch(batch)
	}
	for ctx.Err() == nil {
		n := 0
		for i, s := range socks {
			if k := s.Receive(bs[i]); k > 0 {
				n += k
				s.Release(bs[i])
			}
		}
		if n == 0 {
			if _, err := p.WaitRX(100 * time.Millisecond); err != nil {
				fmt.Fprintln(os.Stderr, "rxdrop:", err)
				return
			}
		}
	}
}

// rxdropStarted is rxdrop that calls started once the sockets are open and
// returns the counts.
func rxdropStarted(ctx context.Context, iface string, cfg xsk.Config, batch int, oneThread bool, started func()) (summary, error) {
	var sum summary
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		started()
		return sum, err
	}
	started()
	defer dev.Close()
	socks := dev.Sockets()
	fmt.Printf("rxdrop on %s: %d queues, program in %v mode, zero-copy %v\n", iface, len(socks), dev.Program().Mode(), socks[0].ZeroCopy())
	var wg sync.WaitGroup
	if oneThread {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dropAll(ctx, socks, batch)
		}()
	}
	for _, s := range socks {
		if oneThread {
			break
		}
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(batch)
			for ctx.Err() == nil {
				if s.Receive(b) == 0 {
					if _, err := s.Wait(100*time.Millisecond, false); err != nil {
						fmt.Fprintf(os.Stderr, "rxdrop: queue %d: %v\n", s.Queue(), err)
						return
					}
					continue
				}
				s.Release(b)
			}
		}(s)
	}
	exutil.Report(ctx, os.Stdout, socks, "received", func(st xsk.Stats) uint64 { return st.RxFrames })
	wg.Wait()
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			return sum, err
		}
		sum.Received += st.RxFrames
		sum.KernelDropped += st.RxDropped
		sum.RingFull += st.RxRingFull
		if st.RxDropped+st.RxRingFull > 0 {
			fmt.Printf("queue %d kernel counters: rx_dropped %d (fill ring empty %d), rx_ring_full %d\n", s.Queue(), st.RxDropped, st.RxFillRingEmpty, st.RxRingFull)
		}
	}
	return sum, nil
}
