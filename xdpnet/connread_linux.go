//go:build linux

package xdpnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/xsk"
)

// The conn's own reads: every queue, the kernel socket's too, one
// caller at a time (rmu).

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
	c.rgro = gro
	n, err := readLoop((*connReading)(c), msgs, -1) // waitRead keeps the deadline
	if err != nil {
		return 0, c.opErr("read", netip.AddrPort{}, err)
	}
	return n, nil
}

// connReading is the conn's own read, for readLoop: every queue in turn,
// the kernel socket now and then, and one wait on all of them.
type connReading UDPConn

func (r *connReading) try(msgs []Message) (int, error) {
	c := (*UDPConn)(r)
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	n := 0
	for i := 0; i < len(c.queues) && n < len(msgs); i++ {
		q := c.queues[(c.rturn+i)%len(c.queues)]
		if q == c.kernel && !c.kready && c.rturn%kernelEvery != 0 {
			// The kernel socket rarely has datagrams: look only when
			// poll said so, and now and then.
			continue
		}
		if !q.acquire() {
			return 0, net.ErrClosed
		}
		k, err := q.io.copyOut(msgs[n:], c.rgro)
		q.release()
		if q == c.kernel {
			c.kready = k > 0
		}
		n += k
		if err != nil && n == 0 {
			return 0, err
		}
	}
	c.rturn++
	if n > 0 {
		c.rnap.Received(n)
	}
	return n, nil
}

func (r *connReading) wait(time.Duration) error { return (*UDPConn)(r).waitRead() }

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
		// wait queues (see Config.RXNap), and look again.
		w := [1]unix.PollFd{{Fd: int32(c.wakeFD), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(min(nap, timeout)))
		unix.Ppoll(w[:], &ts, nil)
		return nil
	}
	fds := c.rfds
	n := 0
	for _, x := range c.xqs {
		fds[n] = unix.PollFd{Fd: int32(x.fd), Events: unix.POLLIN}
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
		for _, x := range c.xqs {
			if err := x.s.Err(); err != nil && !errors.Is(err, xsk.ErrClosed) {
				return err
			}
		}
	}
	return nil
}
