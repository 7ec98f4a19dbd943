//go:build linux

package xdpnet

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/nexthop"
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
	queues     []*Queue    // the AF_XDP queues, then the kernel's
	xqs        []*xskQueue // the AF_XDP queues' sockets
	kq         *kernelQueue
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
	rgro   bool        // the read under way merges datagrams (under rmu)
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
	c.parser = newRXParser(c.laddr.Addr(), c.laddr.Port(), cfg.Ports, cfg.RXChecksum)
	c.parser.view, c.parser.zone = &c.view, ifname
	c.copyParser = c.parser
	c.copyParser.deferSum = true
	xc := c.xskConfig()
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
		x := newXSKQueue(c, s)
		c.xqs = append(c.xqs, x)
		c.queues = append(c.queues, x.q)
	}
	c.kq = newKernelQueue(c)
	c.kernel = c.kq.q
	c.queues = append(c.queues, c.kernel)
	c.rnap = xsk.NewNapper(cfg.RXNap, c.dev.Sockets()...)
	c.rfds = make([]unix.PollFd, len(c.queues)+len(c.kss))
	return c, nil
}

// xskConfig is the conn's sockets and XDP program: one rule, which takes
// only datagrams to this host as the kernel would (to the interface's MAC
// and one of its addresses, Rule.Local) and to the conn's ports.
func (c *UDPConn) xskConfig() xsk.Config {
	cfg := c.cfg
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
		Socket:  xsk.SocketConfig{Bind: cfg.Bind, TXBudget: max(cfg.BatchSize, 64)}, // the readers nap themselves (Config.RXNap)
		UMEM:    xsk.UMEMConfig{NumFrames: cfg.FramesPerQueue},
	}
	if cfg.TXChecksum == TXChecksumOffload {
		xc.UMEM.TXMetadata = true
		xc.UMEM.TXSoftwareChecksum = true
	}
	// A quarter of each socket's frames are for sending; xsk picks how
	// many frames (Config.FramesPerQueue, or what fits RLIMIT_MEMLOCK).
	xc.Socket.TXShare = 0.25
	return xc
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

// Info says how the conn is bound: its interface, the RX queues with an
// AF_XDP socket, whether the kernel granted them zero-copy, and whether
// the XDP program runs in the driver or on the generic (skb) path. A
// program that prints when it is ready has it all here.
func (c *UDPConn) Info() Info {
	in := Info{Interface: c.ifname, ZeroCopy: len(c.xqs) > 0}
	for _, x := range c.xqs {
		in.Queues = append(in.Queues, x.q.id)
		in.ZeroCopy = in.ZeroCopy && x.s.ZeroCopy()
	}
	if p := c.dev.Program(); p != nil {
		in.Attach = p.Mode()
	}
	return in
}

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

func udpAddr(a netip.AddrPort) net.Addr {
	if !a.IsValid() {
		return nil
	}
	return net.UDPAddrFromAddrPort(a)
}
