package nexthop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const (
	// refreshEvery is the period of the sweeper, which reconfirms the
	// STALE neighbours hops were used through and drops idle hops. It
	// matches the kernel's default delay_first_probe_time.
	refreshEvery = 5 * time.Second
	// retriggerEvery bounds how often one resolution asks the kernel again
	// to resolve a neighbour that failed or vanished while it waited.
	retriggerEvery = time.Second
	// readyTimeout bounds how long New waits for the neighbour table.
	readyTimeout = 10 * time.Second
	// requestTimeout bounds every netlink request, so that no Resolve and
	// no Close can hang on an answer that never comes.
	requestTimeout = 10 * time.Second
)

var errClosed = fmt.Errorf("nexthop: resolver closed: %w", net.ErrClosed)

// Resolver answers next-hop questions for one interface, in the network
// namespace that was current on the calling thread when New ran. Its
// methods are safe for concurrent use.
type Resolver struct {
	ifindex    int
	opts       Options
	sweepEvery time.Duration

	ns  netns.NsHandle
	h   *netlink.Handle          // route, neighbour and address requests
	raw map[int]*nl.SocketHandle // requests the netlink package lacks
	sub *nl.NetlinkSocket        // the subscription

	cache hopCache

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the reader, the sweeper, resolutions
	closeOnce sync.Once

	mu        sync.Mutex
	ifname    string
	mtu, mtu6 int
	brd       net.HardwareAddr
	gen       uint64        // counts flushes: answers from an older generation are not cached
	flushed   chan struct{} // closed at the next flush; nil until someone waits
	neigh     map[netip.Addr]*neighRec
	inflight  map[netip.Addr]*call
	failedDst map[netip.Addr]dstFailure
	failedVia map[netip.Addr]viaFailure
	err       error // the subscription ended: every Resolve fails with it
	closed    bool
	dumping   bool       // a neighbour dump is under way on the subscription socket
	redump    bool       // ask for another when it ends
	ready     chan error // result of the first dump, for New
	mac       net.HardwareAddr
	// localDirty: an address or the MAC changed, and the reader reads
	// the addresses again (local) when it is through its batch.
	localDirty bool
	local      atomic.Pointer[Local]
	localMu    sync.Mutex // refreshLocal

	stats struct {
		resolutions atomic.Uint64 // slow-path resolutions run
		triggers    atomic.Uint64 // NTF_USE requests sent
		gets        atomic.Uint64 // RTM_GETNEIGH requests sent
		refreshes   atomic.Uint64 // STALE neighbours the sweeper reconfirmed
		flushes     atomic.Uint64
		overruns    atomic.Uint64 // ENOBUFS on the subscription
	}
}

type call struct {
	done chan struct{}
	hop  Hop
	err  error
}

type dstFailure struct {
	until time.Time
	via   netip.Addr
	err   error
}

type viaFailure struct {
	until time.Time
	took  time.Duration
}

// route is the part of a hop the route lookup gives.
type route struct {
	via netip.Addr
	src netip.Addr
	mtu int
	mac net.HardwareAddr // set for broadcast and multicast destinations only
}

