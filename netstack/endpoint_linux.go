//go:build linux

package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/xdpio/xdpio/xsk"
)

// gsoMaxSize is the largest segment the stack hands over with TSO: a
// whole IP packet's worth.
const gsoMaxSize = 65535

// Endpoint is a gVisor link endpoint (stack.LinkEndpoint, with host GSO:
// stack.GSOEndpoint) on the AF_XDP sockets of an interface's RX queues.
// Its methods are safe for concurrent use, as the stack calls them from
// many goroutines.
type Endpoint struct {
	cfg     Config
	ifname  string
	ifindex int
	mac     tcpip.LinkAddress
	mtu     uint32
	caps    stack.LinkEndpointCapabilities
	dev     *xsk.Device
	queues  []*queue
	neigh   *neighbours // with Config.Share: the kernel's neighbours
	ports   [2]uint16   // with Config.Share: the stack's own local ports

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	onClose    func()

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the receive loops
	err     atomic.Pointer[error]
	closed  atomic.Bool
	closing atomic.Bool

	ctr counters
}

type counters struct {
	rxFrames, rxBytes, rxBadChecksum, rxPartialChecksum, rxMalformed, rxNotForUs atomic.Uint64
	rxPackets, rxBatches                                                         atomic.Uint64
	txPackets, txFrames, txSegmented, txBytes, txDropped                         atomic.Uint64
	txErrors, txNoNeighbour                                                      atomic.Uint64
}

// NewEndpoint opens the AF_XDP sockets on ifname's RX queues (in the
// calling thread's network namespace) and the XDP program that takes the
// frames for cfg.Addrs. The endpoint starts receiving when a stack
// attaches it (stack.CreateNIC); Open builds a whole stack around one.
func NewEndpoint(ifname string, cfg Config) (_ *Endpoint, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %s in this network namespace (see ip link)", ErrNoDevice, ifname)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("%w: %s has no Ethernet address (%v)", ErrInvalidConfig, ifname, ifi.HardwareAddr)
	}
	e := &Endpoint{cfg: cfg, ifname: ifname, ifindex: ifi.Index, mac: tcpip.LinkAddress(ifi.HardwareAddr), mtu: uint32(ifi.MTU)}
	if cfg.MTU > 0 {
		e.mtu = uint32(cfg.MTU)
	}
	e.caps = stack.CapabilityTXChecksumOffload
	if cfg.Share == nil {
		e.caps |= stack.CapabilityResolutionRequired // the stack's ARP and neighbour discovery
	}
	if !cfg.NoRXChecksumOffload {
		e.caps |= stack.CapabilityRXChecksumOffload
	}
	if err := checkAddrs(ifi, cfg); err != nil {
		return nil, err
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			e.cancel()
			if e.dev != nil {
				e.dev.Close()
			}
			if e.neigh != nil {
				e.neigh.close()
			}
		}
	}()
	var expr string
	if cfg.Share == nil {
		expr, err = steering(cfg.Addrs)
	} else {
		if e.ports, err = sharedPorts(cfg.Share.Ports); err != nil {
			return nil, err
		}
		if e.neigh, err = newNeighbours(e, ifi.Index); err != nil {
			return nil, err
		}
		expr = sharedSteering(cfg.Addrs, cfg.Share.Expr, e.ports)
	}
	if err != nil {
		return nil, err
	}
	xc := xsk.Config{
		Queues:  cfg.Queues,
		Program: xsk.ProgramConfig{Expr: expr, Attach: cfg.Attach},
		// One kick sends everything on the TX ring (a 64 KiB segment is
		// 45 frames; copy mode's default budget of 32 a kick would leave a
		// burst's tail on the ring until the stack next writes).
		Socket: xsk.SocketConfig{Bind: cfg.Bind, TXShare: 1.0 / 3, TXBudget: 2048},
		UMEM:   xsk.UMEMConfig{NumFrames: cfg.FramesPerQueue},
	}
	if e.dev, err = xsk.Open(ifname, xc); err != nil {
		return nil, err
	}
	for _, s := range e.dev.Sockets() {
		q, err := newQueue(e, s)
		if err != nil {
			return nil, err
		}
		e.queues = append(e.queues, q)
	}
	return e, nil
}

