// Command rxdrop receives packets on every chosen queue of an interface
// with one AF_XDP socket per queue, and drops them: the fastest possible
// receiver, and the measure of the RX path. It prints packets/s per queue
// once a second and the totals at the end.
//
// By default it receives through xsk's runner (Device.Receive), which
// picks a goroutine per queue or one for all queues from the CPUs it may
// use and naps NAPI style under load; -shape chooses, and -raw runs the
// plain loop a user would write by hand (a goroutine per queue that waits
// in poll), for comparison.
//
//	rxdrop -i eth0 [-q 0-3] [-t 10s] [-port 9000] [-shape auto|per-queue|one] [-raw]
//
// rxdrop uses the public packages only, as every example does (a test in
// package examples checks it). To watch it on a veth pair in two
// namespaces it creates, fed by an XDP live-frames generator, with the
// account of every frame sent, run its demo, a test harness that may use
// the module's internal test network and generator:
//
//	make demo-rxdrop [DEMO_ARGS='-t 5s -demo-queues 2 -shape one']
//	go test ./examples/rxdrop -run '^TestDemo$' -v -args -demo [-demo.args '-t 5s -demo-queues 2']
//
// Every flag is checked before anything is opened: a value out of range,
// or an argument that is not a flag, exits with status 2 and the usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	os.Exit(exutil.Exit(os.Stderr, "rxdrop", run(os.Args[1:])))
}

const synopsis = `rxdrop -i IFACE [-q 0-3] [-t 10s] [-port 9000] [flags]`

// options are rxdrop's flags.
type options struct {
	exutil.Flags
	port      int    // -port: 0..65535, 0 takes every frame
	oneThread bool   // -one-thread
	shape     string // -shape: auto, per-queue, one
	raw       bool   // -raw
}

// loop is how rxdrop receives: through the runner in a shape, or by hand.
type loop struct {
	raw   bool
	shape xsk.Shape
	nap   time.Duration // the runner's longest nap (0: its default)
}

// loop returns the receive loop the options ask for.
func (o *options) loop() loop {
	l := loop{raw: o.raw, nap: o.Nap}
	l.shape, _ = exutil.ParseShape(o.shape) // checked by parseFlags
	if o.oneThread {
		l.shape = xsk.ShapeOne
	}
	return l
}

// flagSet registers rxdrop's flags on a new flag set, with o's fields as
// their values.
func flagSet(o *options) *flag.FlagSet {
	fs := exutil.NewFlagSet("rxdrop", synopsis)
	o.Register(fs)
	fs.IntVar(&o.port, "port", 0, "only take UDP to this destination port, 1-65535 (other traffic reaches the kernel); 0 takes everything")
	fs.BoolVar(&o.oneThread, "one-thread", false, "receive every queue in one goroutine (xsk.Poller): the same as -shape one")
	fs.StringVar(&o.shape, "shape", "auto", "auto (a goroutine per queue when there are two CPUs per queue, else one for all), per-queue, or one")
	fs.BoolVar(&o.raw, "raw", false, "receive with the plain loop instead of the runner: a goroutine per queue (one for all with -shape one) that waits in poll, napping only with -nap")
	return fs
}

// parseFlags parses and validates rxdrop's command line (without the
// program name). Errors are *exutil.UsageError.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flagSet(&o)
	err := o.Parse(fs, args, func() error {
		if err := o.check(); err != nil {
			return err
		}
		if o.Iface == "" {
			return fmt.Errorf("-i IFACE is required")
		}
		return nil
	})
	return o, err
}

// check validates rxdrop's own flags but -i (the demo harness makes the
// interface itself).
func (o *options) check() error {
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("-port %d: must be 1-65535, or 0 to take everything", o.port)
	}
	if _, err := exutil.ParseShape(o.shape); err != nil {
		return err
	}
	if o.oneThread && o.shape == "per-queue" {
		return fmt.Errorf("-one-thread and -shape per-queue contradict each other")
	}
	return nil
}

