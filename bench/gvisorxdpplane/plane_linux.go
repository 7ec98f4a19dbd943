//go:build linux && (amd64 || arm64)

package gvisorxdpplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/qdisc/fifo"
	gvxdp "gvisor.dev/gvisor/pkg/tcpip/link/xdp"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	pkgxdp "gvisor.dev/gvisor/pkg/xdp"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xsk"
)

// Name is the stack's name in a test's report (plane.TCPStack.Name).
const Name = "gvisor-xdp"

// nicID is the stack's one NIC.
const nicID tcpip.NICID = 1

// queue is the one RX queue gVisor's endpoint binds.
const queue = 0

// Plane opens a gVisor stack on gVisor's AF_XDP endpoint per TCP test on
// Iface.
type Plane struct {
	// Iface is the interface the stacks run on; the tests' addresses
	// must be on it, and it must have one RX queue.
	Iface string
	// Do, if set, runs the stack's setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// NoRXChecksumOffload turns the endpoint's RX checksum offload off
	// (gVisor's Options.RXChecksumOffload, on by default as runsc's
	// --rx-checksum-offload): the stack then verifies every checksum, and
	// drops those a sender on this host left to its TX offload, so a veth
	// peer needs `ethtool -K DEV tx off`.
	NoRXChecksumOffload bool
	// NoQDisc has the stack write to the endpoint directly, one packet a
	// call, as netstack.Open's stack writes to its endpoint. By default
	// the endpoint is behind gVisor's FIFO queueing discipline, as runsc
	// runs it (--qdisc fifo, its default) and as the endpoint expects:
	// one dispatching goroutine per CPU, 1000 packets queued each, which
	// hand the endpoint up to 47 packets a call.
	NoQDisc bool
}

// Check tells whether Iface can carry the stack: it exists (in the
// namespace Do runs in), has one RX queue, and an MTU of at least
// gVisor's 1500.
func (p *Plane) Check() error {
	return link.Run(p.Do, func() error {
		_, err := p.check()
		return err
	})
}

func (p *Plane) check() (*net.Interface, error) {
	ifi, err := link.InterfaceByName(p.Iface)
	if err != nil {
		return nil, err
	}
	if ifi.MTU < gvxdp.MTU {
		return nil, fmt.Errorf("%w: %s's MTU is %d: gVisor's AF_XDP endpoint sends %d-byte packets (its MTU is a constant)", errs.ErrInvalidConfig, p.Iface, ifi.MTU, gvxdp.MTU)
	}
	n, err := nic.RXQueues(p.Iface)
	if err != nil {
		return nil, fmt.Errorf("RX queues of %s: %w", p.Iface, err)
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: %s has %d RX queues, and gVisor's AF_XDP endpoint takes frames from queue 0 only: the flows RSS puts on the others would reach the kernel, not the stack (an XDP program cannot redirect them into queue 0's socket). Give it one: xdpio channels set %s --rx 1, or --combined 1 where the device counts combined channels (ethtool -L); a veth's peer must then send on one TX queue too (--tx 1 there)",
			errs.ErrInvalidConfig, p.Iface, n, p.Iface)
	}
	return ifi, nil
}