// New returns a Resolver for the interface ifindex in the network namespace
// of the calling thread (to use another one, lock the OS thread and enter
// the namespace around the call, as nsdo.Do does); every later netlink
// request and the subscription stay in that namespace, whatever goroutine
// or thread calls the Resolver. The interface must be an Ethernet
// interface that does ARP: loopback, NOARP and non-Ethernet interfaces
// have no next-hop MAC addresses. New reads the neighbour table before it
// returns. Close the Resolver to stop its goroutines.
func New(ifindex int, opts Options) (*Resolver, error) {
	opts = opts.withDefaults()
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("nexthop: current network namespace: %w", err)
	}
	r := &Resolver{
		ifindex:    ifindex,
		opts:       opts,
		sweepEvery: max(min(refreshEvery, opts.IdleTimeout/2), 10*time.Millisecond),
		ns:         ns,
		neigh:      map[netip.Addr]*neighRec{},
		inflight:   map[netip.Addr]*call{},
		failedDst:  map[netip.Addr]dstFailure{},
		failedVia:  map[netip.Addr]viaFailure{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.open(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Resolver) open() error {
	var err error
	if r.h, err = netlink.NewHandleAt(r.ns, unix.NETLINK_ROUTE); err != nil {
		return fmt.Errorf("nexthop: netlink socket: %w", err)
	}
	if err := r.h.SetSocketTimeout(requestTimeout); err != nil {
		return fmt.Errorf("nexthop: netlink socket: %w", err)
	}
	s, err := nl.GetNetlinkSocketAt(r.ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("nexthop: netlink socket: %w", err)
	}
	r.raw = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}
	tv := unix.NsecToTimeval(requestTimeout.Nanoseconds())
	s.SetSendTimeout(&tv)
	s.SetReceiveTimeout(&tv)

	li, err := r.getLink(r.ifindex)
	if err != nil {
		return fmt.Errorf("nexthop: interface %d: %w", r.ifindex, err)
	}
	if li.typ != unix.ARPHRD_ETHER || li.flags&(unix.IFF_LOOPBACK|unix.IFF_NOARP) != 0 || len(li.addr) != 6 {
		why := "it is not Ethernet"
		switch {
		case li.flags&unix.IFF_LOOPBACK != 0:
			why = "it is a loopback interface"
		case li.flags&unix.IFF_NOARP != 0:
			why = "it does no ARP (NOARP)"
		case li.typ == unix.ARPHRD_ETHER:
			why = "it has no MAC address"
		}
		return fmt.Errorf("nexthop: %s (interface %d) has no next-hop MAC addresses to resolve: %s", li.name, r.ifindex, why)
	}
	r.ifname, r.mtu, r.mtu6, r.brd, r.mac = li.name, li.mtu, li.mtu6, slices.Clone(li.brd), slices.Clone(li.addr)
	if len(r.brd) != 6 {
		r.brd = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}

	if r.sub, err = nl.SubscribeAt(r.ns, netns.None(), unix.NETLINK_ROUTE, groups...); err != nil {
		return fmt.Errorf("nexthop: subscribe to netlink notifications: %w", err)
	}
	// The addresses after the subscription: a change from now on is
	// notified, and read again.
	if err := r.refreshLocal(); err != nil {
		return err
	}
	if unix.SetsockoptInt(r.sub.GetFd(), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, subscriptionBuffer) != nil {
		unix.SetsockoptInt(r.sub.GetFd(), unix.SOL_SOCKET, unix.SO_RCVBUF, subscriptionBuffer)
	}
	ready := make(chan error, 1)
	r.mu.Lock()
	r.ready = ready
	err = r.startDump()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.wg.Add(2)
	go r.read()
	go r.sweeper()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("nexthop: read the neighbour table: %w", err)
		}
	case <-t.C:
		return fmt.Errorf("nexthop: the neighbour table did not arrive within %v", readyTimeout)
	}
	return nil
}

// Lookup returns the cached hop to dst. It makes no system call and does
// not allocate, and is meant to be called per datagram or per batch from
// any number of goroutines. ok is false when nothing usable is cached (the
// hop was never resolved, or the kernel's tables changed since): call
// Resolve then. IPv4-mapped IPv6 addresses are unmapped; a zone is
// ignored.
func (r *Resolver) Lookup(dst netip.Addr) (Hop, bool) {
	if e := r.cache.get(keyOf(dst)); e != nil {
		return e.current()
	}
	return Hop{}, false
}

