//go:build linux

package xdpnet

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xsk"
)

// UDPConn is a UDP endpoint whose datagrams move over AF_XDP: one socket
// per RX queue of an interface, fed by an XDP program that takes only UDP
// to the conn's address and port. Everything else (ARP and neighbour
// discovery, ICMP, other ports) stays with the kernel.
//
// It implements net.PacketConn with the semantics of net.UDPConn: read
// and write deadlines (errors matching os.ErrDeadlineExceeded), Close
// from any goroutine ending blocked calls with errors matching
// net.ErrClosed, and methods safe for concurrent use. That safety costs a
// lock: reads are serialised on one mutex, as net.UDPConn serialises them
// on its descriptor, and a write takes the TX lock of the queue it goes
// out on (chosen by the destination, so one flow keeps its order). The
// fast path takes no lock on receive: Queues hands each queue to a
// goroutine of its own, which reads datagrams in place in the UMEM.
//
// A conn also holds a kernel UDP socket bound to its address, which
// reserves the port (ListenUDP fails where net.ListenUDP would, and the
// kernel hands the port to nobody else) and receives the datagrams that
// reach the kernel instead of an AF_XDP socket: IPv4 fragments, which the
// kernel reassembles; datagrams on queues without a socket; those that
// came before the XDP program was attached. The conn's read methods read
// it too; with Queues, its reader is the queue with ID KernelQueue.
type UDPConn struct {
	cfg     Config
	ifname  string
	ifindex int
	mac     net.HardwareAddr
	mtu     int            // the interface's, for datagrams the kernel sends
	laddr   netip.AddrPort // bound, port chosen
	raddr   netip.AddrPort // connected peer, or zero

	parser     rxParser // views: verifies whole frames
	copyParser rxParser // copying reads: the payload's checksum is summed while it is copied
	dev        *xsk.Device
	queues     []*Queue // the AF_XDP queues, then the kernel's
	res        *nexthop.Resolver
	ks         *net.UDPConn // the kernel socket of the first port
	ksRaw      syscall.RawConn
	ksFD       int
	kss        []kernelSock // every port's kernel socket, ks first
	wakeFD     int          // eventfd: Close and deadline changes wake blocked calls
	seed       maphash.Seed

	closed    atomic.Bool
	closeDone atomic.Bool  // Close is through everything but the UMEMs
	readers   atomic.Int32 // how the conn is read: readConn, readQueues, readGroup
	closeOnce sync.Once
	finish    sync.Once // the kernel socket, resolver, eventfd
	unmap     sync.Once // the sockets and UMEMs
	closeErr  error
	done      chan struct{} // closed when Close starts

	rmu    sync.Mutex // the conn's own reads
	rturn  int
	kready bool        // the kernel socket may have datagrams (under rmu)
	rnap   xsk.Napper  // whether a conn-level read waits or naps (under rmu)
	rwait  atomic.Bool // a read is blocked in poll: a deadline change must wake it
	rfds   []unix.PollFd
	rdl    atomic.Int64 // read deadline, Unix nanoseconds; 0: none
	wdl    atomic.Int64 // write deadline
	kernel *Queue       // == queues[len(queues)-1]

	// view is what the frame checks compare with (localView), kept
	// current from the resolver's address notifications, as is the XDP
	// program's Local set; localMu orders their updates.
	view     atomic.Pointer[localView]
	localMu  sync.Mutex
	prog     *xsk.Program // under localMu: nil until open has it, and after Close
	detached atomic.Bool  // the XDP program was detached by someone else
}

