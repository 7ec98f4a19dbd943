//go:build linux

package asavieplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/xsk"
)

// asaviePortBlock is what the asavie client's streams share apart from
// the sockets: the interface's MAC and the block of source ports its XDP
// filter takes, handed out one per stream.
type asaviePortBlock struct {
	iface string
	mac   net.HardwareAddr
	base  uint16
	next  int
}

// newAsaviePortBlock picks a block of asaviePorts ports at random between
// asaviePortLow and asaviePortHigh.
func newAsaviePortBlock(iface string) asaviePortBlock {
	return asaviePortBlock{iface: iface,
		base: uint16(asaviePortLow + rand.IntN((asaviePortHigh-asaviePortLow)/asaviePorts)*asaviePorts)}
}

// filter is the XDP rule that takes UDP to the block.
func (b *asaviePortBlock) filter() []xsk.Rule {
	return []xsk.Rule{{Protocol: unix.IPPROTO_UDP, DstPortMin: b.base, DstPortMax: b.base + asaviePorts - 1}}
}

// port gives the next stream from src towards remote its port and the
// socket (TX queue, of queues) it sends from: the block's next port, or
// the plane.Placer's, whose queue it then sends from too (where a device has no
// RSS, as veth, the peer receives on the queue a frame was sent from).
// inUse reports ports streams hold.
func (b *asaviePortBlock) port(src netip.Addr, remote netip.AddrPort, queues int, placer plane.Placer, inUse func(uint16) bool) (port uint16, txq int, err error) {
	if b.next >= asaviePorts {
		return 0, 0, fmt.Errorf("all %d client ports in use: %w", asaviePorts, errs.ErrNotSupported)
	}
	port, txq = b.base+uint16(b.next), b.next%queues
	if placer != nil {
		p, q, err := placer.Port(src, remote, b.base, b.base+asaviePorts-1)
		if err != nil {
			return 0, 0, err
		}
		if inUse(p) {
			return 0, 0, fmt.Errorf("placed port %d is in use", p)
		}
		port, txq = p, int(q)%queues
	}
	b.next++
	return port, txq, nil
}

// asavieShared is the sockets a client's streams share, as xskShared is
// for xskplane.DataPlane: a block of source ports, each stream one of them.
type asavieShared struct {
	asaviePortBlock
	mu      sync.Mutex
	set     *asavieSet
	res     *nexthop.Resolver // the server's next hop
	fds     []unix.PollFd
	conns   map[uint16]*asavieClientConn
	stray   uint64
	refs    int
	closed  bool
	onClose func([]plane.QueueCount)
}

// Dial gives a client stream its own source port on the shared sockets,
// opening them on first use.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.client == nil {
		sh, err := d.openShared()
		if err != nil {
			return nil, fmt.Errorf("asavie dial %v: %w", remote, err)
		}
		d.client = sh
	}
	sh := d.client
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, err := d.dial(sh, remote)
	if err != nil && sh.refs == 0 {
		// No stream uses the sockets this call opened: close them, so
		// that no XDP program stays attached.
		sh.closed = true
		d.client = nil
		sh.close()
	}
	if err != nil {
		return nil, fmt.Errorf("asavie dial %v: %w", remote, err)
	}
	return c, nil
}

// dial adds a stream to sh, whose lock the caller holds.
func (d *DataPlane) dial(sh *asavieShared, remote netip.AddrPort) (plane.PacketConn, error) {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	// The server's next hop and the source address towards it: from the
	// kernel's route and neighbour tables, resolved through the kernel
	// when it has no entry yet.
	hop, err := sh.res.Resolve(context.Background(), remote.Addr())
	if err != nil {
		return nil, err
	}
	port, txq, err := sh.port(hop.Src, remote, len(sh.set.socks), d.Placer, func(p uint16) bool { return sh.conns[p] != nil })
	if err != nil {
		return nil, err
	}
	c := &asavieClientConn{d: d, sh: sh, local: netip.AddrPortFrom(hop.Src, port),
		remote: remote, txq: txq, fds: append([]unix.PollFd(nil), sh.fds...)}
	sh.refs++
	sh.conns[port] = c
	return c, nil
}

