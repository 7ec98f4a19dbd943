// Command tcpecho is a TCP echo server on a TCP/IP stack of its own
// (package netstack: gVisor's stack over AF_XDP): it answers for an
// address the kernel does not have, ARP and neighbour discovery included,
// and sends every connection its bytes back. The kernel keeps the
// interface and the rest of its traffic.
//
//	tcpecho -i eth0 -addr 198.18.0.3/24[,2001:db8::3/64] [-port 7] [-gw ADDR] [-t 10s] [-accept-partial]
//
// The stack cuts its own large segments into frames (software TSO) and
// checks received checksums once, in the endpoint (RX checksum offload);
// -no-tso and -no-rx-csum hand both back to the stack. It prints what it
// echoed, and the stack's and the endpoint's counters, when it stops
// (Ctrl-C or -t): it stops accepting, gives open connections a second to
// end, closes the rest, and waits (another second at most) for their last
// ACKs, so that the peers see an orderly close and the counters add up.
//
// A peer on the same host, through a veth pair whose sending end has TX
// checksum offload on (veth's default), leaves its TCP checksums
// unfinished: tcpecho refuses such segments, counted as
// RXPartialChecksum, unless -accept-partial
// (netstack.Config.AcceptPartialChecksum) takes them; or turn the offload
// off on the peer's device: ethtool -K DEV tx off.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/netstack"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	os.Exit(exutil.Exit(os.Stderr, "tcpecho", run(os.Args[1:], os.Stdout)))
}

const synopsis = "tcpecho -i IFACE -addr PREFIX[,PREFIX] [-port 7] [-gw ADDR[,ADDR]] [-t 10s] [-accept-partial] [flags]"

// options are tcpecho's flags.
type options struct {
	exutil.Flags // -i, -q, -t, -copy, -skb
	cfg          netstack.Config
	port         uint16
}

// parseFlags parses and checks the command line (without the program
// name). Errors are *exutil.UsageError.
func parseFlags(args []string) (options, error) {
	var o options
	fs := exutil.NewFlagSet("tcpecho", synopsis)
	o.Register(fs, "batch", "nap", "frames")
	fs.IntVar(&o.Frames, "frames", 0, "UMEM frames per queue, 0 (the library's default: 4096, or what fits RLIMIT_MEMLOCK without CAP_IPC_LOCK) or 256-1048576")
	addrs := fs.String("addr", "", "the stack's own addresses with their prefix lengths, comma-separated, "+
		"such as 198.18.0.3/24,2001:db8::3/64 (required): addresses the kernel does not have")
	gws := fs.String("gw", "", "default gateways, comma-separated (one IPv4, one IPv6), each on one of -addr's networks")
	port := fs.Int("port", 7, "TCP port, 1-65535")
	fs.BoolVar(&o.cfg.NoTSO, "no-tso", false, "the stack cuts its segments to the MSS itself (no software TSO in the endpoint)")
	fs.BoolVar(&o.cfg.NoRXChecksumOffload, "no-rx-csum", false, "the stack checks every received checksum itself (no RX checksum offload in the endpoint)")
	fs.BoolVar(&o.cfg.AcceptPartialChecksum, "accept-partial", false, "accept TCP checksums a peer on this host left unfinished for an offload "+
		"(veth with TX checksumming on, its default), which are otherwise dropped as RXPartialChecksum")
	err := o.Parse(fs, args, func() error {
		switch {
		case o.Iface == "":
			return errors.New("-i IFACE is required")
		case *addrs == "":
			return errors.New("-addr PREFIX is required: the stack's own address, such as 198.18.0.3/24")
		case *port < 1 || *port > 65535:
			return fmt.Errorf("-port %d: must be 1-65535", *port)
		case o.Frames != 0 && (o.Frames < 256 || o.Frames > exutil.MaxFrames):
			return fmt.Errorf("-frames %d: must be 0 or 256-%d", o.Frames, exutil.MaxFrames)
		case o.cfg.AcceptPartialChecksum && o.cfg.NoRXChecksumOffload:
			return errors.New("-accept-partial needs the endpoint's checksum check: not with -no-rx-csum")
		}
		for _, s := range strings.Split(*addrs, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("-addr: %w (an address with its prefix length, such as 198.18.0.3/24)", err)
			}
			o.cfg.Addrs = append(o.cfg.Addrs, p)
		}
		if err := o.gateways(*gws); err != nil {
			return err
		}
		o.port = uint16(*port)
		return o.common()
	})
	return o, err
}