// ListenUDP opens a UDP endpoint on laddr over AF_XDP on the interface
// ifname, in the calling thread's network namespace: a socket on every RX
// queue of the interface (or Config.Queues), an XDP program that takes
// UDP to laddr (its port; its address too, unless unspecified), and a
// kernel UDP socket bound to laddr. A zero port picks a free one (read it
// back with LocalAddr). An unspecified IPv6 address takes IPv4 too, like a
// dual-stack socket; an unspecified IPv4 one only IPv4.
//
// It fails as net.ListenUDP does when the port is taken (an error matching
// syscall.EADDRINUSE), and with the xsk package's errors when the
// interface, the privileges or the kernel do not allow AF_XDP.
func ListenUDP(ifname string, laddr netip.AddrPort, cfg Config) (*UDPConn, error) {
	c, err := open(ifname, laddr, netip.AddrPort{}, cfg)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "udp", Source: nil, Addr: net.UDPAddrFromAddrPort(laddr), Err: err}
	}
	return c, nil
}

// DialUDP opens a UDP endpoint connected to raddr over AF_XDP on ifname:
// Write and Read exchange datagrams with raddr alone (datagrams from other
// peers are dropped and counted, Drops.OtherPeer). A zero laddr lets the
// kernel pick the source address (the route's) and a free port, as
// net.DialUDP does.
func DialUDP(ifname string, laddr, raddr netip.AddrPort, cfg Config) (*UDPConn, error) {
	if !raddr.IsValid() || raddr.Port() == 0 || raddr.Addr().IsUnspecified() {
		return nil, &net.OpError{Op: "dial", Net: "udp", Addr: udpAddr(raddr), Err: fmt.Errorf("%w: remote address %v", ErrInvalidConfig, raddr)}
	}
	c, err := open(ifname, laddr, unmapAP(raddr), cfg)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "udp", Source: udpAddr(laddr), Addr: udpAddr(raddr), Err: err}
	}
	return c, nil
}

func open(ifname string, laddr, raddr netip.AddrPort, cfg Config) (_ *UDPConn, err error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", xsk.ErrNoDevice, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("%s has no Ethernet address (%v): AF_XDP UDP needs an Ethernet device: %w", ifname, ifi.HardwareAddr, ErrInvalidConfig)
	}
	c := &UDPConn{cfg: cfg, ifname: ifname, ifindex: ifi.Index, mac: ifi.HardwareAddr, mtu: ifi.MTU, ksFD: -1, wakeFD: -1,
		seed: maphash.MakeSeed(), done: make(chan struct{})}
	raddr = c.peer(raddr)
	defer func() {
		if err != nil {
			c.release()
			if c.dev != nil {
				c.dev.Close()
			}
		}
	}()
	// The kernel socket first: it reserves the port, or fails as
	// net.ListenUDP would.
	if err := c.openKernel(laddr, raddr); err != nil {
		return nil, err
	}
	c.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	res, err := nexthop.New(ifi.Index, nexthop.Options{ResolveTimeout: cfg.ResolveTimeout, OnLocal: func(nexthop.Local) { c.applyLocal() }})
	if err != nil {
		return nil, fmt.Errorf("next-hop resolver: %w", err)
	}
	c.localMu.Lock()
	c.res = res
	c.localMu.Unlock()
	c.applyLocal()
	c.parser = newRxParser(c.laddr.Addr(), c.laddr.Port(), cfg.Ports, cfg.RxChecksum)
	c.parser.view, c.parser.zone = &c.view, ifname
	c.copyParser = c.parser
	c.copyParser.deferSum = true
	// Only datagrams to this host, as the kernel would take them: to the
	// interface's MAC and one of its addresses (Rule.Local).
	rule := xsk.Rule{Protocol: protoUDP, DstPortMin: c.laddr.Port(), DstPortMax: c.laddr.Port() + uint16(cfg.Ports-1), Untagged: true, Local: true}
	switch a := c.laddr.Addr(); {
	case !a.IsUnspecified():
		rule.Dst = netip.PrefixFrom(a, a.BitLen())
	case a.Is4():
		rule.EtherType = etherIPv4
	}
	xc := xsk.Config{
		Queues:  cfg.Queues,
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{rule}, Expr: cfg.Expr, Attach: cfg.Attach, Share: cfg.Share},
		Socket:  xsk.SocketConfig{Bind: cfg.Bind, TxBudget: max(cfg.BatchSize, 64)}, // the readers nap themselves (Config.RxNap)
		UMEM:    xsk.UMEMConfig{NumFrames: cfg.FramesPerQueue},
	}
	if cfg.TxChecksum == TxChecksumOffload {
		xc.UMEM.TxMetadata = true
		xc.UMEM.TxSoftwareChecksum = true
	}
	if xc.UMEM.NumFrames == 0 {
		xc.UMEM.NumFrames = defaultFramesPerQueue(len(cfg.Queues), ifname)
	}
	xc.Socket.TxFrames = xc.UMEM.NumFrames / 4
	c.dev, err = xsk.Open(ifname, xc)
	if err != nil {
		return nil, err
	}
	c.localMu.Lock()
	c.prog = c.dev.Program()
	c.localMu.Unlock()
	if err := c.applyLocal(); err != nil {
		return nil, err
	}
	for _, s := range c.dev.Sockets() {
		c.queues = append(c.queues, newQueue(c, s))
	}
	c.kernel = newKernelQueue(c)
	c.queues = append(c.queues, c.kernel)
	c.rnap = xsk.NewNapper(cfg.RxNap, c.dev.Sockets()...)
	c.rfds = make([]unix.PollFd, len(c.queues)+len(c.kss))
	return c, nil
}