// Resolve returns the hop to dst, from the cache or else from the kernel:
// the kernel's route to dst, then its neighbour entry for the next hop;
// when that entry is missing or unusable, Resolve makes the kernel resolve
// it (without sending any datagram) and waits for the answer, until ctx
// ends or Options.ResolveTimeout passes. Errors:
//   - no route: the error names dst and wraps unix.ENETUNREACH (or the
//     kernel's error for unreachable, prohibit and blackhole routes);
//   - the route leaves through another interface, or dst is local: the
//     error names the interface and wraps ErrOtherInterface;
//   - nobody answered ARP or neighbour discovery: the error names dst and
//     the gateway, if any, and wraps unix.EHOSTUNREACH. The failure is
//     remembered for Options.FailedHold, during which Resolve of dst, or of
//     any destination through the same gateway, fails at once;
//   - ctx ended: the error wraps ctx.Err(); the resolution goes on for
//     other callers and for the cache;
//   - the Resolver is closed (net.ErrClosed) or its netlink subscription
//     failed (that error).
//
// Concurrent Resolves of the same destination share one resolution.
func (r *Resolver) Resolve(ctx context.Context, dst netip.Addr) (Hop, error) {
	dst = normalize(dst)
	if err := ctx.Err(); err != nil {
		if h, ok := r.Lookup(dst); ok {
			return h, nil
		}
		if !dst.IsValid() {
			return Hop{}, errors.New("nexthop: resolve the zero netip.Addr")
		}
		return Hop{}, fmt.Errorf("nexthop: resolve %v: %w", dst, err)
	}
	h, c, err := r.start(dst)
	if c == nil {
		return h, err
	}
	select {
	case <-c.done:
		return c.hop, c.err
	case <-ctx.Done():
		return Hop{}, fmt.Errorf("nexthop: resolve %v: %w", dst, ctx.Err())
	}
}

// Start is Resolve without the wait: it returns nil when dst's hop is
// cached or a resolution of it is under way (started now if none was),
// and the error Resolve would return at once: a failure remembered for
// Options.FailedHold (nobody answered for dst, or for its gateway), the
// Resolver closed or its subscription failed. A sender that must not
// block hands the datagram to the kernel meanwhile, and finds the hop
// with Lookup once the resolution is done.
func (r *Resolver) Start(dst netip.Addr) error {
	_, _, err := r.start(normalize(dst))
	return err
}

// start returns the cached hop (c nil, err nil), a remembered or fatal
// error (c nil), or the call resolving dst, started if need be.
func (r *Resolver) start(dst netip.Addr) (Hop, *call, error) {
	if e := r.cache.get(keyOf(dst)); e != nil {
		if h, ok := e.current(); ok {
			return h, nil, nil
		}
	}
	if !dst.IsValid() {
		return Hop{}, nil, errors.New("nexthop: resolve the zero netip.Addr")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Hop{}, nil, errClosed
	}
	if r.err != nil {
		return Hop{}, nil, r.err
	}
	if f, ok := r.failedDst[dst]; ok {
		if time.Now().Before(f.until) {
			return Hop{}, nil, f.err
		}
		delete(r.failedDst, dst)
	}
	c := r.inflight[dst]
	if c == nil {
		// A resolution may have finished since the first look.
		if e := r.cache.get(keyOf(dst)); e != nil {
			if h, ok := e.current(); ok {
				return h, nil, nil
			}
		}
		c = &call{done: make(chan struct{})}
		r.inflight[dst] = c
		r.wg.Add(1)
		go r.resolution(dst, c)
	}
	return Hop{}, c, nil
}

// Close stops the Resolver's goroutines and releases its sockets. Pending
// and later Resolves fail with an error wrapping net.ErrClosed; Lookup
// finds nothing. Close is idempotent and always returns nil.
func (r *Resolver) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.flushLocked()
		r.mu.Unlock()
		r.cancel()
		if r.sub != nil {
			r.sub.Close() // ends the reader's Receive
		}
		r.wg.Wait()
		if r.h != nil {
			r.h.Close()
		}
		for _, s := range r.raw {
			s.Close()
		}
		r.ns.Close()
	})
	return nil
}

// resolution runs one shared slow-path resolution of dst.
func (r *Resolver) resolution(dst netip.Addr, c *call) {
	defer r.wg.Done()
	r.stats.resolutions.Add(1)
	c.hop, c.err = r.resolve(dst)
	r.mu.Lock()
	delete(r.inflight, dst)
	r.mu.Unlock()
	close(c.done)
}

