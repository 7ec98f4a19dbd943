package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/asavieplane"
	"github.com/xdpio/xdpio/bench/gvisorxdpplane"
	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/place"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
)

// Backends the bench commands accept: AF_XDP through xdpio (xsk), kernel
// sockets, AF_XDP through github.com/asavie/xdp v0.3.3 (the Go peer for
// UDP), and gVisor's TCP on gVisor's own AF_XDP endpoint (gvisor-xdp, the
// peer for TCP). "auto" is xsk when an interface is given with -i, kernel
// sockets otherwise.
var benchBackends = []string{"auto", "xsk", "socket", "asavie", "gvisor-xdp"}

// backendHelp is the --backend flag's help.
const backendHelp = "data plane: auto (xsk when -i IFACE is given, socket otherwise), xsk (AF_XDP through xdpio: UDP through xdpnet, TCP through netstack, gVisor's TCP/IP stack), socket (kernel sockets and TCP), asavie (UDP through AF_XDP with github.com/asavie/xdp; no TCP) or gvisor-xdp (TCP through gVisor's stack on gVisor's own AF_XDP endpoint, gvisor.dev/gvisor/pkg/tcpip/link/xdp: queue 0 of a 1-queue interface; no UDP)"

// checker is a data plane that can try its interface before a test.
type checker interface{ Check() error }

// dataPlane returns the data plane a bench command asked for.
func (g *globals) dataPlane(backend, iface string, onClose func([]plane.QueueCount)) (plane.DataPlane, string, error) {
	switch backend {
	case "auto":
		if iface == "" {
			return &kernelplane.DataPlane{Do: g.inNetns}, "socket", nil
		}
		fallthrough
	case "xsk":
		if iface == "" {
			return nil, "", usagef("--backend xsk needs -i IFACE")
		}
		return &xskplane.DataPlane{Iface: iface, Do: g.inNetns, OnClose: onClose}, "xsk", nil
	case "socket":
		return &kernelplane.DataPlane{Do: g.inNetns}, "socket", nil
	case "asavie":
		if iface == "" {
			return nil, "", usagef("--backend asavie needs -i IFACE")
		}
		return &asavieplane.DataPlane{Iface: iface, Do: g.inNetns, OnClose: onClose}, "asavie", nil
	case "gvisor-xdp":
		if iface == "" {
			return nil, "", usagef("--backend gvisor-xdp needs -i IFACE")
		}
		return gvisorXDP{&gvisorxdpplane.Plane{Iface: iface, Do: g.inNetns}}, "gvisor-xdp", nil
	}
	return nil, "", usagef("--backend %q: want %s", backend, strings.Join(benchBackends, ", "))
}

func newBenchCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "iperf3-compatible TCP and UDP benchmark over AF_XDP (TCP through xdpio's netstack) or kernel sockets (server and client talk to real iperf3)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newBenchServerCmd(g), newBenchClientCmd(g), newBenchDemoCmd(g))
	return c
}

// benchServerOptions are the flags of bench server.
type benchServerOptions struct {
	port     int
	bind     string
	oneOff   bool
	backend  string
	iface    string
	stack    stackFlags
	oneRead  bool
	cookieTO time.Duration
	ipf      iperfFlags
}

func (o *benchServerOptions) addFlags(c *cobra.Command) {
	c.Flags().IntVarP(&o.port, "port", "p", 5201, "TCP control port (iperf3's default 5201)")
	c.Flags().StringVarP(&o.bind, "bind", "B", "", "address to listen on (default: all)")
	c.Flags().BoolVarP(&o.oneOff, "one-off", "1", false, "exit after one test")
	o.ipf.add(c)
	c.Flags().StringVar(&o.backend, "backend", "auto", backendHelp)
	c.Flags().StringVarP(&o.iface, "interface", "i", "", "interface whose queues the xsk backend binds (the control connection stays with the kernel)")
	o.stack.add(c, " (UDP tests' AF_XDP sockets and TCP tests' netstack)")
	c.Flags().DurationVar(&o.cookieTO, "cookie-timeout", bench.DefaultCookieTimeout, "how long a new control connection may take to send its cookie (iperf3 sends it at once) before it is closed; silent connections never hold off other clients")
	c.Flags().BoolVar(&o.oneRead, "one-reader", false, "UDP tests: read every RX queue in one goroutine (with --rx-usecs: one coalescing policy for all), not one per queue: fewer wake-ups on a machine with fewer CPUs than queues")
}

