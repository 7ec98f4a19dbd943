//go:build linux

package xdpnet

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelQueue is the Queue of the conn's kernel UDP sockets (ID
// KernelQueue): read without blocking (waits poll their descriptors) and
// written through net.UDPConn.
type kernelQueue struct {
	q     *Queue
	kbufs [][]byte           // the buffers of views
	kview bool               // views into kbufs are held
	kturn int                // the kernel socket the next read looks at first
	kfds  []unix.PollFd      // wait's
	kargs recvArgs           // one non-blocking recvfrom's arguments and results
	kdo   func(uintptr) bool // kargs.do, bound once: no closure per read

	wmu  sync.Mutex // writes: koob
	koob [64]byte   // a write's control message (its ECN bits)
}

func newKernelQueue(c *UDPConn) *kernelQueue {
	k := &kernelQueue{kfds: make([]unix.PollFd, len(c.kss)+1)}
	k.kdo = k.kargs.do
	k.q = &Queue{c: c, id: KernelQueue, io: k}
	return k
}

func (k *kernelQueue) stats(*QueueStats) {}

// kernelViewMax is how many datagrams a ReadView of the kernel queue
// takes, each into a buffer of kernelBufSize (a reassembled datagram can
// be that large).
const (
	kernelViewMax = 8
	kernelBufSize = 65536
)

// recvArgs carries one non-blocking recvfrom through RawConn.Read without
// a closure allocated per call.
type recvArgs struct {
	buf    []byte
	n      int
	full   int // the datagram's length (MSG_TRUNC)
	from   netip.AddrPort
	errno  unix.Errno
	dummy  [1]byte
	rsa    unix.RawSockaddrInet6
	rsaLen uint32
	local  uint16 // the port of the socket it came from
	scope  uint32 // an IPv6 source's scope (the interface of a link-local one)
}

func (a *recvArgs) do(fd uintptr) bool {
	b := a.buf
	if len(b) == 0 {
		b = a.dummy[:0:1]
	}
	a.rsaLen = uint32(unsafe.Sizeof(a.rsa))
	var p unsafe.Pointer
	if cap(b) > 0 {
		p = unsafe.Pointer(&b[:1][0])
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(p), uintptr(len(b)),
		unix.MSG_DONTWAIT|unix.MSG_TRUNC, uintptr(unsafe.Pointer(&a.rsa)), uintptr(unsafe.Pointer(&a.rsaLen)))
	a.errno = e
	if e != 0 {
		return true
	}
	a.full = int(r)
	a.n = min(int(r), len(a.buf))
	switch a.rsa.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&a.rsa))
		a.from = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]))
	case unix.AF_INET6:
		a.from = netip.AddrPortFrom(netip.AddrFrom16(a.rsa.Addr).Unmap(), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&a.rsa.Port))[:]))
		a.scope = a.rsa.Scope_id
	default:
		a.from = netip.AddrPort{}
	}
	return true
}

// krecv reads one datagram into buf from one of the kernel sockets
// without blocking, looking at each in turn from where the last call
// stopped; ok is false when none has one.
func (k *kernelQueue) krecv(a *recvArgs, buf []byte) (ok bool, err error) {
	kss := k.q.c.kss
	for i := 0; i < len(kss); i++ {
		ks := &kss[(k.kturn+i)%len(kss)]
		ok, err := k.krecvOne(a, ks, buf)
		if ok || err != nil {
			k.kturn += i
			a.local = ks.port
			return ok, err
		}
	}
	k.kturn++
	return false, nil
}

func (k *kernelQueue) krecvOne(a *recvArgs, ks *kernelSock, buf []byte) (ok bool, err error) {
	a.buf = buf
	if err := ks.raw.Read(k.kdo); err != nil {
		return false, err
	}
	switch a.errno {
	case 0:
		return true, nil
	case unix.EAGAIN, unix.EINTR:
		return false, nil
	case unix.ECONNREFUSED:
		// A connected socket learned from ICMP that the peer's port is
		// closed: net.UDPConn reports it the same way.
		return false, a.errno
	}
	return false, a.errno
}

// copyOut copies waiting datagrams of the kernel sockets into msgs
// (no GRO: the kernel sockets do not ask for it).
func (k *kernelQueue) copyOut(msgs []Message, _ bool) (int, error) {
	a := &k.kargs
	q := k.q
	n := 0
	var bytes, truncated uint64
	var drops [numCauses]uint64
	for n < len(msgs) {
		m := &msgs[n]
		ok, err := k.krecv(a, m.Buf)
		if err != nil {
			q.count(n, bytes, truncated, &drops)
			return n, err
		}
		if !ok {
			break
		}
		from := a.from
		if from.Addr().IsLoopback() {
			// Not from the conn's network, and not answered (writes to
			// loopback fail): dropped, as martian.
			drops[causeMartian]++
			continue
		}
		if from.Addr().IsLinkLocalUnicast() && from.Addr().Is6() {
			from = q.c.zoned(from, a.scope)
		}
		m.N, m.Addr, m.SegSize, m.LocalPort = a.n, from, 0, a.local
		m.Truncated = a.full > a.n
		if m.Truncated {
			truncated++
		}
		bytes += uint64(a.full)
		n++
	}
	q.count(n, bytes, truncated, &drops)
	return n, nil
}