func (r *Resolver) resolve(dst netip.Addr) (Hop, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.ResolveTimeout)
	defer cancel()
	var (
		rt          route
		rtGen       uint64
		haveRoute   bool
		lastTrigger time.Time
	)
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return Hop{}, errClosed
		}
		if r.err != nil {
			err := r.err
			r.mu.Unlock()
			return Hop{}, err
		}
		gen := r.gen
		r.mu.Unlock()

		if !haveRoute || rtGen != gen {
			var err error
			if rt, err = r.route(dst); err != nil {
				return Hop{}, err
			}
			haveRoute, rtGen = true, gen
		}
		hop := Hop{Dst: dst, Via: rt.via, Src: rt.src, MTU: rt.mtu}

		r.mu.Lock()
		if r.gen != gen || r.closed || r.err != nil {
			r.mu.Unlock()
			continue // the tables changed while the kernel was asked
		}
		if rt.mac != nil {
			hop.MAC = rt.mac
			r.cache.put(keyOf(dst), &entry{hop: hop})
			r.mu.Unlock()
			return hop, nil
		}
		if f, ok := r.failedVia[rt.via]; ok {
			if time.Now().Before(f.until) {
				err := unreachable(dst, rt.via, r.ifname, f.took)
				r.failedDst[dst] = dstFailure{until: f.until, via: rt.via, err: err}
				r.mu.Unlock()
				return Hop{}, err
			}
			delete(r.failedVia, rt.via)
		}
		rec := r.neigh[rt.via]
		if rec == nil {
			rec = &neighRec{addr: rt.via}
			r.neigh[rt.via] = rec
		}
		if st := rec.cur.Load(); st != nil {
			r.cache.put(keyOf(dst), &entry{hop: hop, nb: rec})
			r.mu.Unlock()
			hop.MAC = st.mac
			return hop, nil
		}
		ver, changed, flushed := rec.version, rec.wait(), r.flushWait()
		state, flags := rec.state, rec.flags
		r.mu.Unlock()

		// The mirror has no usable entry: ask the kernel for its own,
		// which the mirror may not have heard of yet.
		kn, found, err := r.getNeigh(rt.via)
		if err == nil {
			if found && kn.usable() {
				r.mu.Lock()
				if rec.version == ver && r.neigh[rt.via] == rec {
					r.setNeigh(rec, kn)
				}
				r.mu.Unlock()
				continue
			}
			state, flags = kn.state, kn.flags
			if !found {
				state, flags = 0, 0
			}
		}
		if !managedElsewhere(state, flags) && time.Since(lastTrigger) >= retriggerEvery {
			if err := r.trigger(rt.via); err != nil {
				return Hop{}, fmt.Errorf("nexthop: ask the kernel to resolve %v on %s: %w", rt.via, r.name(), err)
			}
			lastTrigger = time.Now()
		}

		// Wait for news of the neighbour or of the tables; look again
		// when a new request may be sent, or after retriggerEvery if none
		// can be (an entry managed elsewhere).
		wait := retriggerEvery - time.Since(lastTrigger)
		if wait <= 0 {
			wait = retriggerEvery
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-flushed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if r.ctx.Err() != nil {
				return Hop{}, errClosed
			}
			err := unreachable(dst, rt.via, r.name(), r.opts.ResolveTimeout)
			r.mu.Lock()
			if r.gen == rtGen {
				until := time.Now().Add(r.opts.FailedHold)
				r.failedVia[rt.via] = viaFailure{until: until, took: r.opts.ResolveTimeout}
				r.failedDst[dst] = dstFailure{until: until, via: rt.via, err: err}
			}
			r.mu.Unlock()
			return Hop{}, err
		}
		t.Stop()
	}
}

// unreachable is the error of a neighbour that did not answer.
func unreachable(dst, via netip.Addr, ifname string, took time.Duration) error {
	proto := "ARP"
	if via.Is6() {
		proto = "neighbour discovery"
	}
	if via == dst {
		return fmt.Errorf("nexthop: %v did not answer %s on %s within %v: %w", dst, proto, ifname, took, unix.EHOSTUNREACH)
	}
	return fmt.Errorf("nexthop: gateway %v (next hop to %v) did not answer %s on %s within %v: %w", via, dst, proto, ifname, took, unix.EHOSTUNREACH)
}

func (r *Resolver) name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ifname
}

