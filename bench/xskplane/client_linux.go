//go:build linux

package xskplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/xdpnet"
)

// clientPorts is the size of a client's block of source ports: one
// xdpnet conn takes them all (xdpnet picks a free block below Linux's
// ephemeral range and reserves every port with a kernel socket), and each
// stream sends from one.
const clientPorts = 256

// pumpSlice bounds how long a client stream reads the shared conn for the
// others before it looks at its own link.Inbox and deadline again.
const pumpSlice = 5 * time.Millisecond

// xskShared is what a client's streams share: one xdpnet conn on a block
// of ports.
type xskShared struct {
	conn   *xdpnet.UDPConn // opened by the first stream
	is4    bool            // the conn's family
	queues []*xdpnet.Queue // its queues: the AF_XDP ones, then the kernel's
	base   uint16          // its first port
	next   int             // streams dialled: the port and queue of the next

	mu     sync.Mutex // the fields below, and the streams' inboxes
	conns  map[uint16]*xskClientConn
	stray  uint64 // datagrams to a port no stream has
	refs   int
	closed bool

	// rmu is held by the stream that reads the conn for all of them.
	rmu   sync.Mutex
	rmsgs []xdpnet.Message
	rdl   time.Time // the conn's read deadline as last set
}

// Dial gives a client stream its own source port on the shared conn,
// opening it on first use. The server's next hop is resolved first, so
// that a server nobody answers for fails the dial.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	d.cmu.Lock()
	defer d.cmu.Unlock()
	sh := d.client
	if sh == nil {
		sh = &xskShared{conns: map[uint16]*xskClientConn{}}
	}
	c, err := d.dial(sh, remote)
	if err != nil {
		if sh.refs == 0 {
			// No stream uses what this call opened: close it, so that no
			// XDP program stays attached.
			sh.close(nil)
			d.client = nil
		}
		return nil, fmt.Errorf("xsk dial %v: %w", remote, err)
	}
	d.client = sh
	return c, nil
}