// applyLocal brings the frame checks' view and the XDP program's Local set
// up to the resolver's current view of the host's addresses. The resolver
// calls it on every change; until the program has a set, frames to the
// conn's port go to the kernel socket.
func (c *UDPConn) applyLocal() error {
	c.localMu.Lock()
	defer c.localMu.Unlock()
	if c.res == nil {
		return nil // New is returning: open calls again
	}
	l := c.res.Local()
	c.view.Store(newLocalView(l.MAC, l.Addrs, l.Host))
	if c.prog == nil {
		return nil
	}
	return c.prog.SetLocal(xsk.Local{MAC: l.MAC, Addrs: l.Addrs})
}

// peer returns a as the conn addresses it: IPv4-mapped addresses
// unmapped, and a link-local IPv6 address with the conn's interface as its
// zone when it has none (or names the interface by its index), so that the
// kernel socket sends it out of that interface.
func (c *UDPConn) peer(a netip.AddrPort) netip.AddrPort {
	a = unmapAP(a)
	ip := a.Addr()
	if ip.Is6() && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		if z := ip.Zone(); z == "" || z == strconv.Itoa(c.ifindex) {
			return netip.AddrPortFrom(ip.WithZone(c.ifname), a.Port())
		}
	}
	return a
}

// zoned gives a link-local source read from the kernel socket its zone:
// the conn's interface, or the interface the kernel names (scope).
func (c *UDPConn) zoned(a netip.AddrPort, scope uint32) netip.AddrPort {
	z := c.ifname
	if scope != 0 && int(scope) != c.ifindex {
		if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
			z = ifi.Name
		} else {
			z = strconv.Itoa(int(scope))
		}
	}
	return netip.AddrPortFrom(a.Addr().WithZone(z), a.Port())
}

// kernelSock is the kernel UDP socket reserving one of the conn's ports.
type kernelSock struct {
	c    *net.UDPConn
	raw  syscall.RawConn
	fd   int
	port uint16
}

// defaultFramesPerQueue leaves the frame count to package xsk (0), which
// fits it to RLIMIT_MEMLOCK; it exists so that a TX share can be set
// apart from a known total: ask xsk what it would give.
func defaultFramesPerQueue(queues int, ifname string) int {
	if queues == 0 {
		n, err := nic.RXQueues(ifname)
		if err != nil || n < 1 {
			n = 1
		}
		queues = n
	}
	return xsk.DefaultFrames(queues)
}