// route asks the kernel for its route to dst, as `ip route get` does.
func (r *Resolver) route(dst netip.Addr) (route, error) {
	var opts *netlink.RouteGetOptions
	if linkScoped(dst) {
		// The kernel needs the interface to route these, as a socket
		// bound to it or with IP_MULTICAST_IF would give it.
		opts = &netlink.RouteGetOptions{OifIndex: r.ifindex}
	}
	rts, err := r.h.RouteGetWithOptions(dst.AsSlice(), opts)
	if err == nil && len(rts) == 0 {
		err = unix.ENETUNREACH
	}
	if err != nil {
		return route{}, fmt.Errorf("nexthop: no route to %v: %w", dst, err)
	}
	rt := rts[0]
	// The interface's MTUs as they are now: the IPv6 one changes without
	// notification (sysctl, router advertisements), and a notification
	// of a link MTU change may precede the IPv6 MTU's following it.
	li, lerr := r.getLink(r.ifindex)
	r.mu.Lock()
	if lerr == nil {
		r.linkUpdate(li)
	}
	ifname, mtu, mtu6, brd := r.ifname, r.mtu, r.mtu6, r.brd
	r.mu.Unlock()

	var out route
	switch rt.Type {
	case unix.RTN_UNICAST:
	case unix.RTN_LOCAL, unix.RTN_ANYCAST:
		return out, fmt.Errorf("nexthop: %v is an address of this host, which the kernel delivers itself, not out of %s: %w", dst, ifname, ErrOtherInterface)
	case unix.RTN_BROADCAST:
		out.mac = brd
	case unix.RTN_MULTICAST:
		out.mac = multicastMAC(dst)
	default:
		return out, fmt.Errorf("nexthop: no route to %v: the kernel's route is of type %d: %w", dst, rt.Type, unix.ENETUNREACH)
	}
	if rt.LinkIndex != r.ifindex {
		name := fmt.Sprintf("interface %d", rt.LinkIndex)
		if l, err := r.h.LinkByIndex(rt.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		return out, fmt.Errorf("nexthop: the route to %v leaves through %s, not %s: %w", dst, name, ifname, ErrOtherInterface)
	}

	out.via = dst
	if out.mac == nil {
		if gw, ok := netip.AddrFromSlice(rt.Gw); ok && !gw.IsUnspecified() {
			out.via = gw.Unmap()
		} else if v, ok := rt.Via.(*netlink.Via); ok && v != nil {
			if gw, ok := netip.AddrFromSlice(v.Addr); ok && !gw.IsUnspecified() {
				out.via = gw.Unmap() // RFC 5549: an IPv4 route via an IPv6 next hop
			}
		}
	}
	if src, ok := netip.AddrFromSlice(rt.Src); ok && !src.IsUnspecified() {
		out.src = src.Unmap()
	} else if out.src, err = r.firstAddr(dst, ifname); err != nil {
		return route{}, err
	}
	out.mtu = rt.MTU
	if out.mtu <= 0 {
		out.mtu = mtu
		if dst.Is6() && mtu6 > 0 {
			out.mtu = min(mtu, mtu6)
		}
	}
	return out, nil
}

// firstAddr is the source address when the route has no preferred one:
// the interface's first usable address of dst's family, of link scope for
// a link-local dst and else preferably not.
func (r *Resolver) firstAddr(dst netip.Addr, ifname string) (netip.Addr, error) {
	fam := netlink.FAMILY_V4
	if dst.Is6() {
		fam = netlink.FAMILY_V6
	}
	addrs, err := r.h.AddrList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: r.ifindex}}, fam)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("nexthop: addresses of %s: %w", ifname, err)
	}
	var first, best netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
			continue
		}
		ip = ip.Unmap()
		if !first.IsValid() {
			first = ip
		}
		if !best.IsValid() && ip.IsLinkLocalUnicast() == dst.IsLinkLocalUnicast() {
			best = ip
		}
	}
	if best.IsValid() {
		return best, nil
	}
	if first.IsValid() {
		return first, nil
	}
	return netip.Addr{}, fmt.Errorf("nexthop: the route to %v has no preferred source and %s has no address of its family: %w", dst, ifname, unix.EADDRNOTAVAIL)
}

// linkScoped tells whether dst is only meaningful on one link, so that
// the kernel routes it only when told the interface.
func linkScoped(dst netip.Addr) bool {
	if dst.Is4() {
		return dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || dst.IsLinkLocalMulticast()
	}
	return dst.IsLinkLocalUnicast() || dst.IsLinkLocalMulticast() || dst.IsInterfaceLocalMulticast()
}

