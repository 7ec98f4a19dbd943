//go:build linux

package bench

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/xsk"
)

// Client ports: a block below Linux's default ephemeral range
// (32768-60999), so the XDP filter does not take the kernel's own sockets'
// replies.
const (
	clientPortLow  = 20000
	clientPortHigh = 32000
	clientPorts    = 256
	inboxLimit     = 8192 // datagrams queued for a stream before drops
)

// xskShared is the sockets a client's streams share. Its mutex serialises
// them: several streams' goroutines use one set of sockets.
type xskShared struct {
	portBlock
	mu     sync.Mutex
	dev    *xsk.Device
	socks  []*xsk.Socket
	rxb    []*xsk.Batch
	txb    []*xsk.Batch
	conns  map[uint16]*xskClientConn
	stray  uint64 // datagrams to a port no stream has
	refs   int
	closed bool
}

// Dial gives a client stream its own source port on the shared sockets,
// opening them on first use.
func (d *XSKDataPlane) Dial(remote netip.AddrPort) (PacketConn, error) {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.client == nil {
		sh, err := d.openShared()
		if err != nil {
			return nil, fmt.Errorf("xsk dial %v: %w", remote, err)
		}
		d.client = sh
	}
	sh := d.client
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, err := d.dial(sh, remote)
	if err != nil && sh.refs == 0 {
		// No stream uses the sockets this call opened: detach them.
		sh.closed = true
		d.client = nil
		sh.dev.Close()
	}
	return c, err
}

// dial adds a stream to sh, whose lock the caller holds.
func (d *XSKDataPlane) dial(sh *xskShared, remote netip.AddrPort) (PacketConn, error) {
	local, txq, mac, err := sh.stream(remote, len(sh.socks), d.Placer, func(p uint16) bool { return sh.conns[p] != nil }, d.run)
	if err != nil {
		return nil, err
	}
	c := &xskClientConn{d: d, sh: sh, local: local, remote: netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port()), txq: txq, dstMAC: mac}
	for _, s := range sh.socks {
		c.fds = append(c.fds, unix.PollFd{Fd: int32(s.FD())})
	}
	sh.refs++
	sh.conns[local.Port()] = c
	return c, nil
}

func (d *XSKDataPlane) openShared() (*xskShared, error) {
	sh := &xskShared{portBlock: newPortBlock("xsk", d.Iface), conns: map[uint16]*xskClientConn{}}
	cfg := d.txConfig()
	cfg.Program.Filter = sh.filter()
	err := d.run(func() error {
		ifi, err := interfaceByName(d.Iface)
		if err != nil {
			return err
		}
		if err := sh.learn(ifi); err != nil {
			return err
		}
		sh.dev, err = xsk.Open(d.Iface, cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	sh.socks = sh.dev.Sockets()
	for _, s := range sh.socks {
		sh.rxb = append(sh.rxb, s.NewBatch(64))
		sh.txb = append(sh.txb, s.NewBatch(64))
	}
	return sh, nil
}

// xskClientConn is one stream: a source port on the shared sockets, sending
// through the socket of queue txq (on veth, the peer's RX queue), receiving
// what is routed to its port.
type xskClientConn struct {
	d        *XSKDataPlane
	sh       *xskShared
	local    netip.AddrPort
	remote   netip.AddrPort
	txq      int
	dstMAC   net.HardwareAddr // the next hop's
	in       inbox
	fds      []unix.PollFd // the shared sockets', polled by this stream's reader
	deadline time.Time
	closed   bool
}

func (c *xskClientConn) LocalAddr() netip.AddrPort { return c.local }

func (c *xskClientConn) SetReadDeadline(t time.Time) error {
	c.sh.mu.Lock()
	c.deadline = t
	c.sh.mu.Unlock()
	return nil
}

// pump receives from every socket and routes datagrams to their streams.
// The caller holds sh.mu.
func (sh *xskShared) pump() {
	for i, s := range sh.socks {
		b := sh.rxb[i]
		if s.Receive(b) == 0 {
			continue
		}
		for j := 0; j < b.Len(); j++ {
			src, dport, payload, ok := parseUDP(b.Frame(j))
			if !ok {
				sh.stray++
				continue
			}
			c := sh.conns[dport]
			if c == nil {
				sh.stray++
				continue
			}
			c.in.push(src, payload)
		}
		s.Release(b)
	}
}

func (c *xskClientConn) ReadBatch(msgs []Message) (int, error) {
	sh := c.sh
	for {
		sh.mu.Lock()
		if c.closed || sh.closed {
			sh.mu.Unlock()
			return 0, net.ErrClosed
		}
		if c.in.len() == 0 {
			sh.pump()
		}
		n := c.in.pop(msgs)
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
			return 0, fmt.Errorf("xsk read: poll: %w", err)
		}
	}
}

func (c *xskClientConn) WriteBatch(msgs []Message) (int, error) {
	sh := c.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed || sh.closed {
		return 0, net.ErrClosed
	}
	mac := c.dstMAC
	s, b := sh.socks[c.txq], sh.txb[c.txq]
	s.Complete()
	sent := 0
	for sent < len(msgs) {
		k := s.Alloc(b, min(len(msgs)-sent, b.Cap()))
		if k == 0 {
			return sent, ErrBackpressure
		}
		for i := 0; i < k; i++ {
			m := msgs[sent+i]
			n, err := buildUDP(b.Buffer(i), sh.mac, mac, c.local, c.remote, m.Buf[:m.N])
			if err != nil {
				s.Free(b)
				return sent, err
			}
			b.SetLen(i, n)
		}
		done, err := s.Transmit(b)
		sent += done
		if err != nil || b.Len() > 0 {
			s.Free(b)
			if err == nil {
				err = ErrBackpressure
			}
			return sent, err
		}
	}
	return sent, nil
}

// Close releases the stream's port; the last one closes the sockets.
func (c *xskClientConn) Close() error {
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
	drainTX(sh.socks)
	if c.d.OnClose != nil {
		var qs []QueueCount
		for _, s := range sh.socks {
			if qc, ok := queueCount(s); ok {
				qs = append(qs, qc)
			}
		}
		c.d.OnClose(qs)
	}
	return sh.dev.Close()
}

// drainTX lets the kernel send what is still on the sockets' TX rings
// (copy mode sends a budget of frames per kick) before they close, for at
// most 100ms: the last datagrams of a test are not dropped with the
// socket.
func drainTX(socks []*xsk.Socket) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for _, s := range socks {
		for s.TxPending() > 0 && time.Now().Before(deadline) {
			if s.Complete() == 0 {
				s.Wait(time.Millisecond, true)
			}
		}
	}
}