// openKernel binds the kernel sockets to laddr's ports (and connects the
// one to raddr) and records the address the kernel chose.
func (c *UDPConn) openKernel(laddr, raddr netip.AddrPort) error {
	laddr = unmapAP(laddr)
	ports := c.cfg.Ports
	if raddr.IsValid() && ports != 1 {
		return fmt.Errorf("%w: Ports %d: a connected conn has one port", ErrInvalidConfig, ports)
	}
	if ports > 1 && int(laddr.Port())+ports-1 > 65535 {
		return fmt.Errorf("%w: Ports %d from port %d: beyond 65535", ErrInvalidConfig, ports, laddr.Port())
	}
	network := "udp"
	switch a := laddr.Addr(); {
	case !a.IsValid():
		if raddr.Addr().Is4() {
			network = "udp4"
		} else {
			network = "udp6"
		}
	case a.Is4():
		network = "udp4"
	case !a.IsUnspecified():
		network = "udp6"
	}
	if raddr.IsValid() {
		var la *net.UDPAddr
		if laddr.IsValid() {
			la = net.UDPAddrFromAddrPort(laddr)
		}
		k, err := net.DialUDP(network, la, net.UDPAddrFromAddrPort(raddr))
		if err != nil {
			return opCause(err)
		}
		if err := c.addKernel(k); err != nil {
			return err
		}
	} else if ports == 1 || laddr.Port() != 0 {
		if err := c.bindBlock(network, laddr, ports); err != nil {
			return err
		}
	} else {
		// A free block below the kernel's ephemeral range, at random.
		var err error
		for try := 0; try < 32; try++ {
			base := uint16(20000 + rand.IntN((32768-20000-ports)/ports)*ports)
			if err = c.bindBlock(network, netip.AddrPortFrom(laddr.Addr(), base), ports); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("no free block of %d ports in 20000-32767: %w", ports, err)
		}
	}
	c.ks, c.ksRaw, c.ksFD = c.kss[0].c, c.kss[0].raw, c.kss[0].fd
	c.laddr = unmapAP(c.ks.LocalAddr().(*net.UDPAddr).AddrPort())
	if la := laddr.Addr(); la.IsValid() && la.Is6() && la.IsUnspecified() {
		c.laddr = netip.AddrPortFrom(netip.IPv6Unspecified(), c.laddr.Port())
	}
	c.raddr = raddr
	return nil
}

// bindBlock binds kernel sockets to ports consecutive ports from laddr's,
// or none (and the error of the first that failed).
func (c *UDPConn) bindBlock(network string, laddr netip.AddrPort, ports int) error {
	for i := 0; i < ports; i++ {
		a := netip.AddrPortFrom(laddr.Addr(), laddr.Port()+uint16(i))
		k, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(a))
		if err == nil {
			err = c.addKernel(k)
		}
		if err != nil {
			for _, ks := range c.kss {
				ks.c.Close()
			}
			c.kss = nil
			return opCause(err)
		}
	}
	return nil
}

func (c *UDPConn) addKernel(k *net.UDPConn) error {
	raw, err := k.SyscallConn()
	if err != nil {
		k.Close()
		return err
	}
	ks := kernelSock{c: k, raw: raw, fd: -1, port: k.LocalAddr().(*net.UDPAddr).AddrPort().Port()}
	raw.Control(func(fd uintptr) {
		ks.fd = int(fd)
		// What the kernel sends for the conn never fragments either:
		// a datagram above the path MTU fails with EMSGSIZE.
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		// And it carries the conn's TTL and TOS.
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, c.cfg.TTL)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, c.cfg.TOS)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, c.cfg.TTL)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, c.cfg.TOS)
	})
	c.kss = append(c.kss, ks)
	return nil
}

// opCause returns the cause inside a *net.OpError: the caller wraps it in
// its own.
func opCause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// LocalAddr returns the local address, its port chosen.
func (c *UDPConn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.laddr) }

// LocalAddrPort returns the local address as a netip.AddrPort.
func (c *UDPConn) LocalAddrPort() netip.AddrPort { return c.laddr }

// RemoteAddr returns the peer of a connected conn (DialUDP), or nil.
func (c *UDPConn) RemoteAddr() net.Addr {
	if !c.raddr.IsValid() {
		return nil
	}
	return net.UDPAddrFromAddrPort(c.raddr)
}