// Listen opens a stack that shares local's address on Iface and takes
// the TCP to local's port but that of the control connection from ctl,
// whose address is the stack's one neighbour.
func (p *Plane) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) {
	local, ctl = unmap(local), unmap(ctl)
	expr := fmt.Sprintf("%s and tcp dst port %d and not (src host %s and src port %d)", dstHost(local.Addr()), local.Port(), ctl.Addr(), ctl.Port())
	var st *gstack
	var l *gonet.TCPListener
	err := link.Run(p.Do, func() (err error) {
		st, err = p.open(local.Addr(), ctl.Addr(), nil, func(st *gstack) (err error) {
			l, err = gonet.ListenTCP(st.s, tcpip.FullAddress{NIC: nicID, Addr: tcpAddr(local.Addr()), Port: local.Port()}, proto(local.Addr()))
			if err != nil {
				return fmt.Errorf("listen on TCP port %d: %w", local.Port(), err)
			}
			return nil
		}, expr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &listener{st: st, l: l}, nil
}

// Dialer opens a stack that shares local's address on Iface and takes
// the replies from server to its own ports; server is its one neighbour.
func (p *Plane) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	local, server = unmap(local), unmap(server)
	var st *gstack
	err := link.Run(p.Do, func() error {
		ports, err := ownPorts()
		if err != nil {
			return err
		}
		expr := fmt.Sprintf("%s and tcp and src host %s and src port %d and dst portrange %d-%d", dstHost(local.Addr()), server.Addr(), server.Port(), ports[0], ports[1])
		st, err = p.open(local.Addr(), server.Addr(), &ports, nil, expr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &dialer{st: st, server: server}, nil
}

// gstack is one test's gVisor stack on gVisor's endpoint, with the socket
// and xdpio's program that feeds it.
type gstack struct {
	s  *stack.Stack
	ep stack.LinkEndpoint
	// qdisc is gVisor's FIFO between the stack and ep (nil: none).
	qdisc stack.QueueingDiscipline
	// tx counts what ep's WritePackets took and dropped.
	tx   *counted
	fd   int // the AF_XDP socket, ours: the endpoint only uses it
	prog *xsk.Program
	desc plane.TCPStack

	attached bool          // the NIC exists: the endpoint's receive loop runs
	done     chan struct{} // closed when the receive loop ended
	linkErr  atomic.Pointer[string]
	closed   atomic.Bool
	once     sync.Once
	closeErr error
}

// open builds a test's stack on Iface (in the calling thread's
// namespace): gVisor's endpoint on a new AF_XDP socket bound to queue 0,
// the stack with addr (and its prefix length on Iface) and peer as its
// neighbour, ports as its own port range when set; then before (the
// server's listener), then xdpio's program redirecting expr's frames of
// queue 0 to the socket.
func (p *Plane) open(addr, peer netip.Addr, ports *[2]uint16, before func(*gstack) error, expr string) (_ *gstack, err error) {
	ifi, err := p.check()
	if err != nil {
		return nil, err
	}
	pfx, err := prefixOn(ifi, addr)
	if err != nil {
		return nil, err
	}
	peerMAC, err := neighbour(ifi, peer)
	if err != nil {
		return nil, err
	}
	st := &gstack{fd: -1, done: make(chan struct{}),
		desc: plane.TCPStack{Name: Name, Interface: p.Iface, Queues: []int{queue}, RXChecksumOffload: !p.NoRXChecksumOffload, QDisc: "fifo"}}
	if p.NoQDisc {
		st.desc.QDisc = "none"
	}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("AF_XDP socket: %w", err)
	}
	// gVisor's New maps the UMEM and the rings and, with Options.Bind,
	// binds the socket too; but a failed bind (queue 0 taken) would leave
	// its mappings in place, unreachable, and the socket with them. So
	// the socket is bound here, just after, with gVisor's own Bind and the
	// same flags New's would use (no XDP_USE_NEED_WAKEUP), as runsc binds
	// it when it passes Bind false.
	st.ep, err = gvxdp.New(&gvxdp.Options{
		FD:                st.fd,
		Address:           tcpip.LinkAddress(ifi.HardwareAddr),
		InterfaceIndex:    ifi.Index,
		RXChecksumOffload: !p.NoRXChecksumOffload,
		ClosedFunc:        st.linkClosed,
	})
	if err != nil {
		return nil, fmt.Errorf("gVisor's AF_XDP endpoint on %s: %w", p.Iface, err)
	}
	if err := bind(st.fd, ifi.Index); err != nil {
		return nil, fmt.Errorf("bind the AF_XDP socket to %s queue %d: %w", p.Iface, queue, err)
	}
	st.s = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
	})
	if ports != nil {
		if e := st.s.SetPortRange(ports[0], ports[1]); e != nil {
			return nil, fmt.Errorf("the stack's ports %d-%d: %s", ports[0], ports[1], e)
		}
	}
	// netstack.Open's TCP options.
	sack := tcpip.TCPSACKEnabled(true)
	st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	cc := tcpip.CongestionControlOption("cubic")
	st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &cc)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	st.tx = &counted{LinkEndpoint: st.ep}
	var opts stack.NICOptions
	if !p.NoQDisc {
		// runsc's: fifo.New(linkEP, runtime.GOMAXPROCS(0), 1000).
		st.qdisc = fifo.New(st.tx, runtime.GOMAXPROCS(0), 1000)
		opts.QDisc = st.qdisc
	}
	if e := st.s.CreateNICWithOptions(nicID, st.tx, opts); e != nil {
		return nil, fmt.Errorf("create the stack's NIC: %s", e)
	}
	st.attached = true
	pa := tcpip.ProtocolAddress{Protocol: proto(addr), AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpAddr(addr), PrefixLen: pfx.Bits()}}
	if e := st.s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); e != nil {
		return nil, fmt.Errorf("add %v to the stack: %s", pfx, e)
	}
	// Everything through the interface, on link: the one neighbour's entry
	// holds the next hop's MAC, a gateway's when the peer is not on link.
	var routes []tcpip.Route
	for _, n := range []int{4, 16} {
		any := tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(make([]byte, n))}
		routes = append(routes, tcpip.Route{Destination: any.Subnet(), NIC: nicID})
	}
	st.s.SetRouteTable(routes)
	if e := st.s.AddStaticNeighbor(nicID, proto(peer), tcpAddr(peer), tcpip.LinkAddress(peerMAC)); e != nil {
		return nil, fmt.Errorf("the stack's neighbour %v: %s", peer, e)
	}
	if before != nil {
		if err := before(st); err != nil {
			return nil, err
		}
	}
	if st.prog, err = xsk.NewProgram(ifi.Index, xsk.ProgramConfig{Expr: expr}); err != nil {
		return nil, err
	}
	if err := st.prog.RegisterFD(queue, st.fd); err != nil {
		return nil, err
	}
	return st, nil
}

