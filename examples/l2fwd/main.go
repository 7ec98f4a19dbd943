// Command l2fwd receives packets on every chosen queue, swaps the Ethernet
// source and destination addresses in place and sends each frame back out
// of the queue it came from, without copying it. It prints packets/s per
// queue once a second and the totals at the end.
//
//	l2fwd -i eth0 [-q 0-3] [-t 10s] [-port 9000]
//
// Every flag is checked before anything is opened: a value out of range,
// or an argument that is not a flag, exits with status 2 and the usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	os.Exit(exutil.Exit(os.Stderr, "l2fwd", run(os.Args[1:])))
}

const synopsis = "l2fwd -i IFACE [-q 0-3] [-t 10s] [-port 9000] [flags]"

// options are l2fwd's flags.
type options struct {
	exutil.Flags
	port int // -port: 0..65535, 0 forwards every frame
}

// flagSet registers l2fwd's flags on a new flag set, with o's fields as
// their values.
func flagSet(o *options) *flag.FlagSet {
	fs := exutil.NewFlagSet("l2fwd", synopsis)
	o.Register(fs)
	fs.IntVar(&o.port, "port", 0, "only forward UDP to this destination port, 1-65535 (other traffic reaches the kernel); 0 forwards everything")
	return fs
}

// parseFlags parses and validates l2fwd's command line (without the
// program name). Errors are *exutil.UsageError.
func parseFlags(args []string) (options, error) {
	var o options
	err := o.Parse(flagSet(&o), args, func() error {
		if o.port < 0 || o.port > 65535 {
			return fmt.Errorf("-port %d: must be 1-65535, or 0 to forward everything", o.port)
		}
		if o.Iface == "" {
			return fmt.Errorf("-i IFACE is required")
		}
		return nil
	})
	return o, err
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
	return l2fwd(ctx, o.Iface, cfg, o.Batch, o.Duration)
}

// SwapMAC exchanges the destination and source MAC addresses of frame
// (through offload's Ethernet view); a frame shorter than the two
// addresses is left alone.
func SwapMAC(frame []byte) {
	if len(frame) < 12 {
		return
	}
	e := offload.Ethernet(frame)
	src, dst := e.Src(), e.Dst()
	e.SetDst(src)
	e.SetSrc(dst)
}

// summary is the account of every frame that reached l2fwd's sockets,
// from the sockets' counters (the library's and the kernel's): each one
// was forwarded, is still on a TX ring, was still in l2fwd's hands when
// it stopped, or was dropped by the kernel before the socket got it.
// Frames that never reached the sockets (lost by the sender's device, or
// on a queue without a socket) are counted by the interfaces (ip -s link).
type summary struct {
	Received      uint64 // taken from the RX rings
	Forwarded     uint64 // sent back: the kernel completed them
	Pending       uint64 // put on a TX ring, not completed when the sockets closed
	NotSent       uint64 // received, never put on a TX ring: in hand or on the RX ring when l2fwd stopped
	KernelDropped uint64 // rx_dropped: fill ring empty, frame too large, ...
	FillEmpty     uint64 // rx_fill_ring_empty_descs: times the kernel found no frame to fill
	RingFull      uint64 // rx_ring_full: the forwarder was too slow
	TXInvalid     uint64 // tx_invalid_descs: TX descriptors the kernel refused (among Pending)
}

// add counts a socket's final counters into the summary.
func (sum *summary) add(st xsk.Stats) {
	sum.Received += st.RXFrames
	sum.Forwarded += st.TXFrames
	sum.Pending += st.TXSubmitted - st.TXFrames
	sum.NotSent += st.RXFrames - st.TXSubmitted
	sum.KernelDropped += st.RXDropped
	sum.FillEmpty += st.RXFillRingEmpty
	sum.RingFull += st.RXRingFull
	sum.TXInvalid += st.TXInvalidDescs
}

// Reached is how many frames the XDP program redirected to the sockets.
func (sum summary) Reached() uint64 { return sum.Received + sum.KernelDropped + sum.RingFull }

