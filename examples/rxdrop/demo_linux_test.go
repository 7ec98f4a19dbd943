//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xsk"
)

// rxdrop's demo is a test harness: the example uses only public
// packages, and the demo's veth pair and generator are the module's
// internal ones, which a test may use. It runs only when asked:
//
//	go test ./examples/rxdrop -run '^TestDemo$' -v -args -demo [-demo.args '-t 5s -demo-queues 2']
//
// (make demo-rxdrop DEMO_ARGS='...' says the same).
var (
	demoFlag = flag.Bool("demo", false, "run rxdrop's demo: a veth pair in two namespaces it creates, 64-byte UDP (port 9) from an XDP generator, received by rxdrop")
	demoArgs = flag.String("demo.args", "", "rxdrop's flags for the demo (no -i, no -port), and -demo-queues N, the queues of the veth pair (default 2)")
)

func TestDemo(t *testing.T) {
	if !*demoFlag {
		t.Skip("the demo runs with -args -demo (make demo-rxdrop)")
	}
	d, err := parseDemoFlags(strings.Fields(*demoArgs))
	if err != nil {
		t.Fatal(err)
	}
	if err := runDemo(&d.options, d.queues); err != nil {
		t.Fatal(err)
	}
}

// demoOptions are the demo's flags: rxdrop's, and the veth pair's queues.
type demoOptions struct {
	options
	queues int // -demo-queues: 1..exutil.MaxQueue+1
}

// parseDemoFlags parses and validates the demo's command line: rxdrop's
// flags without -i and -port (the demo makes its own veth pair and sends
// to UDP port 9), and -demo-queues. Errors are *exutil.UsageError.
func parseDemoFlags(args []string) (demoOptions, error) {
	var d demoOptions
	fs := flagSet(&d.options)
	fs.IntVar(&d.queues, "demo-queues", 2, fmt.Sprintf("queues of the demo veth pair, 1-%d", exutil.MaxQueue+1))
	err := d.Parse(fs, args, func() error {
		if err := d.check(); err != nil {
			return err
		}
		if d.queues < 1 || d.queues > exutil.MaxQueue+1 {
			return fmt.Errorf("-demo-queues %d: must be 1-%d", d.queues, exutil.MaxQueue+1)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["i"] || set["port"] {
			return fmt.Errorf("-demo makes its own veth pair and takes UDP port 9: no -i or -port")
		}
		qs, _ := exutil.ParseQueues(d.Queues)
		for _, q := range qs {
			if q >= d.queues {
				return fmt.Errorf("-q %s: the demo veth pair has queues 0-%d (-demo-queues %d)", d.Queues, d.queues-1, d.queues)
			}
		}
		return nil
	})
	return d, err
}

// runDemo builds a veth pair with the given number of queues in two fresh
// namespaces, runs rxdrop on one end and an XDP live-frames generator
// (64-byte UDP, many flows) on the other, then removes everything.
func runDemo(o *options, queues int) error {
	f := &o.Flags
	if f.Duration <= 0 {
		f.Duration = 5 * time.Second
	}
	pair, err := vethpair.NewPair(vethpair.Config{Queues: queues})
	if err != nil {
		return fmt.Errorf("demo network: %w", err)
	}
	defer pair.Close()
	fmt.Printf("demo: %s (%s) <-> %s (%s), %d queues, 64-byte UDP for %v\n",
		pair.A.Link, pair.A.NS, pair.B.Link, pair.B.NS, queues, f.Duration)

	// ctx ends on Ctrl-C; the generator runs for the duration, and the
	// receiver stops shortly after it, once the frames in flight are in.
	ctx, cancel := exutil.Context()
	defer cancel()
	rxCtx, rxStop := context.WithCancel(ctx)
	defer rxStop()

	var gen *trafficgen.Generator
	if err := pair.A.Do(func() (err error) {
		gen, err = trafficgen.New(trafficgen.Config{
			Ifindex: pair.A.Ifindex,
			Frame: trafficgen.FrameSpec{
				SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC,
				Src: pair.A.IPv4, Dst: pair.B.IPv4,
				DstPort: 9, Size: 64,
			},
		})
		return err
	}); err != nil {
		return fmt.Errorf("generator: %w", err)
	}
	defer gen.Close()

	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(9)}
	lostBefore, lostErr := pair.A.XDPXmitErrors(ctx)
	genDone := make(chan trafficgen.Result, 1)
	started := make(chan struct{})
	var genErr error
	go func() {
		<-started // the receiver is attached
		res, err := gen.Run(ctx, 0, f.Duration)
		genErr = err
		time.Sleep(200 * time.Millisecond)
		rxStop()
		genDone <- res
	}()
	var sum summary
	err = pair.B.Do(func() (err error) {
		sum, err = rxdropStarted(rxCtx, pair.B.Link, cfg, f.Batch, o.loop(), 0, func() { close(started) })
		return err
	})
	interrupted := ctx.Err() != nil
	rxStop()
	cancel()
	res := <-genDone
	if err != nil {
		return err
	}
	if genErr != nil && genErr != context.Canceled && genErr != context.DeadlineExceeded {
		return fmt.Errorf("generator: %w", genErr)
	}
	fmt.Printf("generator: %d packets sent in %.1f s (%.0f pkts/s)\n", res.Packets, res.Elapsed.Seconds(), res.PPS())
	// Frames veth could not hand to the receiving side's NAPI (its ring
	// full) never reach the sockets; the sending veth counts them.
	var lost uint64
	if lostErr == nil {
		after, err := pair.A.XDPXmitErrors(context.Background())
		if err == nil {
			lost = after - lostBefore
		}
		lostErr = err
	}
	if lostErr != nil {
		fmt.Printf("(veth drop counters unreadable: %v)\n", lostErr)
	}
	fmt.Printf("accounting: sent %d = received %d + dropped by the kernel %d (receiver too slow: fill ring empty or RX ring full) + lost in veth %d (peer ring full) + unaccounted %d\n",
		res.Packets, sum.Received, sum.KernelDropped+sum.RingFull, lost, int64(res.Packets)-int64(sum.Received+sum.KernelDropped+sum.RingFull+lost))
	if interrupted {
		fmt.Println("(interrupted: frames in flight at Ctrl-C are unaccounted)")
	}
	return nil
}