// gateways parses -gw into the config's Gateway4 and Gateway6.
func (o *options) gateways(list string) error {
	if list == "" {
		return nil
	}
	for _, s := range strings.Split(list, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-gw: %w", err)
		}
		if a.Is4() {
			o.cfg.Gateway4 = a
		} else {
			o.cfg.Gateway6 = a
		}
	}
	return nil
}

// common turns the common flags into the config: queues, copy mode,
// generic attach, UMEM frames.
func (o *options) common() error {
	qs, err := exutil.ParseQueues(o.Queues)
	if err != nil {
		return err
	}
	o.cfg.Queues, o.cfg.FramesPerQueue = qs, o.Frames
	if o.Copy {
		o.cfg.Bind = xsk.BindCopy
	}
	if o.Generic {
		o.cfg.Attach = xsk.AttachGeneric
	}
	return nil
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := exutil.Context()
	defer stop()
	st, err := netstack.Open(o.Iface, o.cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := st.ListenTCP(o.port)
	if err != nil {
		return err
	}
	if o.Duration > 0 { // -t counts from here, as in the other examples
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	// Connections made from here on reach the stack: scripts wait for
	// this line before they connect.
	fmt.Fprintf(out, "ready: %s; echoing TCP on %s port %d\n", st.Endpoint().Info(), addrList(o.cfg.Addrs), o.port)
	conns, bytes := serve(ctx, l)
	// Close first, once the closings' last ACKs are in: the counters then
	// hold every frame until the XDP program was gone.
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	st.Shutdown(sctx)
	ep, tcp := st.Endpoint().Stats(), st.TCPStats()
	var kernel uint64
	for _, s := range ep.Sockets {
		kernel += s.RXDropped + s.RXRingFull
	}
	fmt.Fprintf(out, "echoed %d bytes on %d connections; TCP: %d segments in, %d out, %d retransmitted, %d resets sent\n",
		bytes, conns, tcp.InSegs, tcp.OutSegs, tcp.RetransSegs, tcp.OutRsts)
	partial := fmt.Sprintf("%d unfinished ones", ep.RXPartialChecksum)
	if o.cfg.AcceptPartialChecksum {
		partial = fmt.Sprintf("none unfinished (%d accepted)", ep.RXPartialChecksum)
	}
	fmt.Fprintf(out, "frames: %d received (%d packets after GRO), %d sent (%d segments cut by TSO); dropped %d bad checksums, %s, %d malformed, %d not for us, %d not sent; the kernel dropped %d before the sockets\n",
		ep.RXFrames, ep.RXPackets, ep.TXFrames, ep.TXSegmented, ep.RXBadChecksum, partial, ep.RXMalformed, ep.RXNotForUs, ep.TXDropped, kernel)
	if ep.RXPartialChecksum > 0 && !o.cfg.AcceptPartialChecksum {
		fmt.Fprintf(out, "hint: %d frames dropped with unfinished checksums: a peer on this host (veth with TX checksum offload on) left them to an offload; run with -accept-partial, or on the peer: ethtool -K DEV tx off\n", ep.RXPartialChecksum)
	}
	if err := st.Endpoint().Err(); err != nil {
		return err // the device went away, or the program was detached
	}
	return nil
}

// addrList formats the stack's addresses without their prefix lengths.
func addrList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Addr().String()
	}
	return strings.Join(s, ", ")
}

// grace is how long open connections have to end on their own once
// tcpecho stops (Ctrl-C or -t), before it closes them; and then how long
// the stack has for the closings' last ACKs.
const grace = time.Second

// serve echoes every connection l accepts until ctx ends, then stops
// accepting, gives the open ones grace to end (a client that already
// closed its side has its FIN on the way), closes the rest, and returns
// how many there were and the bytes echoed.
func serve(ctx context.Context, l net.Listener) (conns, bytes uint64) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		open  = map[net.Conn]bool{}
		total atomic.Uint64
	)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			break // ctx ended (or the stack went away)
		}
		mu.Lock()
		open[c] = true
		mu.Unlock()
		conns++
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := io.Copy(c, c)
			total.Add(uint64(n))
			c.Close()
			mu.Lock()
			delete(open, c)
			mu.Unlock()
		}()
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		<-done
	}
	return conns, total.Load()
}