func newBenchServerCmd(g *globals) *cobra.Command {
	var o benchServerOptions
	c := &cobra.Command{
		Use:   "server [-i IFACE] [--port 5201] [--bind ADDR] [-1] [--backend auto|xsk|socket|asavie|gvisor-xdp] [--queues LIST|all] [--rx-usecs N --rx-frames N | --adaptive] [--tx-usecs N --tx-frames N] [--tso on|off] [--rx-csum on|off] [--qdisc fifo|none] [--one-reader] [--cookie-timeout 2s]",
		Short: "Serve iperf3 clients (TCP and UDP tests) until Ctrl-C, or for one test with -1",
		// Short forms people type for it, for "Did you mean".
		SuggestFor: []string{"srv", "serve", "s"},
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchServer(cmd, g, &o)
		},
	}
	o.addFlags(c)
	return c
}

func runBenchServer(cmd *cobra.Command, g *globals, o *benchServerOptions) error {
	if err := o.ipf.check(g, o.iface); err != nil {
		return err
	}
	// The queues are printed with the test's report: only a receiving
	// server's RX queues carry the test.
	printQ := g.printQueues(o.iface)
	queues := &queueLog{print: func([]plane.QueueCount) {}}
	dp, tp, backend, err := o.dataPlane(cmd, g, queues)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	var ln net.Listener
	if err := g.inNetns(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(o.bind, strconv.Itoa(o.port)))
		return err
	}); err != nil {
		return fmt.Errorf("bench server: %w", err)
	}
	var lastErr error
	s := o.server(g, dp, queues, printQ, cancel, &lastErr)
	s.TCPPlane = tp
	if !g.json {
		tests := "TCP and UDP tests"
		if _, ok := dp.(gvisorXDP); ok {
			tests = "TCP tests"
		}
		fmt.Fprintf(g.stdout, "Server listening on %s (%s, %s backend)\n", ln.Addr(), tests, backend)
	}
	err = s.Serve(ctx, ln)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("bench server: %w", err)
	}
	if o.oneOff && lastErr != nil && cmd.Context().Err() == nil {
		return fmt.Errorf("bench server: %w", lastErr)
	}
	if cmd.Context().Err() != nil && !g.json {
		// Ctrl-C or SIGTERM: the way to stop a server, not an error
		// (exit 0).
		fmt.Fprintln(g.stderr, "xdpio: bench server: stopped")
	}
	return nil
}

// stackFlagNames are the flags of the xsk backend's queues and netstack.
var stackFlagNames = []string{"queues", "rx-usecs", "rx-frames", "adaptive", "tx-usecs", "tx-frames", "tso", "rx-csum"}

// dataPlane checks the flags and returns the data plane and the TCP
// plane they ask for, set up and checked, and the backend's name; queues
// records the data plane's per-queue counts.
func (o *benchServerOptions) dataPlane(cmd *cobra.Command, g *globals, queues *queueLog) (plane.DataPlane, plane.TCPPlane, string, error) {
	dp, backend, err := g.dataPlane(o.backend, o.iface, queues.record)
	if err != nil {
		return nil, nil, "", err
	}
	if o.port < 1 || o.port > 65535 {
		return nil, nil, "", usagef("--port %d: must be 1-65535", o.port)
	}
	if o.cookieTO <= 0 {
		return nil, nil, "", usagef("--cookie-timeout %v: must be positive (a client sends its cookie as soon as it is connected)", o.cookieTO)
	}
	fs := cmd.Flags()
	ss, err := o.stack.parse(fs)
	if err != nil {
		return nil, nil, "", err
	}
	x, isXSK := dp.(*xskplane.DataPlane)
	gx, isGX := dp.(gvisorXDP)
	if given := changed(fs, append(stackFlagNames, "one-reader")...); !isXSK && !isGX && len(given) > 0 {
		return nil, nil, "", usagef("%s: about xdpio's AF_XDP queues and netstack: they need the xsk backend (-i IFACE)", strings.Join(given, ", "))
	}
	if err := qdiscFlag(fs, isGX); err != nil {
		return nil, nil, "", err
	}
	var tp plane.TCPPlane
	switch {
	case isGX:
		if err := gvisorXDPFlags(fs, ss, gx.tcp); err != nil {
			return nil, nil, "", err
		}
		tp = gx.tcp
	case isXSK:
		if err := o.configureXSK(g, x, ss); err != nil {
			return nil, nil, "", err
		}
		tp = ss.tcpPlane(g, o.iface)
	case backend == "asavie":
		tp = noTCP{backend}
	}
	if x, ok := dp.(checker); ok {
		if err := x.Check(); err != nil {
			return nil, nil, "", fmt.Errorf("bench server: %w", err)
		}
	}
	return dp, tp, backend, nil
}