// multicastMAC maps a multicast address to its Ethernet address (RFC 1112
// section 6.4, RFC 2464 section 7).
func multicastMAC(dst netip.Addr) net.HardwareAddr {
	if dst.Is4() {
		b := dst.As4()
		return net.HardwareAddr{0x01, 0x00, 0x5e, b[1] & 0x7f, b[2], b[3]}
	}
	b := dst.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// read follows the subscription until Close.
func (r *Resolver) read() {
	defer r.wg.Done()
	for {
		msgs, from, err := r.sub.Receive()
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				r.overrun()
				continue
			}
			r.mu.Lock()
			r.failLocked(fmt.Errorf("nexthop: the netlink subscription for %s ended: %w", r.ifname, err))
			r.mu.Unlock()
			return
		}
		if from.Pid != nl.PidKernel {
			continue
		}
		r.handle(msgs)
		if r.takeLocal() {
			r.refreshLocal()
		}
	}
}

// handle applies a batch of notifications (and dump answers).
func (r *Resolver) handle(msgs []syscall.NetlinkMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.err != nil {
		return
	}
	flush := false
	for _, m := range msgs {
		if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
			r.redump = true // the table changed during the dump
		}
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			var err error
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					err = unix.Errno(-e)
				}
			}
			r.dumpDone(err)
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					r.dumpDone(unix.Errno(-e))
				}
			}
		case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
			if idx, n, ok := parseNeigh(m.Data); ok && idx == r.ifindex {
				r.applyNeigh(n, m.Header.Type == unix.RTM_DELNEIGH)
			}
		case unix.RTM_NEWLINK, unix.RTM_DELLINK:
			r.linkChanged(m.Header.Type, m.Data)
			flush = true
		case unix.RTM_NEWROUTE, unix.RTM_DELROUTE,
			unix.RTM_NEWRULE, unix.RTM_DELRULE,
			unix.RTM_NEWNEXTHOP, unix.RTM_DELNEXTHOP:
			flush = true
		case unix.RTM_NEWADDR, unix.RTM_DELADDR:
			flush = true
			r.markLocal()
		}
		if r.err != nil {
			return
		}
	}
	if flush {
		r.flushLocked()
	}
}

// dumpDone ends a neighbour dump. mu held.
func (r *Resolver) dumpDone(err error) {
	if !r.dumping {
		return
	}
	r.dumping = false
	if r.ready != nil {
		r.ready <- err
		r.ready = nil
	} else if err != nil {
		r.failLocked(fmt.Errorf("nexthop: read the neighbour table: %w", err))
		return
	}
	if err == nil && r.redump {
		r.redump = false
		if err := r.startDump(); err != nil {
			r.failLocked(err)
		}
	}
}

// overrun handles ENOBUFS: notifications were lost, so nothing cached
// can be trusted. Start again from a fresh neighbour dump.
func (r *Resolver) overrun() {
	r.stats.overruns.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.err != nil {
		return
	}
	r.flushLocked()
	r.markLocal() // an address notification may be among those lost
	for _, rec := range r.neigh {
		rec.cur.Store(nil)
		rec.state, rec.flags = 0, 0
		rec.bump()
	}
	clear(r.neigh)
	if r.dumping {
		r.redump = true
	} else if err := r.startDump(); err != nil {
		r.failLocked(err)
	}
}

// applyNeigh applies a neighbour notification. mu held.
func (r *Resolver) applyNeigh(n kernelNeigh, deleted bool) {
	rec := r.neigh[n.addr]
	if deleted {
		if rec != nil {
			rec.cur.Store(nil)
			rec.state, rec.flags = 0, 0
			rec.bump()
			delete(r.neigh, n.addr)
		}
		return
	}
	if rec == nil {
		rec = &neighRec{addr: n.addr}
		r.neigh[n.addr] = rec
	}
	r.setNeigh(rec, n)
}

// setNeigh makes rec describe n. mu held.
func (r *Resolver) setNeigh(rec *neighRec, n kernelNeigh) {
	rec.state, rec.flags = n.state, n.flags
	if n.usable() {
		if cur := rec.cur.Load(); cur == nil || !bytes.Equal(cur.mac, n.mac) {
			rec.cur.Store(&neighState{mac: slices.Clone(n.mac)})
		}
		// It answers now: forget that it did not.
		delete(r.failedVia, rec.addr)
		for d, f := range r.failedDst {
			if f.via == rec.addr {
				delete(r.failedDst, d)
			}
		}
	} else {
		rec.cur.Store(nil)
	}
	rec.bump()
}

