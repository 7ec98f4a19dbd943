//go:build linux

package xdpquic

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/xdpnet"
)

// Conn is an xdpnet.UDPConn with what quic-go's Transport uses for its
// fast paths: ReadBatch over x/net's ipv4.Message, ReadMsgUDP and
// WriteMsgUDP with control messages (GSO, ECN), SetReadBuffer. It is a
// net.PacketConn; pass it as quic.Transport.Conn.
//
// Reads belong to one goroutine (quic-go's Transport has one reader);
// writes are safe from any goroutine.
type Conn struct {
	*xdpnet.UDPConn

	rmsgs []xdpnet.Message
	addrs map[netip.AddrPort]*net.UDPAddr // the reader's, for Addr without allocation
	wpool sync.Pool                       // *[1]xdpnet.Message for writes
}

// maxAddrs bounds the reader's cache of peer addresses.
const maxAddrs = 4096

// NewConn wraps c.
func NewConn(c *xdpnet.UDPConn) *Conn {
	q := &Conn{UDPConn: c, addrs: map[netip.AddrPort]*net.UDPAddr{}}
	q.wpool.New = func() any { return new([1]xdpnet.Message) }
	return q
}

// Listen opens an xdpnet conn on ifname at laddr (see xdpnet.ListenUDP)
// and wraps it.
func Listen(ifname string, laddr netip.AddrPort, cfg xdpnet.Config) (*Conn, error) {
	c, err := xdpnet.ListenUDP(ifname, laddr, cfg)
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// udpAddr returns a *net.UDPAddr for a, from the reader's cache.
func (q *Conn) udpAddr(a netip.AddrPort) *net.UDPAddr {
	if u := q.addrs[a]; u != nil {
		return u
	}
	if len(q.addrs) >= maxAddrs {
		clear(q.addrs)
	}
	u := net.UDPAddrFromAddrPort(a)
	q.addrs[a] = u
	return u
}

// ReadBatch reads up to len(ms) datagrams into ms[i].Buffers[0], as
// x/net's ipv4.PacketConn.ReadBatch does, with the ECN bits as an IP_TOS
// (IPv4) or IPV6_TCLASS (IPv6) control message in ms[i].OOB. flags must
// be 0.
func (q *Conn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if flags != 0 {
		return 0, fmt.Errorf("xdpquic: ReadBatch flags %#x: %w", flags, xdpnet.ErrInvalidConfig)
	}
	if len(q.rmsgs) < len(ms) {
		q.rmsgs = make([]xdpnet.Message, len(ms))
	}
	msgs := q.rmsgs[:len(ms)]
	for i := range ms {
		if len(ms[i].Buffers) == 0 {
			return 0, fmt.Errorf("xdpquic: ReadBatch message %d has no buffer: %w", i, xdpnet.ErrInvalidConfig)
		}
		msgs[i].Buf = ms[i].Buffers[0]
	}
	n, err := q.UDPConn.ReadBatch(msgs)
	for i := 0; i < n; i++ {
		m := &msgs[i]
		ms[i].N = m.N
		ms[i].Addr = q.udpAddr(m.Addr)
		ms[i].NN = putECN(ms[i].OOB, m.Addr.Addr().Is4(), m.ECN)
		ms[i].Flags = 0
		if m.Truncated {
			ms[i].Flags = unix.MSG_TRUNC
		}
	}
	for i := range msgs {
		msgs[i].Buf = nil
	}
	return n, err
}

// ReadMsgUDP reads one datagram into b, with its ECN bits as a control
// message in oob.
func (q *Conn) ReadMsgUDP(b, oob []byte) (n, oobn, flags int, addr *net.UDPAddr, err error) {
	var m [1]xdpnet.Message
	m[0].Buf = b
	if _, err := q.UDPConn.ReadBatch(m[:]); err != nil {
		return 0, 0, 0, nil, err
	}
	if m[0].Truncated {
		flags = unix.MSG_TRUNC
	}
	return m[0].N, putECN(oob, m[0].Addr.Addr().Is4(), m[0].ECN), flags, q.udpAddr(m[0].Addr), nil
}

// putECN writes the ECN bits as the control message the kernel would
// give a socket with IP_RECVTOS or IPV6_RECVTCLASS into oob, if it has
// room, and returns its length (0 without room).
func putECN(oob []byte, v4 bool, ecn uint8) int {
	dataLen := 4 // IPV6_TCLASS is an int
	level, typ := int32(unix.IPPROTO_IPV6), int32(unix.IPV6_TCLASS)
	if v4 {
		dataLen = 1 // IP_TOS is a byte
		level, typ = unix.IPPROTO_IP, unix.IP_TOS
	}
	n := unix.CmsgSpace(dataLen)
	if len(oob) < n {
		return 0
	}
	b := oob[:n]
	clear(b)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(dataLen))
	if v4 {
		b[unix.CmsgLen(0)] = ecn
	} else {
		binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], uint32(ecn))
	}
	return n
}

// WriteMsgUDP sends b to addr, taking from oob a UDP_SEGMENT size (b is
// then cut into datagrams of that size, GSO) and an IP_TOS or
// IPV6_TCLASS value (its ECN bits mark the datagrams). Other control
// messages (packet info) are ignored. It returns len(b) and len(oob).
func (q *Conn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error) {
	mp := q.wpool.Get().(*[1]xdpnet.Message)
	defer q.wpool.Put(mp)
	m := &mp[0]
	*m = xdpnet.Message{Buf: b, N: len(b)}
	if addr != nil {
		m.Addr = addr.AddrPort()
	}
	for data := oob; len(data) > 0; {
		h, body, rest, err := unix.ParseOneSocketControlMessage(data)
		if err != nil {
			return 0, 0, fmt.Errorf("xdpquic: control message: %w", err)
		}
		switch {
		case h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_SEGMENT && len(body) >= 2:
			m.SegSize = int(binary.NativeEndian.Uint16(body))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(body) >= 1:
			m.ECN = body[0] & 3
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(body) >= 4:
			m.ECN = uint8(binary.NativeEndian.Uint32(body)) & 3
		}
		data = rest
	}
	_, err = q.UDPConn.WriteBatch(mp[:])
	m.Buf = nil
	if err != nil {
		return 0, 0, err
	}
	return len(b), len(oob), nil
}

// SetReadBuffer sets the receive buffer of the kernel socket the conn
// holds (which carries only what reaches the kernel); the AF_XDP rings'
// sizes are xdpnet's configuration.
func (q *Conn) SetReadBuffer(bytes int) error {
	rc, err := q.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, bytes) }); err != nil {
		return err
	}
	return serr
}

// SetWriteBuffer is SetReadBuffer for the kernel socket's send buffer.
func (q *Conn) SetWriteBuffer(bytes int) error {
	rc, err := q.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, bytes) }); err != nil {
		return err
	}
	return serr
}