// configureXSK sets up the xsk backend's queues, reader and software
// coalescing from the flags.
func (o *benchServerOptions) configureXSK(g *globals, x *xskplane.DataPlane, ss stackSettings) error {
	x.Config.Queues = ss.queues
	x.OneReader = o.oneRead
	if ss.rx == nil {
		return nil
	}
	x.Coalesce = ss.rx
	// A coalescing receiver keeps its P while it sleeps a window; the
	// rest of the program needs one more.
	n := len(ss.queues)
	if o.oneRead {
		n = 1
	} else if n == 0 {
		if err := g.inNetns(func() (err error) { n, err = nic.RXQueues(o.iface); return err }); err != nil {
			return fmt.Errorf("bench server: %w", err)
		}
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), n+1))
	return nil
}

// server is the command's bench.Server: it prints each test's report
// (and, in text, its intervals), keeps a test's error in lastErr, and
// with -1 cancels the serving after the first test.
func (o *benchServerOptions) server(g *globals, dp plane.DataPlane, queues *queueLog, printQ func([]plane.QueueCount), cancel func(), lastErr *error) *bench.Server {
	ivs := &intervalPrinter{g: g, unit: o.ipf.unit()}
	s := &bench.Server{
		DataPlane:     dp,
		CookieTimeout: o.cookieTO,
		Interval:      o.ipf.period(),
		OnReport: func(r *bench.Report, err error) {
			*lastErr = err
			if r != nil {
				r.End.RXQueues = queues.take()
				if r.Start.TestStart.Reverse == 0 && r.End.RXQueues != nil {
					printQ(r.End.RXQueues)
				}
			}
			ivs.reset()
			printBenchReport(g, r, err, o.ipf.unit())
			if err != nil && !o.oneOff {
				// The server goes on: say what went wrong with this
				// test, once. With -1 it is the command's error.
				fmt.Fprintf(g.stderr, "xdpio: bench server: %v\n", err)
			}
			if o.oneOff {
				cancel()
			}
		},
	}
	if !g.json {
		s.OnInterval = ivs.print
	}
	return s
}

// benchClientOptions are the flags of bench client.
type benchClientOptions struct {
	server   string
	port     int
	streams  int
	seconds  int
	length   int
	rate     string
	reverse  bool
	backend  string
	iface    string
	counters bool
	rssKey   string
	rssQs    int
	rssTable string
	rssAddrs bool
	only4    bool
	only6    bool
	stack    stackFlags
	ipf      iperfFlags
}