// steering is the tcpdump expression of the frames the stack takes: to
// its addresses (IPv4 ones: and the ARP requests for them, which "host"
// covers), and the IPv6 neighbour solicitations whose target is one of
// them (sent to a solicited-node multicast address).
func steering(addrs []netip.Prefix) (string, error) {
	var parts []string
	for _, p := range addrs {
		a := p.Addr()
		if a.Is4() {
			parts = append(parts, "dst host "+a.String())
			continue
		}
		b := a.As16()
		ns := "icmp6 and ip6[40] = 135"
		for i := 0; i < 16; i += 4 {
			ns += fmt.Sprintf(" and ip6[%d:4] = 0x%02x%02x%02x%02x", 48+i, b[i], b[i+1], b[i+2], b[i+3])
		}
		parts = append(parts, "ip6 dst host "+a.String(), "("+ns+")")
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("%w: no address to steer", ErrInvalidConfig)
	}
	return strings.Join(parts, " or "), nil
}

// checkAddrs checks that cfg.Addrs are the kernel's addresses on ifi with
// Config.Share, and none of them without: two answers to one ARP request
// would leave the network to pick.
func checkAddrs(ifi *net.Interface, cfg Config) error {
	kernel := map[netip.Addr]bool{}
	as, err := ifi.Addrs()
	if err != nil {
		return fmt.Errorf("%w: %s's addresses: %v", ErrNoDevice, ifi.Name, err)
	}
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			kernel[p.Addr().WithZone("")] = true
		}
	}
	for _, p := range cfg.Addrs {
		switch has := kernel[p.Addr()]; {
		case cfg.Share == nil && has:
			return fmt.Errorf("%w: %v is the kernel's address on %s: give the stack one of its own, or share the kernel's (Config.Share)", ErrInvalidConfig, p.Addr(), ifi.Name)
		case cfg.Share != nil && !has:
			return fmt.Errorf("%w: %v is not the kernel's address on %s, which Config.Share shares (see ip addr)", ErrInvalidConfig, p.Addr(), ifi.Name)
		}
	}
	return nil
}

// sharedSteering is the tcpdump expression of the frames a stack that
// shares the kernel's addresses takes: IP (not ARP) to them that expr
// selects, and the TCP and UDP to the stack's own local ports.
func sharedSteering(addrs []netip.Prefix, expr string, ports [2]uint16) string {
	var dst []string
	for _, p := range addrs {
		if p.Addr().Is4() {
			dst = append(dst, "ip dst host "+p.Addr().String())
		} else {
			dst = append(dst, "ip6 dst host "+p.Addr().String())
		}
	}
	return fmt.Sprintf("(%s) and ((%s) or ((tcp or udp) and dst portrange %d-%d))", strings.Join(dst, " or "), expr, ports[0], ports[1])
}

// sharedPorts checks the stack's local port range against the kernel's
// ephemeral one, or picks the ports above it.
func sharedPorts(want [2]uint16) ([2]uint16, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var lo, hi int
	if err == nil {
		_, err = fmt.Sscan(string(b), &lo, &hi)
	}
	if err != nil {
		return want, fmt.Errorf("the kernel's ephemeral ports (net.ipv4.ip_local_port_range): %w", err)
	}
	if want == [2]uint16{} {
		if hi >= 65535 {
			return want, fmt.Errorf("%w: the kernel's ephemeral ports (%d-%d) leave none to the stack: set Share.Ports below them, or narrow net.ipv4.ip_local_port_range", ErrInvalidConfig, lo, hi)
		}
		return [2]uint16{uint16(hi + 1), 65535}, nil
	}
	if want[0] == 0 || want[0] > want[1] || int(want[1]) >= lo && int(want[0]) <= hi {
		return want, fmt.Errorf("%w: Share.Ports %d-%d: must be a range outside the kernel's ephemeral ports (%d-%d)", ErrInvalidConfig, want[0], want[1], lo, hi)
	}
	return want, nil
}

// MTU implements stack.LinkEndpoint: the largest IP packet.
func (e *Endpoint) MTU() uint32 { return e.mtu }

// SetMTU implements stack.LinkEndpoint. The MTU is the interface's or
// Config.MTU: the stack cannot change it.
func (e *Endpoint) SetMTU(uint32) {}

// MaxHeaderLength implements stack.LinkEndpoint: the Ethernet header.
func (e *Endpoint) MaxHeaderLength() uint16 { return header.EthernetMinimumSize }

// LinkAddress implements stack.LinkEndpoint: the interface's MAC.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.mac
}

// SetLinkAddress implements stack.LinkEndpoint.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mac = addr
}

// Capabilities implements stack.LinkEndpoint: neighbour resolution, TX
// checksum offload, and RX checksum offload unless
// Config.NoRXChecksumOffload.
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities { return e.caps }

// GSOMaxSize implements stack.GSOEndpoint.
func (e *Endpoint) GSOMaxSize() uint32 {
	if e.cfg.NoTSO {
		return 0
	}
	return gsoMaxSize
}