// Interface returns the name of the interface the conn is on.
func (c *UDPConn) Interface() string { return c.ifname }

// SyscallConn returns the kernel UDP socket the conn holds on its
// address (see UDPConn): setting options on it (buffer sizes) affects
// only what reaches the kernel.
func (c *UDPConn) SyscallConn() (syscall.RawConn, error) {
	if c.closed.Load() {
		return nil, c.opErr("raw-conn", netip.AddrPort{}, net.ErrClosed)
	}
	return c.ksRaw, nil
}

// SetDeadline sets the read and write deadlines (see net.Conn).
func (c *UDPConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline bounds current and future reads of the conn's own
// methods: they fail with an error matching os.ErrDeadlineExceeded once t
// passed. The zero time removes the deadline. Queue readers take their
// own timeouts instead.
func (c *UDPConn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", netip.AddrPort{}, net.ErrClosed)
	}
	c.rdl.Store(unixNano(t))
	// Only a read blocked in poll needs waking (it marks itself before it
	// reads the deadline); marked as a call, so that Close does not
	// release the eventfd under the write.
	if c.rwait.Load() && c.kernel.acquire() {
		c.wake()
		c.kernel.release()
	}
	return nil
}

// SetWriteDeadline bounds current and future writes (waiting for room
// on a TX ring, or for the next hop to be resolved).
func (c *UDPConn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", netip.AddrPort{}, net.ErrClosed)
	}
	c.wdl.Store(unixNano(t))
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if n := t.UnixNano(); n > 0 {
		return n
	}
	return 1 // long past
}

// wake makes blocked reads look at the deadline and the closed flag again.
func (c *UDPConn) wake() {
	if c.wakeFD >= 0 {
		one := [8]byte{1}
		unix.Write(c.wakeFD, one[:])
	}
}

// Close releases the conn: the XDP program is detached (the traffic goes
// back to the kernel), blocked calls end with errors matching
// net.ErrClosed, and the sockets, the kernel socket and its port are
// released before Close returns. Only the UMEM of a queue whose ReadView
// views are still out stays mapped until Release. Close may be called
// from any goroutine; later calls return nil.
func (c *UDPConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		c.Detached() // remembered for Stats after Close
		c.localMu.Lock()
		c.prog = nil
		c.localMu.Unlock()
		if p := c.dev.Program(); p != nil {
			c.closeErr = p.Close()
		}
		c.wake()
		c.drainTX()
		// Closing the AF_XDP sockets ends waits on them (and waits for
		// the library's calls on them); the UMEM stays mapped.
		var wg sync.WaitGroup
		for _, q := range c.queues {
			if q.s != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q.s.Close() // an RCU grace period each: in parallel
				}()
			}
		}
		wg.Wait()
		for _, q := range c.queues {
			for q.calls.Load() != 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		c.release()
		c.closeDone.Store(true)
		c.freeUMEM()
	})
	return c.closeErr
}

// drainTXFor bounds how long Close lets the kernel send what writes left
// on the TX rings.
const drainTXFor = 100 * time.Millisecond