func (o *benchClientOptions) addFlags(c *cobra.Command) {
	c.Flags().StringVarP(&o.server, "client", "c", "", "server address (required)")
	c.MarkFlagRequired("client")
	c.Flags().IntVarP(&o.port, "port", "p", 5201, "server's TCP control port")
	c.Flags().IntVarP(&o.streams, "parallel", "P", 1, "parallel streams")
	c.Flags().IntVarP(&o.seconds, "time", "t", 10, "seconds to send")
	c.Flags().IntVarP(&o.length, "length", "l", 0, "TCP: bytes per read or write (default 128 KiB, as iperf3); UDP: payload bytes (default: the control connection's TCP MSS, as iperf3 picks it: 1448 on a 1500-byte MTU)")
	c.Flags().StringVarP(&o.rate, "bitrate", "b", "", "target per stream, bits/s with k/M/G suffix, 0 for unlimited (default: as iperf3, 1M for UDP, unlimited for TCP)")
	c.Flags().BoolVarP(&o.reverse, "reverse", "R", false, "the server sends, the client receives")
	o.ipf.add(c)
	c.Flags().BoolVar(&o.counters, "udp-counters-32bit", false, "UDP: iperf3's 32-bit sequence numbers instead of 64-bit")
	c.Flags().StringVar(&o.backend, "backend", "auto", backendHelp)
	c.Flags().StringVarP(&o.iface, "interface", "i", "", "interface the xsk backend sends and receives on")
	o.stack.add(c, " (a TCP test's netstack)")
	c.Flags().BoolVarP(&o.only4, "version4", "4", false, "IPv4 only (resolve -c NAME to an IPv4 address)")
	c.Flags().BoolVarP(&o.only6, "version6", "6", false, "IPv6 only (resolve -c NAME to an IPv6 address)")
	c.Flags().IntVar(&o.rssQs, "rss-queues", 0, "place the streams on the server NIC's RSS queues: its table spreads equally over this many (as the kernel's default table)")
	c.Flags().StringVar(&o.rssTable, "rss-table", "", "place the streams by the server NIC's indirection table, entries as 'xdpio rss show' lists them (q0,q1,…)")
	c.Flags().StringVar(&o.rssKey, "rss-key", "", "the server NIC's RSS hash key in hex (default: Microsoft's published key; Linux NICs usually have a random one, see 'xdpio rss show DEV' on the server)")
	c.Flags().BoolVar(&o.rssAddrs, "rss-addresses-only", false, "the server NIC hashes UDP by addresses only (then ports cannot place streams)")
}

func newBenchClientCmd(g *globals) *cobra.Command {
	var o benchClientOptions
	c := &cobra.Command{
		Use:        "client -c SERVER [-u] [--port 5201] [-P FLOWS] [-t SECONDS] [-l LENGTH] [-b RATE] [-R] [-4|-6] [-i IFACE] [--backend auto|xsk|socket|asavie|gvisor-xdp] [--queues LIST|all] [--tso on|off] [--rx-csum on|off] [--qdisc fifo|none] [--rx-usecs N --rx-frames N | --adaptive] [--tx-usecs N --tx-frames N] [--rss-queues N | --rss-table LIST] [--rss-key HEX]",
		Short:      "Run a TCP test (iperf3's default; over AF_XDP through xdpio's netstack with -i) or a UDP test (-u) against an iperf3 server (or xdpio bench server)",
		SuggestFor: []string{"cli", "c"},
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchClient(cmd, g, &o)
		},
	}
	o.addFlags(c)
	return c
}

func runBenchClient(cmd *cobra.Command, g *globals, o *benchClientOptions) error {
	if err := o.ipf.check(g, o.iface); err != nil {
		return err
	}
	// A sending client's RX queues carry nothing of the test: print them
	// only when it receives (-R).
	printQ := func([]plane.QueueCount) {}
	if o.reverse {
		printQ = g.printQueues(o.iface)
	}
	queues := &queueLog{print: printQ}
	dp, backend, err := g.dataPlane(o.backend, o.iface, queues.record)
	if err != nil {
		return err
	}
	bps, err := o.test(cmd.Flags())
	if err != nil {
		return err
	}
	tp, err := o.planes(cmd.Flags(), g, dp, backend)
	if err != nil {
		return err
	}
	addr, err := o.serverAddr(cmd.Context(), g)
	if err != nil {
		return err
	}
	if x, ok := dp.(checker); ok {
		if err := x.Check(); err != nil {
			return fmt.Errorf("bench client: %w", err)
		}
	}
	placer, err := o.placer(dp, backend)
	if err != nil {
		return err
	}
	cl := o.client(g, netip.AddrPortFrom(addr, uint16(o.port)), dp, bps)
	cl.TCPPlane = tp
	if !g.json {
		o.announce(g, cl, backend)
	}
	r, err := cl.Run(cmd.Context())
	if err != nil && errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		// Ctrl-C: the test was cut short, which is what to say (iperf3
		// exits 1 too).
		err = errInterrupted
		if r != nil {
			r.Error = err.Error()
		}
	}
	if r != nil {
		r.End.RXQueues = queues.take()
	}
	if r != nil && placer != nil {
		r.Start.Placement = placer.Placements()
		if !g.json {
			printPlacement(g, r.Start.Placement)
		}
	}
	printBenchReport(g, r, err, o.ipf.unit())
	if err != nil {
		return fmt.Errorf("bench client: %w", err)
	}
	return nil
}