// bind binds fd to queue 0 of the interface with gVisor's Bind, retrying
// for up to a second on EBUSY, as package xsk does: right after a socket
// on the queue was freed (the previous test's), the kernel may still be
// tearing it down.
func bind(fd, ifindex int) error {
	deadline := time.Now().Add(time.Second)
	for delay := time.Millisecond; ; delay *= 2 {
		err := pkgxdp.Bind(fd, uint32(ifindex), queue, false)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			if errors.Is(err, unix.EBUSY) {
				err = fmt.Errorf("another AF_XDP socket is bound to it: %w", err)
			}
			return err
		}
		time.Sleep(min(delay, 100*time.Millisecond))
	}
}

// linkClosed is the endpoint's ClosedFunc: its receive loop ended, with
// err when it failed.
func (st *gstack) linkClosed(err tcpip.Error) {
	if err != nil && !st.closed.Load() {
		s := err.String()
		st.linkErr.Store(&s)
	}
	close(st.done)
}

// close closes the stack, detaches the program and frees the endpoint
// (see "Closing" in the package documentation). It may be called more
// than once.
func (st *gstack) close() error {
	st.once.Do(func() {
		st.closed.Store(true)
		if st.s != nil {
			// Resets the connections. Not Wait: it removes the NIC,
			// which deadlocks in the endpoint's Attach(nil).
			st.s.Close()
		}
		if st.qdisc != nil {
			// Its goroutines end; the NIC, which would close it, stays.
			st.qdisc.Close()
		}
		var errs []error
		if st.prog != nil {
			errs = append(errs, st.prog.Close())
		}
		if st.ep != nil {
			errs = append(errs, release(st.ep, st.fd, st.attached, st.done))
		} else if st.fd >= 0 {
			errs = append(errs, unix.Close(st.fd))
		}
		st.closeErr = errors.Join(errs...)
	})
	return st.closeErr
}

// describe returns the stack's settings and counters.
func (st *gstack) describe() plane.TCPStack {
	d := st.desc
	t := st.s.Stats().TCP
	c := &plane.TCPStackCounters{ActiveOpens: t.ActiveConnectionOpenings.Value(), PassiveOpens: t.PassiveConnectionOpenings.Value(),
		EstabResets: t.EstablishedResets.Value(), InSegs: t.ValidSegmentsReceived.Value() + t.InvalidSegmentsReceived.Value(),
		OutSegs: t.SegmentsSent.Value(), InErrs: t.InvalidSegmentsReceived.Value(), RetransSegs: t.Retransmits.Value(),
		FastRetrans: t.FastRetransmit.Value(), Timeouts: t.Timeouts.Value()}
	if n, ok := st.s.NICInfo()[nicID]; ok {
		// Every packet is one frame, there being no GSO. The NIC counts
		// what the endpoint delivered, and what the stack wrote: into
		// the FIFO (its drops when full), or to the endpoint directly
		// (its drops when its TX ring or UMEM is full, which the FIFO
		// does not count: tx does).
		ns := n.Stats
		c.RXFrames = ns.Rx.Packets.Value()
		full := ns.TxPacketsDroppedNoBufferSpace.Value()
		c.TXPackets = ns.Tx.Packets.Value() + full
		c.TXFrames = st.tx.sent.Load()
		c.TXDropped = st.tx.dropped.Load()
		if st.qdisc != nil {
			c.TXDropped += full
		}
	}
	d.Counters = c
	return d
}