// linkChanged follows the MTU and name of the interface. mu held.
func (r *Resolver) linkChanged(typ uint16, b []byte) {
	li, ok := parseLink(b)
	if !ok || li.index != r.ifindex {
		return
	}
	if typ == unix.RTM_DELLINK {
		r.failLocked(fmt.Errorf("nexthop: interface %s (%d) was deleted or left the namespace: %w", r.ifname, r.ifindex, unix.ENODEV))
		return
	}
	r.linkUpdate(li)
}

// linkUpdate records the name, MTUs and broadcast address of the
// interface. mu held.
func (r *Resolver) linkUpdate(li linkInfo) {
	if li.name != "" {
		r.ifname = li.name
	}
	if li.mtu > 0 {
		r.mtu = li.mtu
	}
	if li.mtu6 > 0 {
		r.mtu6 = li.mtu6
	}
	if len(li.brd) == 6 {
		r.brd = slices.Clone(li.brd)
	}
	if len(li.addr) == 6 && !bytes.Equal(li.addr, r.mac) {
		r.mac = slices.Clone(li.addr)
		r.markLocal()
	}
}

// flushLocked drops every cached hop and remembered failure, and makes
// resolutions under way ask for their route again. mu held.
func (r *Resolver) flushLocked() {
	r.gen++
	r.stats.flushes.Add(1)
	r.cache.reset()
	clear(r.failedDst)
	clear(r.failedVia)
	if r.flushed != nil {
		close(r.flushed)
		r.flushed = nil
	}
}

// flushWait returns a channel closed at the next flush. mu held.
func (r *Resolver) flushWait() <-chan struct{} {
	if r.flushed == nil {
		r.flushed = make(chan struct{})
	}
	return r.flushed
}

// failLocked records that the Resolver can no longer follow the kernel.
// mu held.
func (r *Resolver) failLocked(err error) {
	if r.err == nil {
		r.err = err
	}
	r.flushLocked()
	r.markLocal() // an address notification may be among those lost
	for _, rec := range r.neigh {
		rec.cur.Store(nil)
		rec.bump()
	}
}

// sweeper periodically drops idle hops and reconfirms used neighbours.
func (r *Resolver) sweeper() {
	defer r.wg.Done()
	t := time.NewTicker(r.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.sweep()
		}
	}
}

// sweep drops the hops unused for IdleTimeout and nudges the kernel to
// reconfirm each STALE neighbour a hop was used through since the
// previous sweep, as its own traffic would.
func (r *Resolver) sweep() {
	if r.takeLocal() {
		r.refreshLocal() // an earlier read failed: try again
	}
	limit := int((r.opts.IdleTimeout + r.sweepEvery - 1) / r.sweepEvery)
	var stale []netip.Addr
	r.mu.Lock()
	if r.closed || r.err != nil {
		r.mu.Unlock()
		return
	}
	r.cache.sweep(func(e *entry) bool {
		if e.used.Load() {
			e.used.Store(false)
			e.idle = 0
			if e.nb != nil {
				e.nb.used = true
			}
			return true
		}
		e.idle++
		return e.idle < limit
	})
	for a, rec := range r.neigh {
		if rec.used {
			rec.used = false
			if rec.state == netlink.NUD_STALE && !managedElsewhere(rec.state, rec.flags) {
				stale = append(stale, a)
			}
		}
	}
	now := time.Now()
	for d, f := range r.failedDst {
		if now.After(f.until) {
			delete(r.failedDst, d)
		}
	}
	for v, f := range r.failedVia {
		if now.After(f.until) {
			delete(r.failedVia, v)
		}
	}
	r.mu.Unlock()
	for _, a := range stale {
		if r.ctx.Err() != nil {
			return
		}
		// Ask the kernel first: the entry may have changed since, and an
		// NTF_USE must not touch an entry someone else manages.
		kn, found, err := r.getNeigh(a)
		if err != nil || !found || kn.state != netlink.NUD_STALE || managedElsewhere(kn.state, kn.flags) {
			continue
		}
		if r.trigger(a) == nil {
			r.stats.refreshes.Add(1)
		}
	}
}