// serverAddr is -c's address: an IP address, or a name resolved (inside
// --netns) in the family -4 or -6 asks for.
func (o *benchClientOptions) serverAddr(ctx context.Context, g *globals) (netip.Addr, error) {
	if o.only4 && o.only6 {
		return netip.Addr{}, usagef("-4 and -6: give one")
	}
	addr, err := netip.ParseAddr(o.server)
	if err != nil {
		// A name: resolve it, in the family -4/-6 ask for.
		network := "ip"
		if o.only4 {
			network = "ip4"
		} else if o.only6 {
			network = "ip6"
		}
		var addrs []netip.Addr
		if err := g.inNetns(func() (err error) {
			addrs, err = net.DefaultResolver.LookupNetIP(ctx, network, o.server)
			return err
		}); err != nil || len(addrs) == 0 {
			return netip.Addr{}, fmt.Errorf("bench client: -c %s: %v", o.server, err)
		}
		addr = addrs[0]
	}
	addr = addr.Unmap()
	if (o.only4 && !addr.Is4()) || (o.only6 && !addr.Is6()) {
		return netip.Addr{}, usagef("-c %v is not of the family -4/-6 asks for", addr)
	}
	return addr, nil
}

// test checks the test's flags and returns its bit rate, 0 for iperf3's
// default (a UDP test's 1 Mbit/s, a TCP test's no limit). The length
// defaults, as iperf3's, to the control connection's MSS in a UDP test,
// to 128 KiB in a TCP test (0 here).
func (o *benchClientOptions) test(fs *pflag.FlagSet) (uint64, error) {
	if o.port < 1 || o.port > 65535 {
		return 0, usagef("--port %d: must be 1-65535", o.port)
	}
	if o.streams < 1 || o.streams > 128 {
		return 0, usagef("-P %d: must be 1-128", o.streams)
	}
	if o.seconds < 1 || o.seconds > 86400 {
		return 0, usagef("-t %d: must be 1-86400 seconds", o.seconds)
	}
	udp := o.ipf.udp
	var bps uint64 // a TCP test's default: unlimited
	if fs.Changed("bitrate") || udp {
		if !fs.Changed("bitrate") {
			o.rate = "1M"
		}
		var err error
		if bps, err = parseRate(o.rate); err != nil {
			return 0, usagef("-b %q: %v", o.rate, err)
		}
	}
	if !udp {
		if given := changed(fs, "udp-counters-32bit", "rss-queues", "rss-table", "rss-key", "rss-addresses-only"); len(given) > 0 {
			return 0, usagef("%s: about UDP tests: give -u (TCP is the default test, as iperf3's)", strings.Join(given, ", "))
		}
	}
	switch {
	case !fs.Changed("length"):
		o.length = 0 // iperf3's choice
	case udp:
		if lo := iperf3.HeaderLen(!o.counters); o.length < lo || o.length > 65507 {
			return 0, usagef("-l %d: a UDP payload is %d-65507 bytes", o.length, lo)
		}
	case o.length < 1 || o.length > 1<<20:
		return 0, usagef("-l %d: a TCP test reads and writes 1 byte to 1 MiB at a time (iperf3's limit)", o.length)
	}
	return bps, nil
}

// planes checks the backend's settings against the test and returns the
// TCP plane of a TCP test (nil: the kernel's TCP).
func (o *benchClientOptions) planes(fs *pflag.FlagSet, g *globals, dp plane.DataPlane, backend string) (plane.TCPPlane, error) {
	ss, err := o.stack.parse(fs)
	if err != nil {
		return nil, err
	}
	x, isXSK := dp.(*xskplane.DataPlane)
	gx, isGX := dp.(gvisorXDP)
	if given := changed(fs, stackFlagNames...); !isXSK && !isGX && len(given) > 0 {
		return nil, usagef("%s: about xdpio's AF_XDP queues and netstack: they need the xsk backend (-i IFACE)", strings.Join(given, ", "))
	}
	if err := qdiscFlag(fs, isGX); err != nil {
		return nil, err
	}
	if isGX {
		if o.ipf.udp {
			return nil, usagef("--backend gvisor-xdp runs TCP tests only (gVisor's stack on gVisor's AF_XDP endpoint): drop -u, or give -u another backend (xsk, socket, asavie)")
		}
		if err := gvisorXDPFlags(fs, ss, gx.tcp); err != nil {
			return nil, err
		}
		return gx.tcp, nil
	}
	if o.ipf.udp {
		if given := changed(fs, "rx-usecs", "rx-frames", "adaptive", "tx-usecs", "tx-frames", "tso", "rx-csum"); len(given) > 0 {
			return nil, usagef("%s: about a TCP test's netstack: not with -u (a UDP client's AF_XDP sockets take --queues)", strings.Join(given, ", "))
		}
		if isXSK {
			x.Config.Queues = ss.queues
		}
		return nil, nil
	}
	switch {
	case backend == "asavie":
		return nil, usagef("--backend asavie has no TCP stack: give -u for a UDP test, or --backend xsk for TCP over AF_XDP (netstack)")
	case isXSK:
		return ss.tcpPlane(g, o.iface), nil
	}
	return nil, nil
}

