//go:build linux

package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// nicID is the stack's one NIC.
const nicID tcpip.NICID = 1

// Stack is a gVisor TCP/IP stack whose one NIC is an Endpoint: TCP and UDP
// for Go programs through net.Listener and net.Conn (gVisor's gonet).
type Stack struct {
	s      *stack.Stack
	ep     *Endpoint
	closed atomic.Bool
}

// Open builds a stack on ifname (in the calling thread's network
// namespace) that answers for cfg.Addrs: an Endpoint on every RX queue,
// IPv4, IPv6, ARP, ICMP, TCP (SACK, CUBIC, receive buffer auto-tuning) and
// UDP, routes to Addrs' networks on the interface and through the
// gateways.
func Open(ifname string, cfg Config) (_ *Stack, err error) {
	ep, err := NewEndpoint(ifname, cfg)
	if err != nil {
		return nil, err
	}
	nets := []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol}
	if cfg.Share == nil {
		nets = append(nets, arp.NewProtocol) // the kernel answers for shared addresses
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   nets,
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
	})
	st := &Stack{s: s, ep: ep}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if cfg.Share != nil {
		if e := s.SetPortRange(ep.ports[0], ep.ports[1]); e != nil {
			return nil, fmt.Errorf("the stack's ports %d-%d: %s", ep.ports[0], ep.ports[1], e)
		}
	}
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	cc := tcpip.CongestionControlOption("cubic")
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &cc)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	if e := s.CreateNIC(nicID, ep); e != nil {
		return nil, fmt.Errorf("create the stack's NIC: %s", e)
	}
	var routes []tcpip.Route
	for _, p := range cfg.Addrs {
		proto := ipv4.ProtocolNumber
		if p.Addr().Is6() {
			proto = ipv6.ProtocolNumber
		}
		pa := tcpip.ProtocolAddress{Protocol: proto, AddressWithPrefix: tcpip.AddressWithPrefix{
			Address: tcpip.AddrFromSlice(p.Addr().AsSlice()), PrefixLen: p.Bits()}}
		if e := s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); e != nil {
			return nil, fmt.Errorf("add %v to the stack: %s", p, e)
		}
		routes = append(routes, tcpip.Route{Destination: pa.AddressWithPrefix.Subnet(), NIC: nicID})
	}
	for _, g := range []netip.Addr{cfg.Gateway4, cfg.Gateway6} {
		if !g.IsValid() {
			continue
		}
		any := tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(make([]byte, g.BitLen()/8)), PrefixLen: 0}
		routes = append(routes, tcpip.Route{Destination: any.Subnet(), Gateway: tcpip.AddrFromSlice(g.AsSlice()), NIC: nicID})
	}
	if cfg.Share != nil {
		// Everything through the interface: the kernel's route and
		// neighbour tables pick each frame's next hop (Endpoint.AddHeader).
		for _, n := range []int{4, 16} {
			any := tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(make([]byte, n)), PrefixLen: 0}
			routes = append(routes, tcpip.Route{Destination: any.Subnet(), NIC: nicID})
		}
	}
	s.SetRouteTable(routes)
	return st, nil
}

// Stack returns the gVisor stack, for what the methods here do not cover.
func (st *Stack) Stack() *stack.Stack { return st.s }

// TCPStats returns the stack's TCP counters, for every connection since
// Open. It may be called from any goroutine, also after Close.
func (st *Stack) TCPStats() TCPStats {
	t := st.s.Stats().TCP
	return TCPStats{
		ActiveOpens: t.ActiveConnectionOpenings.Value(), PassiveOpens: t.PassiveConnectionOpenings.Value(),
		CurrEstab: t.CurrentEstablished.Value(), AttemptFails: t.FailedConnectionAttempts.Value(),
		EstabResets: t.EstablishedResets.Value(),
		InSegs:      t.ValidSegmentsReceived.Value() + t.InvalidSegmentsReceived.Value(), OutSegs: t.SegmentsSent.Value(),
		InErrs: t.InvalidSegmentsReceived.Value(), InCsumErrors: t.ChecksumErrors.Value(),
		RetransSegs: t.Retransmits.Value(), FastRetrans: t.FastRetransmit.Value(), Timeouts: t.Timeouts.Value(),
		OutRsts: t.ResetsSent.Value(), InRsts: t.ResetsReceived.Value(),
	}
}

