// Command txonly sends UDP packets as fast as it can from every chosen
// queue of an interface, one AF_XDP socket per queue, through xsk's
// runner (Device.Send; -raw: a hand-written goroutine per queue). It
// prints packets/s per queue once a second and the totals at the end.
//
//	txonly -i eth0 -dst 198.18.0.1 [-dst-mac 02:00:00:00:00:01] [-size 64] [-q 0-1] [-t 10s] [-shape auto|per-queue|one] [-raw]
//
// -dst-mac is optional: by default the frames go to the Ethernet broadcast
// address, which the peer of a veth pair or a host on the same link takes
// in; give the MAC address of the destination (or of the router towards
// it) to send through a switch that learns addresses, or a router.
//
// Every flag is checked before anything is opened (-size against the
// interface's MTU, -flows against its number of queues, once it is known):
// a value out of range, or an argument that is not a flag, exits with
// status 2 and the usage. It loads no XDP program and has no RX ring, so
// the examples' -skb and -nap do not exist here.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	os.Exit(exutil.Exit(os.Stderr, "txonly", run(os.Args[1:])))
}

const synopsis = "txonly -i IFACE -dst ADDR [-dst-mac MAC] [-size 64] [-q 0-1] [-t 10s] [flags]"

const (
	// basePort is the first source port: queue q sends from the -flows
	// ports basePort+q×flows on.
	basePort = 10000
	// portSpace is how many source ports there are from basePort up.
	portSpace = 65536 - basePort
	// frameRoom is the most a TX frame can hold: the UMEM's default frame
	// size (xsk.UMEMConfig.FrameSize). TX data starts at the frame's start:
	// TX has no headroom, and txonly asks for no TX metadata.
	frameRoom = 4096
)

// options are txonly's flags.
type options struct {
	exutil.Flags
	dstMAC net.HardwareAddr // -dst-mac: 6 bytes
	dst    netip.Addr       // -dst: required
	src    netip.Addr       // -src: of dst's family, or invalid for the interface's
	port   int              // -port: 1..65535
	size   int              // -size: see checkSize
	flows  int              // -flows: see checkFlows
	shape  string           // -shape: auto, per-queue, one
	raw    bool             // -raw: the hand-written loop, a goroutine per queue

	dstMACText, dstText, srcText string
}

// flagSet registers txonly's flags on a new flag set, with o's fields as
// their values. -skb and -nap are left out: txonly loads no XDP program
// and has no RX ring to wait on.
func flagSet(o *options) *flag.FlagSet {
	fs := exutil.NewFlagSet("txonly", synopsis)
	o.Register(fs, "skb", "nap")
	fs.StringVar(&o.dstMACText, "dst-mac", "ff:ff:ff:ff:ff:ff", "destination MAC address (6 bytes), of the destination or the router towards it; the broadcast default reaches a peer on the same link")
	fs.StringVar(&o.dstText, "dst", "", "destination IPv4 or IPv6 address (required)")
	fs.StringVar(&o.srcText, "src", "", "source address, of the destination's family (default: the interface's first address of that family)")
	fs.IntVar(&o.port, "port", 9000, "destination UDP port, 1-65535")
	fs.IntVar(&o.size, "size", 64, fmt.Sprintf("frame size in bytes, Ethernet header included (without FCS): from %d (IPv4) or %d (IPv6) up to the interface's MTU + 14 and at most %d (a UMEM frame)", 14+20+8, 14+40+8, frameRoom))
	fs.StringVar(&o.shape, "shape", "auto", "how the runner spreads the queues over goroutines: "+exutil.ShapeNames)
	fs.BoolVar(&o.raw, "raw", false, "send with the plain loop instead of the runner (Device.Send): a goroutine per queue")
	fs.IntVar(&o.flows, "flows", 16, fmt.Sprintf("distinct source ports per queue: queue q sends from ports %d+q×flows on, so (highest queue + 1) × flows must be at most %d", basePort, portSpace))
	return fs
}

// parseFlags parses and validates txonly's command line (without the
// program name). What depends on the interface (its MTU, its number of
// queues) is checked by run. Errors are *exutil.UsageError.
func parseFlags(args []string) (options, error) {
	var o options
	err := o.Parse(flagSet(&o), args, func() error {
		if o.Iface == "" {
			return fmt.Errorf("-i IFACE is required")
		}
		if o.dstText == "" {
			return fmt.Errorf("-dst ADDR is required")
		}
		var err error
		if o.dst, err = parseAddr(o.dstText); err != nil {
			return fmt.Errorf("-dst: %w", err)
		}
		if o.srcText != "" {
			if o.src, err = parseAddr(o.srcText); err != nil {
				return fmt.Errorf("-src: %w", err)
			}
			if o.src.Is4() != o.dst.Is4() {
				return fmt.Errorf("-src %v and -dst %v: not of the same address family", o.src, o.dst)
			}
		}
		if o.dstMAC, err = net.ParseMAC(o.dstMACText); err != nil {
			return fmt.Errorf("-dst-mac: %w", err)
		}
		if len(o.dstMAC) != 6 {
			return fmt.Errorf("-dst-mac %s: a %d-byte address, want a 6-byte Ethernet address", o.dstMACText, len(o.dstMAC))
		}
		if o.port < 1 || o.port > 65535 {
			return fmt.Errorf("-port %d: must be 1-65535", o.port)
		}
		if _, err := exutil.ParseShape(o.shape); err != nil {
			return err
		}
		if err := checkSize(o.size, o.dst.Is6(), "", 0); err != nil {
			return err
		}
		maxQueue := 0
		if qs, _ := exutil.ParseQueues(o.Queues); qs != nil {
			maxQueue = slices.Max(qs)
		}
		return checkFlows(o.flows, maxQueue)
	})
	return o, err
}

