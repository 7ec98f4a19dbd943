package netstackplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/netstack"
)

// Plane opens a netstack per TCP test on Iface.
type Plane struct {
	// Iface is the interface the stacks run on; the tests' addresses
	// must be on it.
	Iface string
	// Do, if set, runs the stack's setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// Config is the stacks' settings: Queues, FramesPerQueue, Bind,
	// Attach, MTU, NoTSO, NoRXChecksumOffload, Coalesce and TXCoalesce
	// as given; Addrs and Share are each test's, and
	// AcceptPartialChecksum follows the RX checksum offload (see the
	// package documentation).
	Config netstack.Config
}

// Listen opens a stack that shares local's address on Iface and takes
// the TCP to local's port but that of the control connection from ctl.
func (p *Plane) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) {
	local, ctl = unmap(local), unmap(ctl)
	expr := fmt.Sprintf("tcp dst port %d and not (src host %s and src port %d)", local.Port(), ctl.Addr(), ctl.Port())
	var st *netstack.Stack
	var l net.Listener
	err := link.Run(p.Do, func() (err error) {
		if st, err = p.open(local.Addr(), &netstack.Share{Expr: expr}); err != nil {
			return err
		}
		if l, err = st.ListenTCP(local.Port()); err != nil {
			st.Close()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &listener{stack: p.stack(st), l: l}, nil
}

// Dialer opens a stack that shares local's address on Iface and takes
// the replies from server to its own ports.
func (p *Plane) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	local, server = unmap(local), unmap(server)
	var st *netstack.Stack
	err := link.Run(p.Do, func() error {
		ports, err := ownPorts()
		if err != nil {
			return err
		}
		expr := fmt.Sprintf("tcp and src host %s and src port %d and dst portrange %d-%d", server.Addr(), server.Port(), ports[0], ports[1])
		st, err = p.open(local.Addr(), &netstack.Share{Expr: expr, Ports: ports})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &dialer{stack: p.stack(st), server: server}, nil
}

// open opens a stack on Iface that shares addr (with its prefix length
// there), from the calling thread's namespace.
func (p *Plane) open(addr netip.Addr, share *netstack.Share) (*netstack.Stack, error) {
	pfx, err := prefixOn(p.Iface, addr)
	if err != nil {
		return nil, err
	}
	cfg := p.Config
	cfg.Addrs, cfg.Share = []netip.Prefix{pfx}, share
	cfg.AcceptPartialChecksum = !cfg.NoRXChecksumOffload
	st, err := netstack.Open(p.Iface, cfg)
	if err != nil {
		return nil, fmt.Errorf("netstack on %s: %w", p.Iface, err)
	}
	return st, nil
}

// prefixOn returns addr with its prefix length on the interface.
func prefixOn(iface string, addr netip.Addr) (netip.Prefix, error) {
	ifi, err := link.InterfaceByName(iface)
	if err != nil {
		return netip.Prefix{}, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
			bits, _ := n.Mask.Size()
			return netip.PrefixFrom(addr, bits), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("the test's address %v is not on %s, which the xsk backend binds (its TCP runs on that interface's address only): %w", addr, iface, netstack.ErrInvalidConfig)
}

// ownPorts is the range of the client stack's own ports: above the
// kernel's ephemeral range (net.ipv4.ip_local_port_range of the calling
// thread's namespace), as netstack.Share.Ports' default.
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

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

// stack is one test's netstack and its description.
type stack struct {
	st   *netstack.Stack
	desc plane.TCPStack
	once sync.Once
}

func (p *Plane) stack(st *netstack.Stack) *stack {
	c := p.Config
	return &stack{st: st, desc: plane.TCPStack{Name: "netstack", Interface: p.Iface, Queues: st.Endpoint().Info().Queues,
		TSO: !c.NoTSO, RXChecksumOffload: !c.NoRXChecksumOffload, GRO: !c.NoGRO && !c.NoRXChecksumOffload, RXCoalesce: c.Coalesce, TXCoalesce: c.TXCoalesce}}
}

// describe returns the stack's settings and counters.
func (s *stack) describe() plane.TCPStack {
	d := s.desc
	t, e := s.st.TCPStats(), s.st.Endpoint().Stats()
	var dropped uint64
	for _, k := range e.Sockets {
		dropped += k.RXDropped + k.RXRingFull
	}
	d.Counters = &plane.TCPStackCounters{ActiveOpens: t.ActiveOpens, PassiveOpens: t.PassiveOpens, EstabResets: t.EstabResets,
		InSegs: t.InSegs, OutSegs: t.OutSegs, InErrs: t.InErrs, RetransSegs: t.RetransSegs, FastRetrans: t.FastRetrans, Timeouts: t.Timeouts,
		RXFrames: e.RXFrames, RXPackets: e.RXPackets, RXBatches: e.RXBatches, RXSocketDropped: dropped, TXFrames: e.TXFrames, TXSegmented: e.TXSegmented, RXBadChecksum: e.RXBadChecksum,
		RXPartialChecksum: e.RXPartialChecksum, TXPackets: e.TXPackets, TXDropped: e.TXDropped, TXNoNeighbour: e.TXNoNeighbour, TXErrors: e.TXErrors}
	return d
}

func (s *stack) close() error {
	var err error
	s.once.Do(func() { err = s.st.Close() })
	return err
}

func (s *stack) conn(c net.Conn) plane.TCPConn { return &conn{Conn: c, st: s.st} }

type listener struct {
	stack *stack
	l     net.Listener
}

func (l *listener) Accept() (plane.TCPConn, error) {
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	return l.stack.conn(c), nil
}

func (l *listener) Stack() plane.TCPStack { return l.stack.describe() }

func (l *listener) Close() error {
	l.l.Close()
	return l.stack.close()
}

type dialer struct {
	stack  *stack
	server netip.AddrPort
}

func (d *dialer) Dial(ctx context.Context) (plane.TCPConn, error) {
	c, err := d.stack.st.DialTCP(ctx, d.server)
	if err != nil {
		return nil, err
	}
	return d.stack.conn(c), nil
}

func (d *dialer) Stack() plane.TCPStack { return d.stack.describe() }

func (d *dialer) Close() error { return d.stack.close() }

// conn is a gVisor connection (gonet's) with its figures from
// netstack.Stack.TCPConnInfo.
type conn struct {
	net.Conn
	st  *netstack.Stack
	ccn string
	cco sync.Once
}

func (c *conn) Info() (plane.TCPInfo, error) {
	i, err := c.st.TCPConnInfo(c.Conn)
	if err != nil {
		return plane.TCPInfo{}, err
	}
	hdr := 40
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.AddrPort().Addr().Unmap().Is6() {
		hdr = 60
	}
	// gVisor does not tell the peer's window: SndWnd stays 0.
	return plane.TCPInfo{Retransmits: i.Retransmits, SndCwnd: uint64(i.SndCwnd) * uint64(i.MSS), RTT: i.RTT, RTTVar: i.RTTVar,
		PMTU: i.MSS + hdr}, nil
}

// Finish shuts the sending down and polls the connection's state every
// millisecond until its FIN is acknowledged: FIN-WAIT2, TIME-WAIT, or
// CLOSED (after LAST-ACK, when the peer had closed first, or gone).
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
		i, err := c.st.TCPConnInfo(c.Conn)
		switch {
		case errors.Is(err, netstack.ErrClosed):
			return nil // gone from the stack: closed
		case err != nil:
			return fmt.Errorf("finish: %w", err)
		case i.State == "FIN-WAIT2" || i.State == "TIME-WAIT" || i.State == "CLOSED":
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("finish: the peer has not acknowledged the FIN (%s; RTO %v, cwnd %d, %d timeouts, %d retransmitted): %w",
				i.State, i.RTO, i.SndCwnd, i.Timeouts, i.Retransmits, ctx.Err())
		case <-t.C:
		}
	}
}

func (c *conn) Congestion() string {
	c.cco.Do(func() {
		if i, err := c.st.TCPConnInfo(c.Conn); err == nil {
			c.ccn = i.Congestion
		}
	})
	return c.ccn
}