// dial adds a stream towards remote to sh. The caller holds d.cmu.
func (d *DataPlane) dial(sh *xskShared, remote netip.AddrPort) (*xskClientConn, error) {
	if sh.conn == nil {
		if err := d.openShared(sh, remote.Addr().Is4()); err != nil {
			return nil, err
		}
	} else if sh.is4 != remote.Addr().Is4() {
		return nil, fmt.Errorf("the client's streams are all of one address family: %w", errs.ErrNotSupported)
	}
	// The conn resolves the server's next hop now, so that the stream's
	// first datagrams leave through its AF_XDP queue (not the kernel
	// socket a write falls back to while a hop is unknown), and a server
	// nobody answers for fails the dial.
	src, _, err := sh.conn.Route(context.Background(), remote.Addr())
	if err != nil {
		return nil, err
	}
	if sh.next >= clientPorts {
		return nil, fmt.Errorf("all %d client ports in use: %w", clientPorts, errs.ErrNotSupported)
	}
	nq := len(sh.queues) - 1 // the AF_XDP queues
	port, txq := sh.base+uint16(sh.next), sh.next%nq
	if d.Placer != nil {
		// Where a device has no RSS, as veth, the peer receives on the
		// queue a frame was sent from: send from the placed queue too.
		p, q, err := d.Placer.Port(src, remote, sh.base, sh.base+clientPorts-1)
		if err != nil {
			return nil, err
		}
		port, txq = p, int(q)%nq
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.conns[port] != nil {
		return nil, fmt.Errorf("port %d is in use", port)
	}
	sh.next++
	c := &xskClientConn{d: d, sh: sh, local: netip.AddrPortFrom(src, port), remote: remote, tx: sh.queues[txq]}
	sh.refs++
	sh.conns[port] = c
	return c, nil
}

// openShared opens sh's conn: a block of clientPorts ports on the
// unspecified address of the family, every queue of Iface (or
// Config.Queues).
func (d *DataPlane) openShared(sh *xskShared, is4 bool) error {
	unspec := netip.IPv6Unspecified()
	if is4 {
		unspec = netip.IPv4Unspecified()
	}
	cfg := d.netConfig()
	cfg.Ports = clientPorts
	err := link.Run(d.Do, func() (err error) {
		sh.conn, err = xdpnet.ListenUDP(d.Iface, netip.AddrPortFrom(unspec, 0), cfg)
		return err
	})
	if err != nil {
		return err
	}
	sh.is4 = is4
	sh.queues = sh.conn.Queues()
	sh.base = sh.conn.LocalAddrPort().Port()
	sh.rmsgs = make([]xdpnet.Message, plane.BatchSize)
	for i := range sh.rmsgs {
		// The kernel socket's datagrams may be reassembled ones.
		sh.rmsgs[i].Buf = make([]byte, 65536)
	}
	return nil
}

// close closes what sh holds, reporting the queues' counts to onClose
// first. No stream may use it.
func (sh *xskShared) close(onClose func([]plane.QueueCount)) error {
	var err error
	if sh.conn != nil {
		drainTX(sh.queues)
		if onClose != nil {
			var qs []plane.QueueCount
			for _, st := range sh.conn.Stats().Queues {
				if st.Queue != xdpnet.KernelQueue {
					qs = append(qs, queueCount(st))
				}
			}
			onClose(qs)
		}
		err = sh.conn.Close()
	}
	return err
}

// xskClientConn is one stream: a source port of the shared conn, sending
// through the queue tx (on veth, the peer's RX queue), receiving what is
// routed to its port.
type xskClientConn struct {
	d        *DataPlane
	sh       *xskShared
	local    netip.AddrPort
	remote   netip.AddrPort
	tx       *xdpnet.Queue
	wmsgs    []xdpnet.Message
	in       link.Inbox // under sh.mu
	deadline readDeadline
	closed   atomic.Bool
}

func (c *xskClientConn) LocalAddr() netip.AddrPort { return c.local }

func (c *xskClientConn) SetReadDeadline(t time.Time) error {
	c.deadline.set(t)
	return nil
}

// ReadBatch returns what is in the stream's link.Inbox. When it is empty, the
// stream reads the shared conn for every stream (one at a time), routing
// each datagram to its port's link.Inbox, in slices of pumpSlice, until its
// own datagrams come or its deadline passes.
func (c *xskClientConn) ReadBatch(msgs []plane.Message) (int, error) {
	sh := c.sh
	for {
		n, err := c.pop(msgs)
		if n > 0 || err != nil {
			return n, err
		}
		now := time.Now()
		slice, err := c.deadline.bound(now, pumpSlice)
		if err != nil {
			return 0, err
		}
		want := now.Add(slice)
		sh.rmu.Lock()
		// Another stream may have read ours meanwhile.
		if n, err := c.pop(msgs); n > 0 || err != nil {
			sh.rmu.Unlock()
			return n, err
		}
		// The conn's deadline is set only when it is not already within
		// the slice: a change of deadline costs a system call.
		if !sh.rdl.After(now) || sh.rdl.After(want) {
			sh.conn.SetReadDeadline(want)
			sh.rdl = want
		}
		k, err := sh.conn.ReadBatch(sh.rmsgs)
		sh.mu.Lock()
		for i := 0; i < k; i++ {
			m := &sh.rmsgs[i]
			if to := sh.conns[m.LocalPort]; to != nil {
				to.in.Push(m.Addr, m.Buf[:m.N])
			} else {
				sh.stray++
			}
		}
		sh.mu.Unlock()
		sh.rmu.Unlock()
		switch {
		case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, net.ErrClosed):
			return 0, net.ErrClosed
		default:
			return 0, fmt.Errorf("xsk read: %w", err)
		}
	}
}

// pop takes what the stream's link.Inbox holds.
func (c *xskClientConn) pop(msgs []plane.Message) (int, error) {
	sh := c.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed.Load() || sh.closed {
		return 0, net.ErrClosed
	}
	return c.in.Pop(msgs), nil
}

// WriteBatch sends msgs to the server from the stream's port, through its
// queue's TX ring. Like xskConn.WriteBatch, it waits while the ring is
// full rather than return plane.ErrBackpressure.
func (c *xskClientConn) WriteBatch(msgs []plane.Message) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	c.wmsgs = toNetMessages(c.wmsgs, msgs, c.remote, c.local.Port())
	n, err := c.tx.WriteBatch(c.wmsgs)
	if err != nil {
		return n, fmt.Errorf("xsk write: %w", err)
	}
	return n, nil
}

// Close releases the stream's port; the last one closes the shared conn.
func (c *xskClientConn) Close() error {
	d, sh := c.d, c.sh
	d.cmu.Lock()
	defer d.cmu.Unlock()
	sh.mu.Lock()
	if c.closed.Swap(true) {
		sh.mu.Unlock()
		return nil
	}
	delete(sh.conns, c.local.Port())
	sh.refs--
	last := sh.refs == 0
	if last {
		sh.closed = true
		if d.client == sh {
			d.client = nil
		}
	}
	sh.mu.Unlock()
	if !last {
		return nil
	}
	return sh.close(d.OnClose)
}