// err is the endpoint's failure, if its receive loop ended on one.
func (st *gstack) err() error {
	if s := st.linkErr.Load(); s != nil {
		return fmt.Errorf("gVisor's AF_XDP endpoint stopped receiving: %s", *s)
	}
	return nil
}

// counted is gVisor's endpoint with a count of the packets its
// WritePackets took (put on the TX ring) and dropped (no room: it takes a
// batch whole or not at all).
type counted struct {
	stack.LinkEndpoint
	sent, dropped atomic.Uint64
}

func (c *counted) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n, err := c.LinkEndpoint.WritePackets(pkts)
	c.sent.Add(uint64(n))
	if m := pkts.Len() - n; m > 0 {
		c.dropped.Add(uint64(m))
	}
	return n, err
}

// neighbour returns the MAC address of the next hop to peer as the
// kernel resolved it (it has, for the test's control connection).
func neighbour(ifi *net.Interface, peer netip.Addr) (net.HardwareAddr, error) {
	r, err := nexthop.New(ifi.Index, nexthop.Options{})
	if err != nil {
		return nil, fmt.Errorf("neighbours of %s: %w", ifi.Name, err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), nexthop.DefaultResolveTimeout)
	defer cancel()
	h, err := r.Resolve(ctx, peer)
	if err != nil {
		return nil, fmt.Errorf("the next hop to %v: %w", peer, err)
	}
	return h.MAC, nil
}

// prefixOn returns addr with its prefix length on the interface.
func prefixOn(ifi *net.Interface, addr netip.Addr) (netip.Prefix, error) {
	as, err := ifi.Addrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				bits, _ := n.Mask.Size()
				return netip.PrefixFrom(addr, bits), nil
			}
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: the test's address %v is not on %s, which the gvisor-xdp backend binds (its TCP runs on that interface's address only)", errs.ErrInvalidConfig, addr, ifi.Name)
}

// ownPorts is the range of a client stack's own ports: above the
// kernel's ephemeral range (net.ipv4.ip_local_port_range of the calling
// thread's namespace), as netstackplane's.
func ownPorts() ([2]uint16, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return [2]uint16{}, fmt.Errorf("the kernel's ephemeral ports: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return [2]uint16{}, fmt.Errorf("the kernel's ephemeral ports: %q", b)
	}
	hi, err := strconv.ParseUint(f[1], 10, 16)
	if err != nil || hi >= 65535 {
		return [2]uint16{}, fmt.Errorf("the kernel's ephemeral ports (%q) leave none above them to the stack: narrow net.ipv4.ip_local_port_range", b)
	}
	return [2]uint16{uint16(hi) + 1, 65535}, nil
}

