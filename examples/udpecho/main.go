// Command udpecho is the hello world of a Go program on xdpio: a UDP echo
// server whose datagrams move over AF_XDP (package xdpnet), answering each
// datagram to its sender. ARP, ICMP, SSH and every other port stay with
// the kernel.
//
//	udpecho -i eth0 [-port 7] [-addr 198.18.0.2] [-t 10s] [-queues] [-accept-partial]
//
// With -queues it reads each RX queue in its own goroutine, in place, and
// answers through the same queue (the fast path); without, it uses the
// conn as a net.PacketConn. It prints what it echoed and what was dropped,
// by cause, when it stops (Ctrl-C or -t).
//
// A sender on the same host, through a veth pair whose sending end has
// TX checksum offload on (veth's default), leaves its UDP checksums
// unfinished: the kernel only fills them in for packets that leave the
// host. udpecho drops such datagrams and counts them as PartialChecksum,
// unless -accept-partial (xdpnet.RXChecksumAcceptPartial) accepts them;
// or turn the offload off on the sender's device: ethtool -K DEV tx off.
//
// Every flag is checked before anything is opened: a value out of range,
// or an argument that is not a flag, exits with status 2 and the usage;
// -h prints the usage and exits 0.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	os.Exit(exutil.Exit(os.Stderr, "udpecho", run(os.Args[1:], os.Stdout)))
}

const synopsis = "udpecho -i IFACE [-port 7] [-addr ADDR] [-t 10s] [-queues] [-accept-partial] [flags]"

// options are udpecho's flags.
type options struct {
	exutil.Flags  // -i and -t; the others are xsk's, which xdpnet sets itself
	addr          netip.Addr
	port          uint16
	queues        bool
	frames        int
	acceptPartial bool
}

// parseFlags parses and checks the command line (without the program
// name). Errors are *exutil.UsageError.
func parseFlags(args []string) (options, error) {
	var o options
	fs := exutil.NewFlagSet("udpecho", synopsis)
	o.Register(fs, "q", "copy", "skb", "batch", "nap", "frames")
	addr := fs.String("addr", "::", "local address: one of the interface's, or :: for all (IPv4 and IPv6)")
	port := fs.Int("port", 7, "UDP port, 1-65535")
	fs.BoolVar(&o.queues, "queues", false, "one goroutine per RX queue, reading in place (the fast path)")
	fs.IntVar(&o.frames, "frames", 0, "UMEM frames per queue, 0 (the library's default: 4096, or what fits RLIMIT_MEMLOCK without CAP_IPC_LOCK) or 256-1048576")
	fs.BoolVar(&o.acceptPartial, "accept-partial", false, "accept UDP checksums a sender on this host left unfinished for an offload "+
		"(veth with TX checksumming on, its default), which are otherwise dropped as PartialChecksum (xdpnet.RXChecksumAcceptPartial)")
	err := o.Parse(fs, args, func() error {
		switch {
		case o.Iface == "":
			return errors.New("-i IFACE is required")
		case *port < 1 || *port > 65535:
			return fmt.Errorf("-port %d: must be 1-65535", *port)
		case o.frames != 0 && (o.frames < 256 || o.frames > 1<<20):
			return fmt.Errorf("-frames %d: must be 0 or 256-1048576", o.frames)
		}
		a, err := netip.ParseAddr(*addr)
		if err != nil {
			return fmt.Errorf("-addr: %w", err)
		}
		o.addr, o.port = a.Unmap(), uint16(*port)
		return nil
	})
	return o, err
}

// config is the xdpnet.Config the options ask for.
func (o *options) config() xdpnet.Config {
	cfg := xdpnet.Config{FramesPerQueue: o.frames}
	if o.acceptPartial {
		cfg.RXChecksum = xdpnet.RXChecksumAcceptPartial
	}
	return cfg
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := exutil.Context()
	defer stop()
	c, err := xdpnet.ListenUDP(o.Iface, netip.AddrPortFrom(o.addr, o.port), o.config())
	if err != nil {
		return err
	}
	if o.Duration > 0 { // -t counts from here, as in the other examples
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	// Datagrams sent from here on reach the conn: scripts wait for this
	// line before they send.
	exutil.ReadyConn(out, c, fmt.Sprintf("echoing UDP to %v", c.LocalAddr()))
	err = serve(ctx, c, o.queues)
	// Close first: the counters it keeps include what the kernel dropped
	// until the XDP program was gone.
	c.Close()
	st := c.Stats().Total()
	fmt.Fprintf(out, "received %d datagrams, echoed %d (%d bytes); dropped %d: %+v; the kernel dropped %d before the sockets\n",
		st.Datagrams, st.Sent, st.SentBytes, st.Drops.Total(), st.Drops, st.Socket.RXDropped+st.Socket.RXRingFull)
	if n := st.Drops.PartialChecksum; n > 0 {
		fmt.Fprintf(out, "hint: %d datagrams dropped as PartialChecksum: a sender on this host (veth with TX checksum offload on) left their checksums unfinished; run with -accept-partial, or on the sender: ethtool -K DEV tx off\n", n)
	}
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