// SupportedGSO implements stack.GSOEndpoint: host GSO, which the endpoint
// cuts with offload's segmenter, unless Config.NoTSO.
func (e *Endpoint) SupportedGSO() stack.SupportedGSO {
	if e.cfg.NoTSO {
		return stack.GSONotSupported
	}
	return stack.HostGSOSupported
}

// Attach implements stack.LinkEndpoint: it starts one receive loop per
// queue, delivering to d; nil stops them.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.mu.Lock()
	prev := e.dispatcher
	e.dispatcher = d
	e.mu.Unlock()
	if d == nil || prev != nil || e.closed.Load() {
		return
	}
	for _, q := range e.queues {
		e.run(q.receive)
		if q.tx != nil {
			e.run(q.pollTX)
		}
	}
}

// run runs loop in a goroutine of its own until Close, keeping the first
// error that ended one without Close.
func (e *Endpoint) run(loop func(context.Context) error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := loop(e.ctx); err != nil && !errors.Is(err, xsk.ErrClosed) && e.ctx.Err() == nil {
			e.err.CompareAndSwap(nil, &err)
		}
	}()
}

// IsAttached implements stack.LinkEndpoint.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

func (e *Endpoint) deliverer() stack.NetworkDispatcher {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher
}

// Wait implements stack.LinkEndpoint: it waits for the receive loops to
// end (after Close).
func (e *Endpoint) Wait() { e.wg.Wait() }

// ARPHardwareType implements stack.LinkEndpoint: Ethernet.
func (e *Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint: the Ethernet header.
func (e *Endpoint) AddHeader(pkt *stack.PacketBuffer) {
	dst := pkt.EgressRoute.RemoteLinkAddress
	if e.neigh != nil {
		dst = e.neigh.mac(pkt.EgressRoute.RemoteAddress)
	}
	eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
	eth.Encode(&header.EthernetFields{
		SrcAddr: e.mac,
		DstAddr: dst,
		Type:    pkt.NetworkProtocolNumber,
	})
}

// ParseHeader implements stack.LinkEndpoint.
func (e *Endpoint) ParseHeader(pkt *stack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	return ok
}

// SetOnCloseAction implements stack.LinkEndpoint.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onClose = f
}

// Close implements stack.LinkEndpoint: it detaches the XDP program (the
// frames go back to the kernel), ends the receive loops and closes the
// sockets.
func (e *Endpoint) Close() {
	if e.closing.Swap(true) {
		return // the stack's close action (RemoveNIC) calls Close again
	}
	e.mu.RLock()
	f := e.onClose
	e.mu.RUnlock()
	if f != nil {
		f()
	}
	e.closed.Store(true)
	e.cancel()
	for _, q := range e.queues {
		q.closeTX()
	}
	e.dev.Close() // wakes the loops' waits
	e.wg.Wait()
	if e.neigh != nil {
		e.neigh.close()
	}
}

// Err returns the error that ended the receive loops without Close: one
// matching ErrNoDevice when the interface went away, or xsk.ErrDetached
// when someone detached the program. nil while they run.
func (e *Endpoint) Err() error {
	if p := e.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Stats returns the endpoint's counters. It may be called from any
// goroutine, also after Close.
func (e *Endpoint) Stats() Stats {
	c := &e.ctr
	st := Stats{
		RXFrames: c.rxFrames.Load(), RXBytes: c.rxBytes.Load(), RXBadChecksum: c.rxBadChecksum.Load(), RXPartialChecksum: c.rxPartialChecksum.Load(),
		RXMalformed: c.rxMalformed.Load(), RXNotForUs: c.rxNotForUs.Load(), RXPackets: c.rxPackets.Load(), RXBatches: c.rxBatches.Load(),
		TXPackets: c.txPackets.Load(), TXFrames: c.txFrames.Load(), TXSegmented: c.txSegmented.Load(),
		TXBytes: c.txBytes.Load(), TXDropped: c.txDropped.Load(), TXErrors: c.txErrors.Load(), TXNoNeighbour: c.txNoNeighbour.Load(),
	}
	for _, q := range e.queues {
		s, _ := q.s.Stats()
		st.Sockets = append(st.Sockets, s)
		if q.rcv != nil {
			st.RXCoalesce = append(st.RXCoalesce, q.rcv.Stats())
		}
		if q.tx != nil {
			st.TXCoalesce = append(st.TXCoalesce, q.tx.Stats())
		}
	}
	return st
}

// Info says how the endpoint is bound: its interface, queues, copy or
// zero-copy, driver or generic attach ("vb, queues 0-1, copy mode,
// driver attach").
func (e *Endpoint) Info() xsk.Info { return e.dev.Info() }

var (
	_ stack.LinkEndpoint = (*Endpoint)(nil)
	_ stack.GSOEndpoint  = (*Endpoint)(nil)
)