// loop returns the runner's shape and whether to use the plain loop.
func (o *options) loop() (xsk.Shape, bool) {
	shape, _ := exutil.ParseShape(o.shape) // checked by parseFlags
	return shape, o.raw
}

// parseAddr parses an IP address, IPv4-mapped IPv6 as IPv4, without zone
// (a frame has no place for it).
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	return a.Unmap().WithZone(""), err
}

// checkSize checks -size for a frame of the family (IPv6 if v6): at least
// the Ethernet, IP and UDP headers, at most a UMEM frame (frameRoom) and,
// when mtu is positive, at most what the interface iface's MTU lets
// through (mtu plus the 14-byte Ethernet header).
func checkSize(size int, v6 bool, iface string, mtu int) error {
	lo, family := 14+20+8, "IPv4"
	if v6 {
		lo, family = 14+40+8, "IPv6"
	}
	if mtu <= 0 {
		if size < lo || size > frameRoom {
			return fmt.Errorf("-size %d: must be %d-%d bytes: at least the Ethernet, %s and UDP headers, at most a UMEM frame (%d bytes)", size, lo, frameRoom, family, frameRoom)
		}
		return nil
	}
	if hi := min(frameRoom, mtu+14); size < lo || size > hi {
		return fmt.Errorf("-size %d: must be %d-%d bytes on %s: at least the Ethernet, %s and UDP headers, at most what its MTU %d lets through (%d with the 14-byte Ethernet header) and what a UMEM frame holds (%d)",
			size, lo, hi, iface, family, mtu, mtu+14, frameRoom)
	}
	return nil
}

// checkFlows checks -flows for queues numbered up to maxQueue: queue q
// sends from source ports basePort+q×flows to basePort+(q+1)×flows-1,
// which must not pass 65535 (the port would wrap around).
func checkFlows(flows, maxQueue int) error {
	limit := portSpace / (maxQueue + 1)
	if flows < 1 || flows > limit {
		return fmt.Errorf("-flows %d: must be 1-%d with queues up to %d: queue q sends from source ports %d+q×flows on, and (highest queue + 1) × flows must be at most %d",
			flows, limit, maxQueue, basePort, portSpace)
	}
	return nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(o.Iface)
	if err != nil {
		return fmt.Errorf("-i %s: %w", o.Iface, err)
	}
	if err := checkSize(o.size, o.dst.Is6(), ifi.Name, ifi.MTU); err != nil {
		return o.Usage(err)
	}
	if cfg.Queues == nil {
		n, err := nic.RXQueues(o.Iface)
		if err != nil {
			return err
		}
		if err := checkFlows(o.flows, n-1); err != nil {
			return o.Usage(fmt.Errorf("%w (-q all: %s has %d queues)", err, o.Iface, n))
		}
	}
	srcIP := o.src
	if !srcIP.IsValid() {
		if srcIP, err = sourceAddr(ifi, o.dst.Is4()); err != nil {
			return err
		}
	}
	frame, err := BuildUDP(ifi.HardwareAddr, o.dstMAC, srcIP, o.dst, basePort, uint16(o.port), o.size)
	if err != nil {
		return err
	}
	cfg.Socket.NoRX = true
	cfg.Socket.TXBudget = 256
	// Sending needs no XDP program: RX stays with the kernel.
	cfg.NoProgram = true
	ctx, cancel := exutil.Context()
	defer cancel()
	shape, raw := o.loop()
	return txonly(ctx, o.Iface, cfg, frame, o.flows, o.Batch, shape, raw, o.Duration)
}

// sourceAddr returns ifi's first address of the family (IPv4 if v4) that
// is not link-local.
func sourceAddr(ifi *net.Interface, v4 bool) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(n.IP)
			ip = ip.Unmap()
			if ip.Is4() == v4 && !ip.IsLinkLocalUnicast() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no address of the destination's family: give -src", ifi.Name)
}

