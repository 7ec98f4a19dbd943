//go:build linux

package asavieplane

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/xsk"
)

// Listen opens asavie sockets on every queue of Iface for UDP to local's
// port.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	c := &asavieConn{local: local, onClose: d.OnClose}
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		c.mac = ifi.HardwareAddr
		if c.res, err = newResolver(ifi); err != nil {
			return err
		}
		if c.set, err = d.openAsavie(ifi, []xsk.Rule{xsk.UDPPort(local.Port())}); err != nil {
			c.res.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("asavie listen %s %v: %w", d.Iface, local, err)
	}
	for _, a := range c.set.socks {
		c.fds = append(c.fds, unix.PollFd{Fd: int32(a.fd)})
	}
	return c, nil
}

// asavieConn is a server endpoint: datagrams from every queue's socket,
// replies through queue 0's.
type asavieConn struct {
	set   *asavieSet
	local netip.AddrPort
	mac   net.HardwareAddr
	res   *nexthop.Resolver // the next hops of replies
	macs  []net.HardwareAddr
	fds   []unix.PollFd
	turn  int

	mu       sync.Mutex
	deadline time.Time
	closed   atomic.Bool
	// life keeps Close from unmapping the sockets while a call, or a
	// queue reader's view, uses them.
	life    sync.RWMutex
	onClose func([]plane.QueueCount)
	notUDP  atomic.Uint64
}

func (c *asavieConn) LocalAddr() netip.AddrPort { return c.local }

func (c *asavieConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// ReadBatch takes datagrams from the sockets in turn, copying each UDP
// payload into msgs, and waits in poll on all of them when none has any.
func (c *asavieConn) ReadBatch(msgs []plane.Message) (int, error) {
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		n := 0
		socks := c.set.socks
		for i := 0; i < len(socks) && n < len(msgs); i++ {
			a := socks[(c.turn+i)%len(socks)]
			a.mu.Lock()
			if a.next == len(a.rx) {
				a.receive(min(a.batch, len(msgs)-n))
			}
			for ; a.next < len(a.rx) && n < len(msgs); a.next++ {
				d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
				ok = ok && d.dst.Port() == c.local.Port()
				if !ok {
					c.notUDP.Add(1)
					continue
				}
				msgs[n].N = copy(msgs[n].Buf, d.payload)
				msgs[n].Addr = d.src
				n++
			}
			a.mu.Unlock()
		}
		c.turn++
		c.life.RUnlock()
		if n > 0 {
			return n, nil
		}
		c.mu.Lock()
		deadline := c.deadline
		c.mu.Unlock()
		wait, err := readWait(deadline, 20*time.Millisecond)
		if err != nil {
			return 0, err
		}
		if err := pollIn(c.fds, wait); err != nil {
			if c.closed.Load() {
				return 0, net.ErrClosed
			}
			return 0, fmt.Errorf("asavie read: poll: %w", err)
		}
	}
}

// QueueReaders returns a reader per RX queue's socket, so that the engine
// reads asavie's queues in parallel and in place, as it reads
// xskplane.DataPlane's.
func (c *asavieConn) QueueReaders() []plane.QueueReader {
	qs := make([]plane.QueueReader, len(c.set.socks))
	for i, a := range c.set.socks {
		qs[i] = &asavieQueueReader{c: c, a: a}
	}
	return qs
}

// asavieQueueReader reads one queue's socket in place. While it holds
// frames it holds c.life for reading, so Close waits until they are given
// back.
type asavieQueueReader struct {
	c    *asavieConn
	a    *asavieSock
	held bool
	fds  [1]unix.PollFd
}

func (q *asavieQueueReader) Queue() int { return q.a.queue }

func (q *asavieQueueReader) Done() {
	if q.held {
		q.held = false
		q.c.life.RUnlock()
	}
}

func (q *asavieQueueReader) ReadView(msgs []plane.Message, timeout time.Duration) (int, error) {
	q.Done()
	c, a := q.c, q.a
	var deadline time.Time
	for {
		c.life.RLock()
		if c.closed.Load() {
			c.life.RUnlock()
			return 0, net.ErrClosed
		}
		a.mu.Lock()
		if a.next == len(a.rx) {
			a.receive(a.batch)
		}
		n := 0
		for ; a.next < len(a.rx) && n < len(msgs); a.next++ {
			d, ok := parseFrame(a.s.GetFrame(a.rx[a.next]))
			ok = ok && d.dst.Port() == c.local.Port()
			if !ok {
				c.notUDP.Add(1)
				continue
			}
			msgs[n] = plane.Message{Buf: d.payload, N: len(d.payload), Addr: d.src}
			n++
		}
		a.mu.Unlock()
		if n > 0 {
			q.held = true
			return n, nil
		}
		c.life.RUnlock()
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, nil
		}
		q.fds[0].Fd = int32(a.fd)
		if err := pollIn(q.fds[:], min(left, 20*time.Millisecond)); err != nil {
			if c.closed.Load() {
				return 0, net.ErrClosed
			}
			return 0, fmt.Errorf("asavie read queue %d: poll: %w", a.queue, err)
		}
	}
}

// WriteBatch builds each datagram in a UMEM frame of queue 0's socket and
// transmits them.
func (c *asavieConn) WriteBatch(msgs []plane.Message) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	// The next hops first (from the resolver's cache; a missing one is
	// resolved by the kernel), before queue 0's socket is taken from its
	// reader.
	c.macs = c.macs[:0]
	for _, m := range msgs {
		hop, err := asavieHop(c.res, m.Addr.Addr())
		if err != nil {
			return 0, fmt.Errorf("asavie write to %v: %w", m.Addr, err)
		}
		c.macs = append(c.macs, hop.MAC)
	}
	a := c.set.socks[0]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.send(len(msgs), c.set.frameSize, func(i int, frame []byte) (int, error) {
		m := msgs[i]
		return buildFrame(frame, c.mac, c.macs[i], c.local, m.Addr, m.Buf[:m.N])
	})
}

func (c *asavieConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.life.Lock()
	defer c.life.Unlock()
	if c.onClose != nil {
		c.onClose(c.set.counts())
	}
	defer c.res.Close()
	return c.set.close()
}