func (d *DataPlane) openShared() (*asavieShared, error) {
	sh := &asavieShared{asaviePortBlock: newAsaviePortBlock(d.Iface), conns: map[uint16]*asavieClientConn{}, onClose: d.OnClose}
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		sh.mac = ifi.HardwareAddr
		if sh.res, err = newResolver(ifi); err != nil {
			return err
		}
		if sh.set, err = d.openAsavie(ifi, sh.filter()); err != nil {
			sh.res.Close()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, a := range sh.set.socks {
		sh.fds = append(sh.fds, unix.PollFd{Fd: int32(a.fd)})
	}
	return sh, nil
}

// close closes the sockets and the resolver. No stream may use them.
func (sh *asavieShared) close() error {
	defer sh.res.Close()
	return sh.set.close()
}

// asavieClientConn is one client stream: a source port on the shared
// sockets, sending through the socket of queue txq, receiving what is
// routed to its port.
type asavieClientConn struct {
	d        *DataPlane
	sh       *asavieShared
	local    netip.AddrPort
	remote   netip.AddrPort
	txq      int
	in       link.Inbox
	fds      []unix.PollFd // the shared sockets', polled by this stream's reader
	deadline time.Time
	closed   bool
}

func (c *asavieClientConn) LocalAddr() netip.AddrPort { return c.local }

func (c *asavieClientConn) SetReadDeadline(t time.Time) error {
	c.sh.mu.Lock()
	c.deadline = t
	c.sh.mu.Unlock()
	return nil
}

// pump receives from every socket and routes datagrams to their streams.
// The caller holds sh.mu.
func (sh *asavieShared) pump() {
	for _, a := range sh.set.socks {
		a.mu.Lock()
		if a.next == len(a.rx) {
			a.receive(a.batch)
		}
		for ; a.next < len(a.rx); a.next++ {
			d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
			if !ok {
				sh.stray++
				continue
			}
			c := sh.conns[d.dst.Port()]
			if c == nil {
				sh.stray++
				continue
			}
			c.in.Push(d.src, d.payload)
		}
		a.mu.Unlock()
	}
}

func (c *asavieClientConn) ReadBatch(msgs []plane.Message) (int, error) {
	sh := c.sh
	for {
		sh.mu.Lock()
		if c.closed || sh.closed {
			sh.mu.Unlock()
			return 0, net.ErrClosed
		}
		if c.in.Len() == 0 {
			sh.pump()
		}
		n := c.in.Pop(msgs)
		deadline := c.deadline
		sh.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		wait, err := readWait(deadline, 5*time.Millisecond) // other streams' readers may take our frames
		if err != nil {
			return 0, err
		}
		if err := pollIn(c.fds, wait); err != nil {
			return 0, fmt.Errorf("asavie read: poll: %w", err)
		}
	}
}

func (c *asavieClientConn) WriteBatch(msgs []plane.Message) (int, error) {
	sh := c.sh
	// The next hop from the resolver's cache (the kernel's, when the
	// tables changed), before the shared sockets are taken.
	hop, err := asavieHop(sh.res, c.remote.Addr())
	if err != nil {
		return 0, fmt.Errorf("asavie write to %v: %w", c.remote, err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed || sh.closed {
		return 0, net.ErrClosed
	}
	a := sh.set.socks[c.txq]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.send(len(msgs), sh.set.frameSize, func(i int, frame []byte) (int, error) {
		m := msgs[i]
		return buildFrame(frame, sh.mac, hop.MAC, c.local, c.remote, m.Buf[:m.N])
	})
}

// Close releases the stream's port; the last one closes the sockets.
func (c *asavieClientConn) Close() error {
	c.d.cmu.Lock()
	defer c.d.cmu.Unlock()
	sh := c.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	delete(sh.conns, c.local.Port())
	sh.refs--
	if sh.refs > 0 {
		return nil
	}
	sh.closed = true
	if c.d.client == sh {
		c.d.client = nil
	}
	if sh.onClose != nil {
		sh.onClose(sh.set.counts())
	}
	return sh.close()
}
