// Command udpecho is the hello world of a Go program on xdpio: a UDP echo
// server whose datagrams move over AF_XDP (package xdpnet), answering each
// datagram to its sender. ARP, ICMP, SSH and every other port stay with
// the kernel.
//
//	udpecho -i eth0 -port 7 [-addr 198.18.0.2] [-t 10s] [-queues]
//
// With -queues it reads each RX queue in its own goroutine, in place, and
// answers through the same queue (the fast path); without, it uses the
// conn as a net.PacketConn. It prints what it echoed and what was dropped,
// by cause, when it stops (Ctrl-C or -t).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "udpecho:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "udpecho:", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

// options are udpecho's flags.
type options struct {
	iface    string
	addr     netip.Addr
	port     uint16
	duration time.Duration
	queues   bool
	frames   int
}

// parseFlags parses and checks the command line (without the program
// name).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("udpecho", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.iface, "i", "", "interface (required)")
	addr := fs.String("addr", "::", "local address: one of the interface's, or :: for all (IPv4 and IPv6)")
	port := fs.Int("port", 7, "UDP port, 1-65535")
	fs.DurationVar(&o.duration, "t", 0, "stop after this long; 0 runs until Ctrl-C")
	fs.BoolVar(&o.queues, "queues", false, "one goroutine per RX queue, reading in place (the fast path)")
	fs.IntVar(&o.frames, "frames", 0, "UMEM frames per queue, 0 (the library's default: 4096, or what fits RLIMIT_MEMLOCK without CAP_IPC_LOCK) or 256-1048576")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Errorf("unexpected argument %q: every option is a -flag", fs.Arg(0))}
	case o.iface == "":
		return o, usageError{errors.New("-i IFACE is required")}
	case *port < 1 || *port > 65535:
		return o, usageError{fmt.Errorf("-port %d: must be 1-65535", *port)}
	case o.duration < 0:
		return o, usageError{fmt.Errorf("-t %v: must not be negative", o.duration)}
	case o.frames != 0 && (o.frames < 256 || o.frames > 1<<20):
		return o, usageError{fmt.Errorf("-frames %d: must be 0 or 256-1048576", o.frames)}
	}
	a, err := netip.ParseAddr(*addr)
	if err != nil {
		return o, usageError{fmt.Errorf("-addr: %w", err)}
	}
	o.addr, o.port = a.Unmap(), uint16(*port)
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	c, err := xdpnet.ListenUDP(o.iface, netip.AddrPortFrom(o.addr, o.port), xdpnet.Config{FramesPerQueue: o.frames})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "udpecho on %s: %v\n", o.iface, c.LocalAddr())
	err = serve(ctx, c, o.queues)
	st := c.Stats().Total()
	c.Close()
	fmt.Fprintf(out, "received %d datagrams, echoed %d (%d bytes); dropped %d: %+v; the kernel dropped %d before the sockets\n",
		st.Datagrams, st.Sent, st.SentBytes, st.Drops.Total(), st.Drops, st.Socket.RxDropped+st.Socket.RxRingFull)
	return err
}

// serve echoes until ctx ends (nil) or the conn fails (its error).
func serve(ctx context.Context, c *xdpnet.UDPConn, queues bool) error {
	// Close ends the blocked reads when ctx is done.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	// A device that goes away ends the server; a datagram that cannot
	// be answered (its sender unreachable, say) is reported and skipped.
	fail := func(err error) (fatal bool) {
		switch {
		case ctx.Err() != nil || errors.Is(err, net.ErrClosed):
			return true
		case errors.Is(err, xsk.ErrNoDevice) || errors.Is(err, xdpnet.ErrReadConflict):
			select {
			case errc <- err:
			default:
			}
			c.Close()
			return true
		}
		fmt.Fprintln(os.Stderr, "udpecho:", err)
		return false
	}
	if queues {
		for _, q := range c.Queues() {
			wg.Add(1)
			go func(q *xdpnet.Queue) {
				defer wg.Done()
				msgs := make([]xdpnet.Message, 64)
				for {
					n, err := q.ReadView(msgs, -1)
					if err != nil && fail(err) {
						return
					}
					// Answer from the same queue; the views stay valid
					// until the next ReadView.
					for i := range msgs[:n] {
						msgs[i].Buf = msgs[i].Buf[:msgs[i].N]
					}
					if _, err := q.WriteBatch(msgs[:n]); err != nil && fail(err) {
						return
					}
				}
			}(q)
		}
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 65536)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					if fail(err) {
						return
					}
					continue
				}
				if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil && fail(err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}