// view reads datagrams waiting into the queue's own buffers (at most
// kernelViewMax) and hands out views of them.
func (k *kernelQueue) view(msgs []Message) (int, error) {
	if k.kbufs == nil {
		k.kbufs = make([][]byte, kernelViewMax)
		for i := range k.kbufs {
			k.kbufs[i] = make([]byte, kernelBufSize)
		}
	}
	tmp := msgs[:min(len(msgs), kernelViewMax)]
	for i := range tmp {
		tmp[i].Buf = k.kbufs[i]
	}
	n, err := k.copyOut(tmp, false)
	for i := 0; i < n; i++ {
		tmp[i].Buf = tmp[i].Buf[:tmp[i].N:tmp[i].N]
	}
	k.kview = n > 0
	return n, err
}

func (k *kernelQueue) release() bool {
	held := k.kview
	k.kview = false
	return held
}

// wait blocks until a kernel socket is readable, timeout passed
// (negative: no limit) or the conn is closed. It polls in slices, so
// that Close is noticed even if another waiter took the wake-up.
func (k *kernelQueue) wait(timeout time.Duration) error {
	c := k.q.c
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		slice := readSlice
		if timeout >= 0 {
			slice = min(slice, max(0, time.Until(deadline)))
		}
		fds := k.kfds
		for i, ks := range c.kss {
			fds[i] = unix.PollFd{Fd: int32(ks.fd), Events: unix.POLLIN}
		}
		w := len(c.kss)
		fds[w] = unix.PollFd{Fd: int32(c.wakeFD), Events: unix.POLLIN}
		ts := unix.NsecToTimespec(int64(slice))
		n, err := unix.Ppoll(fds, &ts, nil)
		if c.closed.Load() {
			return net.ErrClosed
		}
		if err != nil && err != unix.EINTR {
			return err
		}
		readable := false
		for _, f := range fds[:w] {
			readable = readable || f.Revents != 0
		}
		if readable || (timeout >= 0 && !time.Now().Before(deadline)) {
			return nil
		}
		if n > 0 && fds[w].Revents != 0 {
			// A deadline change for the conn's own readers: not ours to
			// take; let it be seen and go on in slices.
			time.Sleep(time.Millisecond)
		}
	}
}

// write sends msgs through the kernel sockets (GSO messages one datagram
// at a time).
func (k *kernelQueue) write(msgs []Message) (int, error) {
	q := k.q
	c := q.c
	if !q.acquire() {
		return 0, c.opErr("write", netip.AddrPort{}, net.ErrClosed)
	}
	defer q.release()
	k.wmu.Lock()
	defer k.wmu.Unlock()
	dl := time.Time{}
	if d := c.wdl.Load(); d != 0 {
		dl = time.Unix(0, d)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.N < 0 || m.N > len(m.Buf) {
			return i, c.opErr("write", m.Addr, errInvalidN(m))
		}
		dst := c.peer(m.Addr) // a link-local one with the interface as its zone
		sport, err := c.sourcePort(m)
		if err != nil {
			return i, c.opErr("write", m.Addr, err)
		}
		ks := c.kss[sport-c.laddr.Port()].c
		ks.SetWriteDeadline(dl)
		p := m.Buf[:m.N]
		seg := len(p)
		if m.SegSize > 0 && m.SegSize < len(p) {
			seg = m.SegSize
		}
		// The conn's TTL, TOS and DF are set on the socket; a message's
		// own ECN bits go in a control message.
		var oob []byte
		if m.ECN != 0 {
			tos := c.cfg.TOS&^3 | int(m.ECN&3)
			if unmapAP(c.dstOf(m)).Addr().Is4() {
				oob = intCmsg(k.koob[:], unix.IPPROTO_IP, unix.IP_TOS, tos)
			} else {
				oob = intCmsg(k.koob[:], unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
			}
		}
		for off := 0; off < len(p) || off == 0; off += seg {
			d := p[off:min(len(p), off+seg)]
			var err error
			switch {
			case oob != nil && c.raddr.IsValid():
				_, _, err = ks.WriteMsgUDPAddrPort(d, oob, netip.AddrPort{})
			case oob != nil:
				_, _, err = ks.WriteMsgUDPAddrPort(d, oob, dst)
			case c.raddr.IsValid():
				_, err = ks.Write(d)
			default:
				_, err = ks.WriteToUDPAddrPort(d, dst)
			}
			if err != nil {
				return i, err // a *net.OpError from the kernel socket
			}
			q.ctr.sent.Add(1)
			q.ctr.sentBytes.Add(uint64(len(d)))
			if len(p) == 0 {
				break
			}
		}
	}
	return len(msgs), nil
}

// intCmsg writes a control message carrying an int into b and returns
// it.
func intCmsg(b []byte, level, typ int32, v int) []byte {
	n := unix.CmsgSpace(4)
	b = b[:n]
	clear(b)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = int32(v)
	return b
}

func errInvalidN(m *Message) error {
	return fmt.Errorf("%w: message N %d beyond its %d-byte Buf", ErrInvalidConfig, m.N, len(m.Buf))
}