// BuildUDP returns an Ethernet/IP/UDP frame of size bytes with valid
// checksums, built by offload.Headers.
func BuildUDP(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16, size int) ([]byte, error) {
	h := offload.Headers{SrcMAC: srcMAC, DstMAC: dstMAC, Src: netip.AddrPortFrom(src, sport), Dst: netip.AddrPortFrom(dst, dport)}
	if err := h.Check(); err != nil {
		return nil, err
	}
	hl := h.Len(offload.ProtoUDP)
	if size < hl || size > 9000 {
		return nil, fmt.Errorf("frame size %d: must be between %d and 9000", size, hl)
	}
	f := make([]byte, size)
	if _, err := h.BuildUDP(f, 0, make([]byte, size-hl)); err != nil {
		return nil, err
	}
	return f, nil
}

// txonly sends copies of frame, with the source port cycling over flows
// values, until ctx ends or, if d is positive, for d once the sockets are
// open: through the runner (Device.Send) unless raw.
func txonly(ctx context.Context, iface string, cfg xsk.Config, frame []byte, flows, batch int, shape xsk.Shape, raw bool, d time.Duration) error {
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	socks := dev.Sockets()
	how := "the runner"
	if raw {
		how = "the plain loop"
	}
	exutil.Ready(os.Stdout, dev, fmt.Sprintf("sending %d-byte frames through %s", len(frame), how))
	// One set of frames per queue: the source port changes per flow, and
	// so does the UDP checksum (RFC 1624 incremental update). Each queue's
	// state is touched only by the goroutine that sends on it.
	type queueState struct {
		tmpl [][]byte
		n    int
	}
	lo, r := offload.Parse(frame)
	if r != offload.ReasonNone || lo.Proto != offload.ProtoUDP {
		return fmt.Errorf("txonly: the template frame is not UDP: %v", r)
	}
	states := map[*xsk.Socket]*queueState{}
	for _, s := range socks {
		st := &queueState{tmpl: make([][]byte, flows)}
		for i := range st.tmpl {
			t := append([]byte(nil), frame...)
			u := offload.UDP(t[lo.L4:])
			old := u.SrcPort()
			sport := old + uint16(s.Queue()*flows+i)
			u.SetSrcPort(sport)
			if c := u.Checksum(); c != 0 {
				u.SetChecksum(offload.Update16(c, old, sport))
			}
			st.tmpl[i] = t
		}
		states[s] = st
	}
	// fill writes the frames of b from index from on.
	fill := func(s *xsk.Socket, b *xsk.Batch, from int) {
		st := states[s]
		for i := from; i < b.Len(); i++ {
			b.SetLen(i, copy(b.Buffer(i), st.tmpl[st.n%flows]))
			st.n++
		}
	}
	linkChange := func(s *xsk.Socket, up bool) {
		if up {
			fmt.Fprintf(os.Stderr, "txonly: queue %d: link up, sending again\n", s.Queue())
		} else {
			fmt.Fprintf(os.Stderr, "txonly: queue %d: %v; resuming when it is up\n", s.Queue(), xsk.ErrLinkDown)
		}
	}
	// A device that goes away ends the run with its error; a link that
	// goes down holds the frames and the senders resume when it is up.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(socks)+1)
	if !raw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := dev.Send(ctx, xsk.RunConfig{Shape: shape, Batch: batch, LinkChange: linkChange}, func(s *xsk.Socket, b *xsk.Batch) error {
				fill(s, b, 0)
				return nil
			})
			if err != nil {
				errs <- err
				stop()
			}
		}()
	}
	for _, s := range socks {
		if !raw {
			break
		}
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(batch)
			defer s.Free(b)
			down := false
			for ctx.Err() == nil {
				got := s.Alloc(b, batch-b.Len())
				fill(s, b, b.Len()-got)
				_, err := s.Transmit(b)
				switch {
				case errors.Is(err, xsk.ErrLinkDown):
					if !down {
						linkChange(s, false)
					}
					down = true
					if err := s.Sleep(100 * time.Millisecond); err != nil {
						return
					}
					continue
				case err != nil:
					errs <- fmt.Errorf("queue %d: %w", s.Queue(), err)
					stop()
					return
				}
				if down {
					linkChange(s, true)
					down = false
				}
				s.Complete()
			}
		}(s)
	}
	exutil.Report(ctx, os.Stdout, socks, "sent", func(st xsk.Stats) uint64 { return st.TXFrames }, d)
	stop()
	wg.Wait()
	// Frames still on the TX rings get a moment to leave; then what was
	// put on a ring but never completed is reported apart from what was
	// sent.
	deadline := time.Now().Add(200 * time.Millisecond)
	var submitted, sent, pending uint64
	for _, s := range socks {
		for s.TXPending() > 0 && time.Now().Before(deadline) && s.Err() == nil {
			if s.Complete() == 0 {
				s.Kick()
				time.Sleep(time.Millisecond)
			}
		}
		if st, err := s.Stats(); err == nil {
			submitted += st.TXSubmitted
			sent += st.TXFrames
			pending += uint64(st.FramesTX)
		}
	}
	fmt.Printf("submitted %d frames: %d sent (completed by the kernel), %d not completed\n", submitted, sent, pending)
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