// placer is the stream placer of the --rss-* flags, handed to the data
// plane (nil when they ask for none).
func (o *benchClientOptions) placer(dp plane.DataPlane, backend string) (*place.Placer, error) {
	placer, err := benchPlacer(o.rssKey, o.rssQs, o.rssTable, o.rssAddrs)
	if err != nil || placer == nil { // not a nil *place.Placer in a non-nil interface
		return nil, err
	}
	switch d := dp.(type) {
	case *kernelplane.DataPlane:
		d.Placer = placer
	case *xskplane.DataPlane:
		d.Placer = placer
	case *asavieplane.DataPlane:
		d.Placer = placer
	default:
		return nil, usagef("--rss-queues/--rss-table: the %s backend cannot place streams", backend)
	}
	return placer, nil
}

// client is the command's bench.Client, dialling from inside --netns.
func (o *benchClientOptions) client(g *globals, server netip.AddrPort, dp plane.DataPlane, bps uint64) *bench.Client {
	return &bench.Client{
		Server:     server,
		DataPlane:  dp,
		Streams:    o.streams,
		Duration:   time.Duration(o.seconds) * time.Second,
		Length:     o.length,
		Bitrate:    bps,
		Reverse:    o.reverse,
		Counters32: o.counters,
		UDP:        o.ipf.udp,
		Interval:   o.ipf.period(),
		Dial: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			err = g.inNetns(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}
}

// announce prints the text client's first line and has cl print its
// intervals as they come.
func (o *benchClientOptions) announce(g *globals, cl *bench.Client, backend string) {
	rate, kind := cl.Bitrate, "TCP"
	if cl.UDP {
		kind = "UDP"
		if rate == 0 {
			rate = 1 << 20 // bench.Client's UDP default
		}
	}
	rateText := "unlimited rate"
	if rate != 0 && rate != bench.BitrateUnlimited {
		rateText, _ = bench.FormatRate(float64(rate), o.ipf.unit())
	}
	fmt.Fprintf(g.stdout, "Connecting to %v, %d %s stream(s), %s each, for %d s (%s backend)\n", cl.Server, o.streams, kind, rateText, o.seconds, backend)
	ivs := &intervalPrinter{g: g, unit: o.ipf.unit()}
	cl.OnInterval = ivs.print
}

// printPlacement prints where the client placed its streams, numbered as
// the report's rows: [  5], [  7] …
func printPlacement(g *globals, ps []place.Placement) {
	fmt.Fprint(g.stdout, "Streams placed on the server's RSS queues:")
	for _, p := range ps {
		fmt.Fprintf(g.stdout, "  [%d] port %d → q%d", bench.SocketNumber(iperf3.StreamID(p.Stream)), p.Port, p.Queue)
	}
	fmt.Fprintln(g.stdout)
}

// benchPlacer builds the client's stream placer from the --rss-* flags
// (nil when neither --rss-queues nor --rss-table is given).
func benchPlacer(key string, queues int, table string, addrsOnly bool) (*place.Placer, error) {
	if queues == 0 && table == "" {
		if key != "" || addrsOnly {
			return nil, usagef("--rss-key and --rss-addresses-only need --rss-queues or --rss-table")
		}
		return nil, nil
	}
	var indir []uint32
	switch {
	case queues != 0 && table != "":
		return nil, usagef("--rss-queues and --rss-table: give one")
	case queues != 0:
		t, err := rss.Equal(queues, 128)
		if err != nil {
			return nil, usagef("--rss-queues %d: %v", queues, err)
		}
		indir = t
	default:
		for _, f := range strings.Split(table, ",") {
			q, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
			if err != nil {
				return nil, usagef("--rss-table %q: entry %q is not a queue number", table, f)
			}
			indir = append(indir, uint32(q))
		}
	}
	var k []byte
	if key != "" {
		var err error
		if k, err = rss.ParseKey(key); err != nil {
			return nil, usagef("--rss-key: %v", err)
		}
	}
	p, err := rss.NewPredictor(rss.PredictorOptions{Key: k, Indirection: indir})
	if err != nil {
		return nil, usagef("--rss-*: %v", err)
	}
	return &place.Placer{Predictor: p, AddressesOnly: addrsOnly}, nil
}

// queueLog keeps the per-queue counts a data plane reports when a test's
// sockets close (possibly from another goroutine), for the report, and
// prints them.
type queueLog struct {
	mu    sync.Mutex
	qs    []plane.QueueCount
	print func([]plane.QueueCount)
}

func (l *queueLog) record(qs []plane.QueueCount) {
	l.mu.Lock()
	l.qs = qs
	l.mu.Unlock()
	l.print(qs)
}

// take returns the counts recorded since the last take.
func (l *queueLog) take() []plane.QueueCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	qs := l.qs
	l.qs = nil
	return qs
}

