//go:build linux

package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/xsk"
)

// portBlock is what an AF_XDP client's streams share apart from the
// sockets themselves (xsk's or asavie's): the interface's MAC, index and
// source addresses, and the block of source ports its XDP filter takes,
// handed out one per stream.
type portBlock struct {
	what       string // "xsk" or "asavie", for errors
	iface      string
	ifindex    int
	mac        net.HardwareAddr
	src4, src6 netip.Addr
	base       uint16
	next       int
}

// newPortBlock picks a block of clientPorts ports at random between
// clientPortLow and clientPortHigh.
func newPortBlock(what, iface string) portBlock {
	return portBlock{what: what, iface: iface,
		base: uint16(clientPortLow + rand.IntN((clientPortHigh-clientPortLow)/clientPorts)*clientPorts)}
}

// filter is the XDP rule that takes UDP to the block.
func (b *portBlock) filter() []xsk.Rule {
	return []xsk.Rule{{Protocol: unix.IPPROTO_UDP, DstPortMin: b.base, DstPortMax: b.base + clientPorts - 1}}
}

// learn records ifi's MAC, index and source addresses (in the calling
// thread's namespace).
func (b *portBlock) learn(ifi *net.Interface) (err error) {
	b.mac, b.ifindex = ifi.HardwareAddr, ifi.Index
	b.src4, b.src6, err = ifaceSources(ifi)
	return err
}

// stream gives the next stream towards remote its local address, the
// socket (TX queue, of queues) it sends from, and the next hop's MAC:
// the block's next port, or the Placer's, whose queue it then sends from
// too (where a device has no RSS, as veth, the peer receives on the queue
// a frame was sent from). inUse reports ports streams hold; run runs the
// route and neighbour lookups in the interface's namespace.
func (b *portBlock) stream(remote netip.AddrPort, queues int, placer *Placer, inUse func(uint16) bool, run func(func() error) error) (local netip.AddrPort, txq int, dstMAC net.HardwareAddr, err error) {
	fail := func(err error) (netip.AddrPort, int, net.HardwareAddr, error) {
		return netip.AddrPort{}, 0, nil, fmt.Errorf("%s dial %v: %w", b.what, remote, err)
	}
	if b.next >= clientPorts {
		return fail(fmt.Errorf("all %d client ports in use: %w", clientPorts, ErrUnsupported))
	}
	src := b.src4
	if remote.Addr().Unmap().Is6() {
		src = b.src6
	}
	if !src.IsValid() {
		return fail(fmt.Errorf("%s has no address of that family", b.iface))
	}
	// The server's next hop: from the kernel's route and neighbour
	// tables, resolved through the kernel when it has no entry yet.
	if err := run(func() (err error) {
		_, dstMAC, err = nextHopMAC(b.ifindex, remote.Addr(), resolveTimeout)
		return err
	}); err != nil {
		return fail(err)
	}
	port, txq := b.base+uint16(b.next), b.next%queues
	if placer != nil {
		p, q, err := placer.port(src, remote, b.base, b.base+clientPorts-1)
		if err != nil {
			return fail(err)
		}
		if inUse(p) {
			return fail(fmt.Errorf("placed port %d is in use", p))
		}
		port, txq = p, int(q)%queues
	}
	b.next++
	return netip.AddrPortFrom(src, port), txq, dstMAC, nil
}

// ifaceSources returns the interface's first IPv4 address and first
// global IPv6 address (invalid when it has none).
func ifaceSources(ifi *net.Interface) (v4, v6 netip.Addr, err error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return v4, v6, err
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		switch {
		case ip.Is4() && !v4.IsValid():
			v4 = ip
		case ip.Is6() && !ip.IsLinkLocalUnicast() && !v6.IsValid():
			v6 = ip
		}
	}
	return v4, v6, nil
}

// datagram is a received UDP payload and its source.
type datagram struct {
	from netip.AddrPort
	b    []byte
}

// inbox queues the datagrams routed to one client stream until its
// ReadBatch takes them, in buffers it reuses: no allocation per datagram
// once warm. Beyond inboxLimit it drops (and counts) datagrams; the
// receiver then sees them as lost, by their sequence numbers.
type inbox struct {
	q       []datagram
	head    int
	free    [][]byte
	dropped uint64
}

func (ib *inbox) len() int { return len(ib.q) - ib.head }

// push copies payload into the queue.
func (ib *inbox) push(from netip.AddrPort, payload []byte) {
	if ib.len() >= inboxLimit {
		ib.dropped++
		return
	}
	var b []byte
	if n := len(ib.free); n > 0 {
		b, ib.free = ib.free[n-1][:0], ib.free[:n-1]
	}
	ib.q = append(ib.q, datagram{from: from, b: append(b, payload...)})
}

// pop copies up to len(msgs) queued datagrams into msgs.
func (ib *inbox) pop(msgs []Message) int {
	n := 0
	for ; n < len(msgs) && ib.head < len(ib.q); n++ {
		d := &ib.q[ib.head]
		msgs[n].N = copy(msgs[n].Buf, d.b)
		msgs[n].Addr = d.from
		ib.free = append(ib.free, d.b)
		*d = datagram{}
		ib.head++
	}
	if ib.head == len(ib.q) {
		ib.q, ib.head = ib.q[:0], 0
	}
	return n
}

// pollIn waits up to d for any of fds to become readable.
func pollIn(fds []unix.PollFd, d time.Duration) error {
	for i := range fds {
		fds[i].Events, fds[i].Revents = unix.POLLIN, 0
	}
	ts := unix.NsecToTimespec(int64(d))
	if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	return nil
}

// readWait is how long a ReadBatch may wait in poll before it looks again:
// at most most, and no later than deadline (zero: none). A deadline that
// has passed gives os.ErrDeadlineExceeded.
func readWait(deadline time.Time, most time.Duration) (time.Duration, error) {
	if deadline.IsZero() {
		return most, nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return min(most, left), nil
}