// TCPConnInfo returns the state of c, one of the stack's TCP connections
// (accepted from ListenTCP's listener, or from DialTCP), found by its
// addresses; it may be called from any goroutine. It fails with an error
// matching ErrClosed once the connection has left the stack (closed, and
// out of TIME-WAIT) or the stack is closed.
func (st *Stack) TCPConnInfo(c net.Conn) (TCPConnInfo, error) {
	if _, ok := c.(*gonet.TCPConn); !ok {
		return TCPConnInfo{}, fmt.Errorf("tcp info: %T is not one of the stack's TCP connections", c)
	}
	if st.closed.Load() {
		return TCPConnInfo{}, fmt.Errorf("tcp info: %w", ErrClosed)
	}
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok || local == nil || remote == nil {
		// gonet has no addresses for a connection that is closed.
		return TCPConnInfo{}, fmt.Errorf("tcp info: the connection is closed: %w", ErrClosed)
	}
	l, r := local.AddrPort(), remote.AddrPort()
	fail := fmt.Errorf("tcp info %v-%v: %w", l, r, ErrClosed)
	la, ra := l.Addr().Unmap(), r.Addr().Unmap()
	proto, hdr := ipv4.ProtocolNumber, header.IPv4MinimumSize
	if la.Is6() {
		proto, hdr = ipv6.ProtocolNumber, header.IPv6MinimumSize
	}
	id := stack.TransportEndpointID{LocalPort: l.Port(), LocalAddress: tcpip.AddrFromSlice(la.AsSlice()),
		RemotePort: r.Port(), RemoteAddress: tcpip.AddrFromSlice(ra.AsSlice())}
	ep, ok := st.s.FindTransportEndpoint(proto, tcp.ProtocolNumber, id, nicID).(*tcp.Endpoint)
	if !ok {
		return TCPConnInfo{}, fail
	}
	var ti tcpip.TCPInfoOption
	if e := ep.GetSockOpt(&ti); e != nil {
		return TCPConnInfo{}, fmt.Errorf("tcp info %v-%v: %s", l, r, e)
	}
	var cc tcpip.CongestionControlOption
	ep.GetSockOpt(&cc)
	info := TCPConnInfo{State: tcp.EndpointState(ti.State).String(), RTT: ti.RTT, RTTVar: ti.RTTVar, RTO: ti.RTO,
		SndCwnd: ti.SndCwnd, SndSsthresh: ti.SndSsthresh, MSS: int(st.ep.MTU()) - hdr - header.TCPMinimumSize,
		Congestion: string(cc)}
	if s, ok := ep.Stats().(*tcp.Stats); ok {
		info.Retransmits, info.FastRetransmits, info.Timeouts = s.SendErrors.Retransmits.Value(), s.SendErrors.FastRetransmit.Value(), s.SendErrors.Timeouts.Value()
		info.SegmentsSent, info.SegmentsReceived = s.SegmentsSent.Value(), s.SegmentsReceived.Value()
	}
	return info, nil
}

// Endpoint returns the stack's link endpoint (its counters: Stats).
func (st *Stack) Endpoint() *Endpoint { return st.ep }

// network returns the protocol for listening: IPv6 (which takes IPv4
// too, dual stack) when the stack has an IPv6 address, else IPv4.
func (st *Stack) network() tcpip.NetworkProtocolNumber {
	for _, p := range st.ep.cfg.Addrs {
		if p.Addr().Is6() {
			return ipv6.ProtocolNumber
		}
	}
	return ipv4.ProtocolNumber
}

// ListenTCP listens on port (0: a free one) of every address of the
// stack.
func (st *Stack) ListenTCP(port uint16) (net.Listener, error) {
	if st.closed.Load() {
		return nil, fmt.Errorf("listen tcp port %d: %w", port, ErrClosed)
	}
	l, err := gonet.ListenTCP(st.s, tcpip.FullAddress{NIC: nicID, Port: port}, st.network())
	if err != nil {
		return nil, fmt.Errorf("listen tcp port %d: %w", port, err)
	}
	return l, nil
}

// DialTCP connects to addr.
func (st *Stack) DialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if st.closed.Load() {
		return nil, fmt.Errorf("dial tcp %v: %w", addr, ErrClosed)
	}
	a := addr.Addr().Unmap()
	proto := ipv4.ProtocolNumber
	if a.Is6() {
		proto = ipv6.ProtocolNumber
	}
	c, err := gonet.DialContextTCP(ctx, st.s, tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(a.AsSlice()), Port: addr.Port()}, proto)
	if err != nil {
		return nil, fmt.Errorf("dial tcp %v: %w", addr, err)
	}
	return c, nil
}

// ListenUDP opens a UDP endpoint on port (0: a free one) of the stack's
// addresses: the stack's own UDP, for protocols that speak both.
func (st *Stack) ListenUDP(port uint16) (net.PacketConn, error) {
	if st.closed.Load() {
		return nil, fmt.Errorf("listen udp port %d: %w", port, ErrClosed)
	}
	c, err := gonet.DialUDP(st.s, &tcpip.FullAddress{NIC: nicID, Port: port}, nil, st.network())
	if err != nil {
		return nil, fmt.Errorf("listen udp port %d: %w", port, err)
	}
	return c, nil
}

// Shutdown closes the stack once its TCP connections have ended, as a
// server does on Ctrl-C: it waits until no connection is open or closing
// (the last ACK of each closed one has arrived; one in TIME-WAIT has
// ended, as it has for the kernel), or until ctx ends, and then calls
// Close, which resets the ones still open. Shutdown does not close the
// connections: close them first, or let their peers. It returns ctx's
// error if ctx ended first.
func (st *Stack) Shutdown(ctx context.Context) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	var err error
	for st.liveTCP() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
	}
	st.Close()
	return err
}

// liveTCP returns how many TCP connections are open or closing:
// neither listening, nor in TIME-WAIT, nor closed.
func (st *Stack) liveTCP() int {
	n := 0
	for _, e := range st.s.RegisteredEndpoints() {
		t, ok := e.(*tcp.Endpoint)
		if !ok {
			continue
		}
		switch t.EndpointState() {
		case tcp.StateSynSent, tcp.StateSynRecv, tcp.StateEstablished, tcp.StateFinWait1, tcp.StateFinWait2,
			tcp.StateCloseWait, tcp.StateLastAck, tcp.StateClosing:
			n++
		}
	}
	return n
}

// Close closes the stack and its endpoint: connections are reset, the XDP
// program detached.
func (st *Stack) Close() error {
	if st.closed.Swap(true) {
		return nil
	}
	st.s.Close()
	st.ep.Close()
	st.s.Wait()
	return nil
}