// printQueues returns the callback that prints an AF_XDP test's per-queue
// counts (nothing with --json).
func (g *globals) printQueues(iface string) func([]plane.QueueCount) {
	return func(qs []plane.QueueCount) {
		if g.json {
			return
		}
		fmt.Fprintf(g.stdout, "RX queues of %s (AF_XDP):", iface)
		for _, q := range qs {
			fmt.Fprintf(g.stdout, "  q%d %d pkts", q.Queue, q.Packets)
			if q.Dropped > 0 {
				fmt.Fprintf(g.stdout, " (%d dropped by the kernel)", q.Dropped)
			}
			if c := q.Coalesce; c != nil && c.Batches > 0 {
				fmt.Fprintf(g.stdout, " [%d batches of %.1f, %d wake-ups, delay p50 %.0f µs p99 %.0f µs max %.0f µs]",
					c.Batches, c.FramesPerBatch.Mean(), c.Wakeups, float64(c.Delay.Quantile(0.5))/1e3, float64(c.Delay.Quantile(0.99))/1e3, float64(c.Delay.Max)/1e3)
			}
		}
		fmt.Fprintln(g.stdout)
	}
}

// errInterrupted is a client's error when Ctrl-C (or SIGTERM) cut its
// test short.
var errInterrupted = errors.New("interrupted")

// failedJSON is iperf3 -J's report of a test that failed before its
// streams were set up: no figures, the error.
type failedJSON struct {
	Start struct {
		Connected    []bench.Connected `json:"connected"`
		Version      string            `json:"version"`
		ConnectingTo *bench.HostPort   `json:"connecting_to,omitempty"`
		Accepted     *bench.HostPort   `json:"accepted_connection,omitempty"`
	} `json:"start"`
	Intervals []bench.Interval `json:"intervals"`
	End       struct{}         `json:"end"`
	Error     string           `json:"error"`
}

// printBenchReport prints a finished test: JSON close to iperf3 -J, or the
// summary lines. A test that failed before it measured anything prints
// nothing in text (its error is the one line the user needs, and the
// caller prints it once on stderr) and, in JSON, what iperf3 -J prints
// then: empty start, intervals and end, and the error.
func printBenchReport(g *globals, r *bench.Report, err error, unit byte) {
	if r == nil {
		return
	}
	if g.json {
		if err != nil && len(r.Start.Connected) == 0 {
			f := failedJSON{Intervals: []bench.Interval{}, Error: r.Error}
			f.Start.Connected = []bench.Connected{}
			f.Start.Version = bench.Version
			f.Start.ConnectingTo, f.Start.Accepted = r.Start.ConnectingTo, r.Start.Accepted
			if f.Error == "" {
				f.Error = err.Error()
			}
			writeJSON(g.stdout, f)
			return
		}
		writeJSON(g.stdout, r)
		return
	}
	if err != nil && len(r.Intervals) == 0 && len(r.End.Streams) == 0 {
		return
	}
	fmt.Fprint(g.stdout, describeStack(r.Start.TCPStack))
	summary := *r
	summary.Intervals = nil
	summary.Error = "" // printed by the caller
	summary.WriteTextUnit(g.stdout, unit)
}