// dstHost is the tcpdump expression of frames to a.
func dstHost(a netip.Addr) string {
	if a.Is4() {
		return "ip dst host " + a.String()
	}
	return "ip6 dst host " + a.String()
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

func tcpAddr(a netip.Addr) tcpip.Address { return tcpip.AddrFromSlice(a.AsSlice()) }

func proto(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}

type listener struct {
	st *gstack
	l  *gonet.TCPListener
}

func (l *listener) Accept() (plane.TCPConn, error) {
	c, err := l.l.Accept()
	if err != nil {
		if e := l.st.err(); e != nil {
			return nil, errors.Join(err, e)
		}
		return nil, err
	}
	return l.st.conn(c), nil
}

func (l *listener) Stack() plane.TCPStack { return l.st.describe() }

func (l *listener) Close() error {
	l.l.Close()
	return l.st.close()
}

type dialer struct {
	st     *gstack
	server netip.AddrPort
}

func (d *dialer) Dial(ctx context.Context) (plane.TCPConn, error) {
	if d.st.closed.Load() {
		return nil, fmt.Errorf("dial tcp %v: %w", d.server, errs.ErrClosed)
	}
	c, err := gonet.DialContextTCP(ctx, d.st.s, tcpip.FullAddress{NIC: nicID, Addr: tcpAddr(d.server.Addr()), Port: d.server.Port()}, proto(d.server.Addr()))
	if err != nil {
		if e := d.st.err(); e != nil {
			err = errors.Join(err, e)
		}
		return nil, fmt.Errorf("dial tcp %v: %w", d.server, err)
	}
	return d.st.conn(c), nil
}

func (d *dialer) Stack() plane.TCPStack { return d.st.describe() }

func (d *dialer) Close() error { return d.st.close() }

func (st *gstack) conn(c net.Conn) plane.TCPConn { return &conn{Conn: c, st: st} }

// conn is a gVisor connection (gonet's) with its figures from the
// stack's TCP endpoint.
type conn struct {
	net.Conn
	st  *gstack
	ccn string
	cco sync.Once
}

// errGone: the connection has left the stack (closed), or the stack is
// closed.
var errGone = fmt.Errorf("tcp info: the connection is closed: %w", errs.ErrClosed)

// endpoint finds the connection's TCP endpoint in the stack by its
// addresses.
func (c *conn) endpoint() (*tcp.Endpoint, error) {
	if c.st.closed.Load() {
		return nil, errGone
	}
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok || local == nil || remote == nil {
		return nil, errGone // gonet has no addresses for a closed connection
	}
	l, r := local.AddrPort(), remote.AddrPort()
	la, ra := l.Addr().Unmap(), r.Addr().Unmap()
	id := stack.TransportEndpointID{LocalPort: l.Port(), LocalAddress: tcpAddr(la), RemotePort: r.Port(), RemoteAddress: tcpAddr(ra)}
	ep, ok := c.st.s.FindTransportEndpoint(proto(la), tcp.ProtocolNumber, id, nicID).(*tcp.Endpoint)
	if !ok {
		return nil, errGone
	}
	return ep, nil
}

func (c *conn) Info() (plane.TCPInfo, error) {
	ep, err := c.endpoint()
	if err != nil {
		return plane.TCPInfo{}, err
	}
	var ti tcpip.TCPInfoOption
	if e := ep.GetSockOpt(&ti); e != nil {
		return plane.TCPInfo{}, fmt.Errorf("tcp info: %s", e)
	}
	hdr := header.IPv4MinimumSize
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.AddrPort().Addr().Unmap().Is6() {
		hdr = header.IPv6MinimumSize
	}
	mss := uint64(gvxdp.MTU - hdr - header.TCPMinimumSize)
	var retrans uint64
	if s, ok := ep.Stats().(*tcp.Stats); ok {
		retrans = s.SendErrors.Retransmits.Value()
	}
	// gVisor does not tell the peer's window: SndWnd stays 0.
	return plane.TCPInfo{Retransmits: retrans, SndCwnd: uint64(ti.SndCwnd) * mss, RTT: ti.RTT, RTTVar: ti.RTTVar, PMTU: gvxdp.MTU}, nil
}

// Finish shuts the sending down and polls the connection's state every
// millisecond until its FIN is acknowledged: FIN-WAIT2, TIME-WAIT, or
// CLOSED (or gone from the stack).
func (c *conn) Finish(ctx context.Context) error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("finish: %T cannot close its sending alone", c.Conn)
	}
	if err := cw.CloseWrite(); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		ep, err := c.endpoint()
		if err != nil {
			return nil // gone from the stack: closed
		}
		var ti tcpip.TCPInfoOption
		ep.GetSockOpt(&ti)
		switch s := tcp.EndpointState(ti.State); s {
		case tcp.StateFinWait2, tcp.StateTimeWait, tcp.StateClose:
			return nil
		default:
			select {
			case <-ctx.Done():
				// As netstackplane says it: the state and why the data
				// may still be in flight (retransmission backoff).
				why := fmt.Sprintf("%s; RTO %v, cwnd %d", s, ti.RTO, ti.SndCwnd)
				if e := c.st.err(); e != nil {
					return fmt.Errorf("finish: the peer has not acknowledged the FIN (%s): %w", why, e)
				}
				return fmt.Errorf("finish: the peer has not acknowledged the FIN (%s): %w", why, ctx.Err())
			case <-t.C:
			}
		}
	}
}

func (c *conn) Congestion() string {
	c.cco.Do(func() {
		if ep, err := c.endpoint(); err == nil {
			var cc tcpip.CongestionControlOption
			if ep.GetSockOpt(&cc) == nil {
				c.ccn = string(cc)
			}
		}
	})
	return c.ccn
}
