//go:build linux

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/xdpio/xdpio/examples/internal/exutil"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xsk"
)

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
	ctx, cancel := exutil.Context(0)
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
		sum, err = rxdropStarted(rxCtx, pair.B.Link, cfg, f.Batch, o.loop(), func() { close(started) })
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