// config is the xsk.Config the options ask for.
func (o *options) config() (xsk.Config, error) {
	cfg, err := o.Config()
	if err != nil {
		return cfg, err
	}
	if o.port != 0 {
		cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(uint16(o.port))}
	}
	if !o.raw {
		// -nap is the runner's longest nap, which it takes only while
		// packets arrive fast; the sockets themselves do not nap.
		cfg.Socket.RXNap = 0
	}
	return cfg, nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	ctx, cancel := exutil.Context()
	defer cancel()
	return rxdrop(ctx, o.Iface, cfg, o.Batch, o.loop(), o.Duration)
}

// summary is what a run received and what the kernel dropped on the way
// to the sockets.
type summary struct {
	Received      uint64
	KernelDropped uint64 // rx_dropped: fill ring empty, frame too large, ...
	RingFull      uint64 // rx_ring_full: the application was too slow
}

// rxdrop opens the sockets and drops everything until ctx ends or, if d
// is positive, for d from then on.
func rxdrop(ctx context.Context, iface string, cfg xsk.Config, batch int, l loop, d time.Duration) error {
	_, err := rxdropStarted(ctx, iface, cfg, batch, l, d, func() {})
	return err
}

// dropAll drops what every socket receives, in one goroutine: it drains
// each RX ring in turn and, when all were empty, waits on all the sockets
// at once (naps first with SocketConfig.RXNap while packets flow).
func dropAll(ctx context.Context, socks []*xsk.Socket, batch int) error {
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
				return err
			}
		}
	}
	return nil
}

// rxdropStarted is rxdrop that calls started once the sockets are open and
// returns the counts.
func rxdropStarted(ctx context.Context, iface string, cfg xsk.Config, batch int, l loop, d time.Duration, started func()) (summary, error) {
	var sum summary
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		started()
		return sum, err
	}
	started()
	defer dev.Close()
	socks := dev.Sockets()
	how := "dropping through the plain loop"
	if !l.raw {
		how = "dropping through the runner"
	}
	// Frames sent from here on reach the sockets: scripts wait for this
	// line before they send.
	exutil.Ready(os.Stdout, dev, how)
	// A queue whose device goes away ends the run with its error.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(socks)+1)
	fail := func(err error) {
		errs <- err
		stop()
	}
	var wg sync.WaitGroup
	switch {
	case !l.raw:
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The handler has nothing to do: the runner gives the
			// frames back after it.
			drop := func(*xsk.Socket, *xsk.Batch) {}
			if err := dev.Receive(ctx, xsk.RunConfig{Shape: l.shape, Batch: batch, Nap: l.nap}, drop); err != nil {
				fail(err)
			}
		}()
	case l.shape == xsk.ShapeOne:
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dropAll(ctx, socks, batch); err != nil {
				fail(err)
			}
		}()
	default:
		for _, s := range socks {
			wg.Add(1)
			go func(s *xsk.Socket) {
				defer wg.Done()
				b := s.NewBatch(batch)
				for ctx.Err() == nil {
					if s.Receive(b) == 0 {
						if _, err := s.Wait(100*time.Millisecond, false); err != nil {
							fail(fmt.Errorf("queue %d: %w", s.Queue(), err))
							return
						}
						continue
					}
					s.Release(b)
				}
			}(s)
		}
	}
	exutil.Report(ctx, os.Stdout, socks, "received", func(st xsk.Stats) uint64 { return st.RXFrames }, d)
	stop()
	wg.Wait()
	var runErr error
	select {
	case runErr = <-errs:
	default:
	}
	// Frames stop coming to the sockets and those left on the RX rings
	// are taken: the counters then hold every frame that reached them.
	if err := exutil.Drain(dev, batch); err != nil && runErr == nil {
		runErr = err
	}
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			return sum, err
		}
		sum.Received += st.RXFrames
		sum.KernelDropped += st.RXDropped
		sum.RingFull += st.RXRingFull
		if st.RXDropped+st.RXRingFull > 0 {
			fmt.Printf("queue %d kernel counters: rx_dropped %d (fill ring empty %d), rx_ring_full %d\n", s.Queue(), st.RXDropped, st.RXFillRingEmpty, st.RXRingFull)
		}
	}
	fmt.Printf("account: %d frames reached the sockets = %d received + %d rx_dropped + %d rx_ring_full\n",
		sum.Received+sum.KernelDropped+sum.RingFull, sum.Received, sum.KernelDropped, sum.RingFull)
	return sum, runErr
}