// drainTX gives the datagrams still on the TX rings (copy mode sends a
// budget of frames per kick) up to drainTXFor to leave, so that what a
// write accepted is not dropped with the socket. Writers still in a call
// hold the queue's TX lock; they end at Close's flag.
func (c *UDPConn) drainTX() {
	deadline := time.Now().Add(drainTXFor)
	for _, q := range c.queues {
		if q.s == nil || !q.txmu.TryLock() {
			continue
		}
		for q.s.TxPending() > 0 && time.Now().Before(deadline) && q.s.Err() == nil {
			if q.s.Complete() == 0 {
				if q.s.Kick() != nil {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		q.txmu.Unlock()
	}
}

// freeUMEM unmaps the UMEMs once the conn is closed and no queue has
// views out.
func (c *UDPConn) freeUMEM() {
	if !c.closeDone.Load() {
		return // Close calls it again when it is through
	}
	for _, q := range c.queues {
		if q.views.Load() {
			return
		}
	}
	c.unmap.Do(func() {
		if c.dev != nil {
			c.dev.Close()
		}
	})
}

// release closes what the conn holds but its AF_XDP sockets and UMEMs. It
// runs once, in Close or when open fails.
func (c *UDPConn) release() {
	c.finish.Do(func() {
		for _, ks := range c.kss {
			ks.c.Close()
		}
		if c.res != nil {
			c.res.Close()
		}
		if c.wakeFD >= 0 {
			unix.Close(c.wakeFD)
			c.wakeFD = -1
		}
	})
}

// Ways a conn is read.
const (
	readConn   = 1
	readQueues = 2
	readGroup  = 3
)

// claim makes mode the way the conn is read, unless it is read another
// way already.
func (c *UDPConn) claim(mode int32) error {
	if m := c.readers.Load(); m == mode || c.readers.CompareAndSwap(0, mode) {
		return nil
	}
	return ErrReadConflict
}

// Queues returns the conn's queues: one per RX queue bound, in queue
// order, then the reader of the kernel socket (ID KernelQueue). Their
// read methods are for one goroutine each; the first of them to be called
// makes the conn read through its Queues, and from then on the conn's own
// read methods and Group fail with ErrReadConflict (and the other way
// round). Their write methods are safe from any goroutine, whatever the
// conn is read with.
func (c *UDPConn) Queues() []*Queue {
	return append([]*Queue(nil), c.queues...)
}

// Stats returns the counters of every queue, the kernel socket's last.
// It may be called from any goroutine, also after Close: the counters are
// then those at Close, the kernel's included.
func (c *UDPConn) Stats() Stats {
	var st Stats
	for _, q := range c.queues {
		st.Queues = append(st.Queues, q.Stats())
	}
	st.Detached = c.Detached()
	return st
}

// Detached reports whether someone else detached the conn's XDP program
// (bpftool link detach, ip link set DEV xdp off, xdp-loader unload; see
// xsk.ErrDetached). The conn then goes on through its kernel socket: the
// conn's own reads and Group deliver what the kernel delivers to it,
// writes still go out through the AF_XDP sockets, and the readers of the
// AF_XDP queues (Queue.ReadView, Queue.ReadBatch) end with an error
// matching xsk.ErrDetached. It asks the kernel (one bpf syscall) unless it
// knows already, and stays true after Close.
func (c *UDPConn) Detached() bool {
	if c.detached.Load() {
		return true
	}
	c.localMu.Lock()
	p := c.prog
	c.localMu.Unlock()
	if p != nil && errors.Is(p.Err(), xsk.ErrDetached) {
		c.detached.Store(true)
	}
	return c.detached.Load()
}

// opErr wraps err the way net.UDPConn does.
func (c *UDPConn) opErr(op string, addr netip.AddrPort, err error) error {
	oe := &net.OpError{Op: op, Net: "udp", Source: net.UDPAddrFromAddrPort(c.laddr), Err: err}
	if addr.IsValid() {
		oe.Addr = net.UDPAddrFromAddrPort(addr)
	} else if c.raddr.IsValid() {
		oe.Addr = net.UDPAddrFromAddrPort(c.raddr)
	}
	return oe
}

// ReadFrom reads one datagram into p (cut to len(p): the rest is lost)
// and returns its length and source, as net.UDPConn.ReadFrom.
func (c *UDPConn) ReadFrom(p []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromUDPAddrPort(p)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// ReadFromUDPAddrPort is ReadFrom returning the source as a
// netip.AddrPort (IPv4 sources unmapped, also on a dual-stack conn).
func (c *UDPConn) ReadFromUDPAddrPort(p []byte) (int, netip.AddrPort, error) {
	var m [1]Message
	m[0].Buf = p
	if _, err := c.readBatch(m[:], false); err != nil {
		return 0, netip.AddrPort{}, err
	}
	return m[0].N, m[0].Addr, nil
}

// Read reads one datagram from the peer of a connected conn.
func (c *UDPConn) Read(p []byte) (int, error) {
	n, _, err := c.ReadFromUDPAddrPort(p)
	return n, err
}

// ReadBatch reads up to len(msgs) datagrams, copying each into its
// message's Buf, and blocks until at least one arrived, the read deadline
// passed or the conn was closed. With Config.GRO, consecutive datagrams of
// one flow share a message (SegSize). It does not allocate.
func (c *UDPConn) ReadBatch(msgs []Message) (int, error) {
	return c.readBatch(msgs, c.cfg.GRO)
}

func (c *UDPConn) readBatch(msgs []Message, gro bool) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if err := c.claim(readConn); err != nil {
		return 0, c.opErr("read", netip.AddrPort{}, err)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	// The kernel queue's reference keeps the descriptors the wait polls
	// (the kernel socket's, the wake eventfd) open until the read ends.
	if !c.kernel.acquire() {
		return 0, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
	}
	defer c.kernel.release()
	for {
		if c.closed.Load() {
			return 0, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
		}
		n := 0
		for i := 0; i < len(c.queues) && n < len(msgs); i++ {
			q := c.queues[(c.rturn+i)%len(c.queues)]
			if q == c.kernel && !c.kready && c.rturn%kernelEvery != 0 {
				// The kernel socket rarely has datagrams: look only when
				// poll said so, and now and then.
				continue
			}
			k, err := q.copyOut(msgs[n:], gro)
			if q == c.kernel {
				c.kready = k > 0
			}
			n += k
			if err != nil && n == 0 {
				return 0, c.opErr("read", netip.AddrPort{}, err)
			}
		}
		c.rturn++
		if n > 0 {
			c.rnap.Received(n)
			return n, nil
		}
		if err := c.waitRead(); err != nil {
			return 0, c.opErr("read", netip.AddrPort{}, err)
		}
	}
}

// kernelEvery is how often (in read rounds) the conn's reads look at the
// kernel socket without poll having said it is readable.
const kernelEvery = 64

// readSlice bounds one poll of a blocked read, so that a device that went
// away is noticed (its sockets' poll never reports it).
const readSlice = 250 * time.Millisecond

// waitRead blocks until a socket or the kernel socket may have a datagram,
// the deadline passes, the conn is closed or woken, or a slice passed.
func (c *UDPConn) waitRead() error {
	c.rwait.Store(true)
	defer c.rwait.Store(false)
	timeout := readSlice
	if dl := c.rdl.Load(); dl != 0 {
		left := time.Duration(dl - time.Now().UnixNano())
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		timeout = min(timeout, left)
	}
	if nap := c.rnap.Idle(); nap > 0 {
		// Datagrams are flowing fast: nap on a timer, off the sockets'
		// wait queues (see Config.RxNap), and look again.
		w := [1]unix.PollFd{{Fd: int32(c.wakeFD), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(min(nap, timeout)))
		unix.Ppoll(w[:], &ts, nil)
		return nil
	}
	fds := c.rfds
	n := 0
	for _, q := range c.queues[:len(c.queues)-1] {
		fds[n] = unix.PollFd{Fd: int32(q.fd), Events: unix.POLLIN}
		n++
	}
	for _, ks := range c.kss {
		fds[n] = unix.PollFd{Fd: int32(ks.fd), Events: unix.POLLIN}
		n++
	}
	fds[n] = unix.PollFd{Fd: int32(c.wakeFD), Events: unix.POLLIN}
	ts := unix.NsecToTimespec(int64(timeout))
	k, err := unix.Ppoll(fds, &ts, nil)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("poll: %w", err)
	}
	if k > 0 {
		for _, f := range fds[len(c.queues)-1 : n] {
			if f.Revents != 0 {
				c.kready = true // a kernel socket
			}
		}
	}
	if fds[n].Revents != 0 && !c.closed.Load() {
		// A deadline changed: take the wake-up (after Close it stays, for
		// every waiter to see).
		var b [8]byte
		unix.Read(c.wakeFD, b[:])
	}
	if k == 0 {
		// Nothing in a whole slice: is a device gone?
		for _, q := range c.queues {
			if q.s == nil {
				continue
			}
			if err := q.s.Err(); err != nil && !errors.Is(err, xsk.ErrClosed) {
				return err
			}
		}
	}
	return nil
}

// WriteTo sends p to addr, as net.UDPConn.WriteTo.
func (c *UDPConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, c.opErr("write", netip.AddrPort{}, fmt.Errorf("%w: address %v is not a *net.UDPAddr", ErrInvalidConfig, addr))
	}
	return c.WriteToUDPAddrPort(p, ua.AddrPort())
}

// WriteToUDPAddrPort sends p to addr.
func (c *UDPConn) WriteToUDPAddrPort(p []byte, addr netip.AddrPort) (int, error) {
	if c.raddr.IsValid() {
		return 0, c.opErr("write", addr, syscall.EISCONN)
	}
	m := [1]Message{{Buf: p, N: len(p), Addr: addr}}
	if _, err := c.WriteBatch(m[:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Write sends p to the peer of a connected conn.
func (c *UDPConn) Write(p []byte) (int, error) {
	if !c.raddr.IsValid() {
		return 0, c.opErr("write", netip.AddrPort{}, syscall.EDESTADDRREQ)
	}
	m := [1]Message{{Buf: p, N: len(p)}}
	if _, err := c.WriteBatch(m[:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteBatch sends msgs in order (Buf[:N] to Addr, cut into datagrams of
// SegSize bytes when it is set) and returns how many messages were sent.
// Messages to one destination leave through one queue, in order. It
// blocks while the TX rings are full, until the write deadline.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) {
	sent := 0
	for sent < len(msgs) {
		q := c.txQueue(c.dstOf(&msgs[sent]))
		j := sent + 1
		for j < len(msgs) && c.txQueue(c.dstOf(&msgs[j])) == q {
			j++
		}
		n, err := q.WriteBatch(msgs[sent:j])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

func (c *UDPConn) dstOf(m *Message) netip.AddrPort {
	if c.raddr.IsValid() {
		return c.raddr
	}
	return m.Addr
}

// txQueue picks the queue whose TX ring carries datagrams to dst: a hash
// of the destination, so one flow always leaves through one ring.
func (c *UDPConn) txQueue(dst netip.AddrPort) *Queue {
	n := len(c.queues) - 1 // AF_XDP queues
	if n <= 1 {
		return c.queues[0]
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	a := dst.Addr().As16()
	h.Write(a[:])
	return c.queues[int(h.Sum64()%uint64(n))]
}

func udpAddr(a netip.AddrPort) net.Addr {
	if !a.IsValid() {
		return nil
	}
	return net.UDPAddrFromAddrPort(a)
}

// Route returns the source address and path MTU of datagrams to dst, as
// a write would use them: the conn's address (or, for an unspecified one,
// the kernel route's preferred source) and the route's MTU (or the
// interface's). It resolves the next hop as a write would, waiting for it
// until ctx ends or Config.ResolveTimeout passes; its errors are a
// write's (ENETUNREACH, EHOSTUNREACH).
func (c *UDPConn) Route(ctx context.Context, dst netip.Addr) (src netip.Addr, mtu int, err error) {
	if c.closed.Load() {
		return netip.Addr{}, 0, c.opErr("route", netip.AddrPort{}, net.ErrClosed)
	}
	dst = dst.Unmap()
	hop, err := c.res.Resolve(ctx, dst)
	if err != nil {
		return netip.Addr{}, 0, c.opErr("route", netip.AddrPortFrom(dst, 0), err)
	}
	src = c.laddr.Addr()
	if src.IsUnspecified() {
		src = hop.Src
	}
	return src, hop.MTU, nil
}