// intervalPrinter prints a running test's intervals under their header,
// which it prints before the first one of each test.
type intervalPrinter struct {
	g      *globals
	unit   byte
	mu     sync.Mutex
	header bool
}

func (p *intervalPrinter) print(iv bench.Interval) {
	s := iv.Sum
	if len(iv.Streams) == 1 {
		s = iv.Streams[0]
	}
	if fmt.Sprintf("%.2f", s.Start) == fmt.Sprintf("%.2f", s.End) {
		return // the last few ms after the last interval: "1.00-1.00 sec" says nothing
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.header {
		fmt.Fprint(p.g.stdout, iv.Header())
		p.header = true
	}
	bench.WriteIntervalUnit(p.g.stdout, iv, p.unit)
}

// reset makes the next interval start a new header (a new test).
func (p *intervalPrinter) reset() {
	p.mu.Lock()
	p.header = false
	p.mu.Unlock()
}

// iperfFlags are iperf3's flags that xdpio's bench takes too, or
// explains: -u (a client's UDP test; TCP is the default, as iperf3's),
// -f (the unit of bit rates) and --interval (iperf3's -i, which is the
// interface in xdpio).
type iperfFlags struct {
	udp      bool
	format   string
	interval float64
}

func (f *iperfFlags) add(c *cobra.Command) {
	c.Flags().BoolVarP(&f.udp, "udp", "u", false, "iperf3's UDP test instead of its TCP test (the default, as iperf3's); a server takes either, whatever its -u")
	c.Flags().StringVarP(&f.format, "format", "f", "", "unit of bit rates as iperf3's -f: k, m, g, t (Kbits … Tbits/sec) or K, M, G, T (KBytes … TBytes/sec); default: adaptive")
	c.Flags().Float64Var(&f.interval, "interval", 1, "seconds between periodic reports, 0 for none (iperf3's -i; in xdpio -i is the interface)")
}

// check validates the flags, and -i IFACE against iperf3's -i N: a number
// that names no interface is the interval the user meant.
func (f *iperfFlags) check(g *globals, iface string) error {
	if f.format != "" && (len(f.format) != 1 || !bench.ValidFormat(f.format[0]) || f.format == "a" || f.format == "A") {
		return usagef("-f %q: want one of k, m, g, t (bits/sec) or K, M, G, T (Bytes/sec), as iperf3's -f", f.format)
	}
	if !(f.interval == 0 || (f.interval >= 0.1 && f.interval <= 60)) {
		return usagef("--interval %v: want 0 (no periodic reports) or 0.1-60 seconds", f.interval)
	}
	if iface != "" {
		if _, err := strconv.ParseFloat(iface, 64); err == nil {
			var found bool
			g.inNetns(func() error {
				_, err := net.InterfaceByName(iface)
				found = err == nil
				return nil
			})
			if !found {
				return usagef("-i %s: no interface is named %q. In xdpio -i is the interface (--interface); iperf3's -i, the report interval, is --interval %s", iface, iface, iface)
			}
		}
	}
	return nil
}

// unit is the -f unit for bench.FormatRate ('a': adaptive bits).
func (f *iperfFlags) unit() byte {
	if f.format == "" {
		return 'a'
	}
	return f.format[0]
}

// period is --interval as bench.Client and bench.Server take it.
func (f *iperfFlags) period() time.Duration {
	if f.interval == 0 {
		return -1
	}
	return time.Duration(f.interval * float64(time.Second))
}

// parseRate reads a bit rate like iperf3's -b: a number with an optional
// k, M or G suffix (powers of 1000); 0 means unlimited.
func parseRate(s string) (uint64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "G"):
		mult, s = 1e9, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	// Written so that NaN fails too.
	if err != nil || !(v >= 0 && v*mult <= 1e12) {
		return 0, fmt.Errorf("want a rate such as 100M (0 for unlimited, at most 1000G)")
	}
	if v == 0 {
		return bench.BitrateUnlimited, nil
	}
	return uint64(v * mult), nil
}
