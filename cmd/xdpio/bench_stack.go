package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/bench/gvisorxdpplane"
	"github.com/xdpio/xdpio/bench/netstackplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/netstack"
	"github.com/xdpio/xdpio/xsk"
)

// stackFlags are the xsk backend's settings: its RX queues and software
// coalescing (a UDP test's xdpnet sockets at a server, and a TCP test's
// netstack), and the netstack's offloads.
type stackFlags struct {
	queues   string
	rxUsecs  int
	rxFrames int
	adaptive bool
	txUsecs  int
	txFrames int
	tso      string
	rxCsum   string
	gro      string
	qdisc    string
}

func (f *stackFlags) add(c *cobra.Command, udpToo string) {
	c.Flags().StringVar(&f.queues, "queues", "all", "RX queues the xsk backend binds: all, or a list such as 0,2-3 (traffic RSS steers to other queues stays with the kernel)")
	c.Flags().IntVar(&f.rxUsecs, "rx-usecs", 0, "software RX coalescing per queue"+udpToo+": hand a batch over at most this many µs after its first frame (like ethtool -C rx-usecs)")
	c.Flags().IntVar(&f.rxFrames, "rx-frames", 0, "software RX coalescing: hand a batch over once it holds this many frames (0: the batch size)")
	c.Flags().BoolVar(&f.adaptive, "adaptive", false, "adaptive RX coalescing: pick rx-usecs/rx-frames from the measured rate (bounded by --rx-usecs, default 64)")
	c.Flags().IntVar(&f.txUsecs, "tx-usecs", 0, "software TX coalescing per queue of a TCP test's netstack: kick the kernel at most this many µs after a frame was queued (like ethtool -C tx-usecs)")
	c.Flags().IntVar(&f.txFrames, "tx-frames", 0, "software TX coalescing of a TCP test's netstack: kick the kernel once this many frames are queued (0: the batch size)")
	c.Flags().StringVar(&f.tso, "tso", "on", "a TCP test's netstack: on hands the link segments of up to 64 KiB, cut in software (TSO); off has the stack cut them to the MSS, which recovers from lost frames far faster (see netstack.Config.NoTSO)")
	c.Flags().StringVar(&f.gro, "gro", "on", "a TCP test's netstack: on merges the in-order segments of a flow that one receive batch holds before the stack sees them (GRO; needs --rx-csum on); off hands it every segment")
	c.Flags().StringVar(&f.qdisc, "qdisc", "fifo", "the gvisor-xdp backend: gVisor's queueing discipline between its stack and its AF_XDP endpoint: fifo (gVisor's, runsc's default: batches of up to 47 packets a write) or none (the stack writes each packet itself, as netstack's does)")
	c.Flags().StringVar(&f.rxCsum, "rx-csum", "on", "a TCP test's netstack: on verifies received checksums once in the link (RX checksum offload, accepting those a sender on this host left to its TX offload); off has the stack verify them (a veth peer then needs ethtool -K DEV tx off)")
}

// rxCoalescing reports whether RX coalescing was asked for.
func (f *stackFlags) rxCoalescing(fs *pflag.FlagSet) bool {
	return fs.Changed("rx-usecs") || fs.Changed("rx-frames") || f.adaptive
}

// txCoalescing reports whether TX coalescing was asked for.
func (f *stackFlags) txCoalescing(fs *pflag.FlagSet) bool {
	return fs.Changed("tx-usecs") || fs.Changed("tx-frames")
}

// changed names the flags among names that were given, for a usage
// error.
func changed(fs *pflag.FlagSet, names ...string) []string {
	var g []string
	for _, n := range names {
		if fs.Changed(n) {
			g = append(g, "--"+n)
		}
	}
	return g
}

// stackSettings are the checked flags.
type stackSettings struct {
	queues []int // nil: all
	rx     *coalesce.Params
	tx     *coalesce.TXParams
	noTSO  bool
	noCsum bool
	noGRO  bool
}