// print writes the account: one equation, then a line for each kind of
// frame not forwarded that there were any of, saying why.
func (sum summary) print(w io.Writer) {
	fmt.Fprintf(w, "account: %d frames reached the sockets = %d forwarded + %d not completed + %d not sent + %d rx_dropped + %d rx_ring_full\n",
		sum.Reached(), sum.Forwarded, sum.Pending, sum.NotSent, sum.KernelDropped, sum.RingFull)
	if sum.Pending > 0 {
		fmt.Fprintf(w, "  not completed: %d sent back but not completed by the kernel when l2fwd stopped (tx_invalid %d: refused as invalid)\n", sum.Pending, sum.TXInvalid)
	}
	if sum.NotSent > 0 {
		fmt.Fprintf(w, "  not sent: %d received but still in l2fwd's hands or on an RX ring when it stopped\n", sum.NotSent)
	}
	if sum.KernelDropped > 0 {
		fmt.Fprintf(w, "  rx_dropped: %d dropped by the kernel; the fill ring was empty %d times: l2fwd had no free frame to give the kernel, as it forwarded slower than frames came\n", sum.KernelDropped, sum.FillEmpty)
	}
	if sum.RingFull > 0 {
		fmt.Fprintf(w, "  rx_ring_full: %d dropped by the kernel with the RX ring full: l2fwd did not take them in time\n", sum.RingFull)
	}
}

// l2fwd forwards until ctx ends or, if d is positive, for d once the
// sockets are open.
func l2fwd(ctx context.Context, iface string, cfg xsk.Config, batch int, d time.Duration) error {
	_, err := l2fwdStarted(ctx, os.Stdout, iface, cfg, batch, d, func() {})
	return err
}

// l2fwdStarted is l2fwd that writes to out, calls started once the
// sockets are open (or failed to) and returns the account.
func l2fwdStarted(ctx context.Context, out io.Writer, iface string, cfg xsk.Config, batch int, d time.Duration, started func()) (summary, error) {
	var sum summary
	dev, err := xsk.Open(iface, cfg)
	started()
	if err != nil {
		return sum, err
	}
	defer dev.Close()
	socks := dev.Sockets()
	// Frames sent from here on reach the sockets: scripts wait for this
	// line before they send.
	exutil.Ready(out, dev, "forwarding with the MAC addresses swapped")
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(socks))
	for _, s := range socks {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			if err := forward(ctx, s, batch); err != nil {
				errs <- fmt.Errorf("queue %d: %w", s.Queue(), err)
				stop() // one queue's device error ends the run
			}
		}(s)
	}
	exutil.Report(ctx, out, socks, "forwarded", func(st xsk.Stats) uint64 { return st.TXFrames }, d)
	stop()
	wg.Wait()
	// The account must be whole: frames stop coming to the sockets (the
	// program passes them to the kernel), those already on the RX rings
	// are taken (not sent), and those on the TX rings get a moment to
	// leave before the counters are read.
	if err := exutil.Drain(dev, batch); err != nil {
		return sum, err
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for _, s := range socks {
		for s.TXPending() > 0 && time.Now().Before(deadline) && s.Err() == nil {
			if s.Complete() == 0 {
				s.Kick()
				time.Sleep(time.Millisecond)
			}
		}
	}
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			return sum, err
		}
		sum.add(st)
		if st.RXDropped+st.RXRingFull+st.TXInvalidDescs > 0 {
			fmt.Fprintf(out, "queue %d kernel counters: rx_dropped %d (fill ring empty %d), rx_ring_full %d, tx_invalid %d\n",
				s.Queue(), st.RXDropped, st.RXFillRingEmpty, st.RXRingFull, st.TXInvalidDescs)
		}
	}
	sum.print(out)
	select {
	case err := <-errs:
		return sum, err
	default:
		return sum, nil
	}
}

// forward sends every frame s receives back out of s with the MAC
// addresses swapped, until ctx ends or the device goes away. A link that
// is down holds the frames on the TX ring, and forwarding resumes when it
// is up.
func forward(ctx context.Context, s *xsk.Socket, batch int) error {
	b := s.NewBatch(batch)
	defer s.Free(b)
	down := false
	for ctx.Err() == nil {
		s.Complete()
		if b.Len() == 0 {
			if s.Receive(b) == 0 {
				wait := 100 * time.Millisecond
				if s.TXPending() > 0 {
					wait = time.Millisecond // completions are due
				}
				if _, err := s.Wait(wait, false); err != nil {
					return err
				}
				continue
			}
			for i := 0; i < b.Len(); i++ {
				SwapMAC(b.Frame(i))
			}
		}
		// What does not fit the TX ring stays in b for the next round,
		// after Complete made room.
		_, err := s.Transmit(b)
		switch {
		case errors.Is(err, xsk.ErrLinkDown):
			if !down {
				fmt.Fprintf(os.Stderr, "l2fwd: queue %d: %v; waiting for it to come up\n", s.Queue(), err)
			}
			down = true
			if err := s.Sleep(100 * time.Millisecond); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			down = false
		}
	}
	return nil
}