// parse checks the flags.
func (f *stackFlags) parse(fs *pflag.FlagSet) (stackSettings, error) {
	var s stackSettings
	if f.queues != "all" {
		q, err := parseQueueList(f.queues)
		if err != nil || len(q) == 0 {
			return s, usagef("--queues %q: want all or a list such as 0,2-3 (%v)", f.queues, err)
		}
		s.queues = q
	}
	if f.rxCoalescing(fs) {
		if f.rxUsecs < 0 || f.rxUsecs > coalesce.MaxUsecs || f.rxFrames < 0 {
			return s, usagef("--rx-usecs 0-%d and --rx-frames ≥ 0", coalesce.MaxUsecs)
		}
		s.rx = &coalesce.Params{RXUsecs: f.rxUsecs, RXFrames: f.rxFrames, Adaptive: f.adaptive}
	}
	if f.txCoalescing(fs) {
		if f.txUsecs < 0 || f.txUsecs > coalesce.MaxUsecs || f.txFrames < 0 {
			return s, usagef("--tx-usecs 0-%d and --tx-frames ≥ 0", coalesce.MaxUsecs)
		}
		s.tx = &coalesce.TXParams{TXUsecs: f.txUsecs, TXFrames: f.txFrames}
	}
	for _, o := range []struct {
		name, v string
		off     *bool
	}{{"tso", f.tso, &s.noTSO}, {"rx-csum", f.rxCsum, &s.noCsum}, {"gro", f.gro, &s.noGRO}} {
		switch o.v {
		case "on":
		case "off":
			*o.off = true
		default:
			return s, usagef("--%s %q: want on or off", o.name, o.v)
		}
	}
	return s, nil
}

// tcpPlane is the xsk backend's TCP: a netstack per test on iface.
func (s stackSettings) tcpPlane(g *globals, iface string) *netstackplane.Plane {
	return &netstackplane.Plane{Iface: iface, Do: g.inNetns, Config: netstack.Config{Queues: s.queues,
		NoTSO: s.noTSO, NoRXChecksumOffload: s.noCsum, NoGRO: s.noGRO, Coalesce: s.rx, TXCoalesce: s.tx}}
}

// noTCP is the TCP plane of a backend without a TCP stack: it refuses
// TCP tests.
type noTCP struct{ backend string }

func (n noTCP) err() error {
	return fmt.Errorf("the %s backend has no TCP stack (TCP tests run on the xsk or socket backend): %w", n.backend, xsk.ErrNotSupported)
}

func (n noTCP) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) { return nil, n.err() }
func (n noTCP) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	return nil, n.err()
}

// describeStack is the text line that says which TCP stack a test's data
// connections ran on, with which settings.
func describeStack(s *plane.TCPStack) string {
	if s == nil {
		return ""
	}
	onOff := map[bool]string{true: "on", false: "off"}
	switch s.Name {
	case "netstack":
	case gvisorxdpplane.Name:
		return fmt.Sprintf("TCP stack: gVisor's on gVisor's AF_XDP endpoint (gvisor-xdp) on %s, queue %s: no TSO (GSO), RX checksum offload %s, qdisc %s, no coalescing\n",
			s.Interface, xsk.FormatQueues(s.Queues), onOff[s.RXChecksumOffload], s.QDisc)
	default:
		return "TCP stack: the kernel's\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "TCP stack: netstack on %s, queues %s: TSO %s, RX checksum offload %s, GRO %s", s.Interface, xsk.FormatQueues(s.Queues), onOff[s.TSO], onOff[s.RXChecksumOffload], onOff[s.GRO])
	if c := s.RXCoalesce; c != nil {
		fmt.Fprintf(&b, ", RX coalescing rx-usecs %d rx-frames %d", c.RXUsecs, c.RXFrames)
		if c.Adaptive {
			b.WriteString(" adaptive")
		}
	} else {
		b.WriteString(", RX coalescing off")
	}
	if c := s.TXCoalesce; c != nil {
		fmt.Fprintf(&b, ", TX coalescing tx-usecs %d tx-frames %d", c.TXUsecs, c.TXFrames)
	} else {
		b.WriteString(", TX coalescing off")
	}
	b.WriteString("\n")
	return b.String()
}
