package kernelplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// DataPlane is the kernel UDP data plane: one socket per endpoint,
// batches through recvmmsg and sendmmsg.
type DataPlane struct {
	// Do, if set, runs the socket creation (for example in a network
	// namespace, as netnstest.Host.Do). Nil runs it directly.
	Do func(func() error) error
	// BufferSize is the SO_RCVBUF and SO_SNDBUF wanted; 0 means 4 MiB. As
	// root the kernel's rmem_max/wmem_max limits are bypassed.
	BufferSize int
	// Placer, if set, chooses each dialled stream's source port so it
	// lands on a chosen RX queue of the server's NIC.
	Placer plane.Placer
}

// Listen opens an unconnected UDP socket bound to local.
func (d *DataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) {
	var c *net.UDPConn
	err := link.Run(d.Do, func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen udp %v: %w", local, err)
	}
	return newSocketConn(c, false, d.BufferSize), nil
}

// Dial opens a UDP socket connected to remote.
func (d *DataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error) {
	var c *net.UDPConn
	err := link.Run(d.Do, func() error {
		var err error
		var laddr *net.UDPAddr
		if d.Placer != nil {
			// The source address is the route's: learn it from a socket
			// the kernel binds, then bind the placed port on it.
			probe, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(remote))
			if err != nil {
				return err
			}
			src := probe.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
			probe.Close()
			port, _, err := d.Placer.Port(src, remote, 0, 0)
			if err != nil {
				return err
			}
			laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, port))
		}
		c, err = net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(remote))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial udp %v: %w", remote, err)
	}
	return newSocketConn(c, true, d.BufferSize), nil
}

type batcher interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

var _ plane.BufferedConn = (*socketConn)(nil)

type socketConn struct {
	c         *net.UDPConn
	b         batcher
	connected bool
	bufSize   int // the buffer size asked for
	local     netip.AddrPort
	rms, wms  []ipv4.Message
	addrs     map[netip.AddrPort]*net.UDPAddr
	closeOnce sync.Once
}

func newSocketConn(c *net.UDPConn, connected bool, bufSize int) *socketConn {
	if bufSize <= 0 {
		bufSize = 4 << 20
	}
	setBuffers(c, bufSize)
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	s := &socketConn{c: c, connected: connected, bufSize: bufSize, local: local, addrs: map[netip.AddrPort]*net.UDPAddr{}}
	if local.Addr().Unmap().Is4() {
		s.b = ipv4.NewPacketConn(c)
	} else {
		s.b = ipv6.NewPacketConn(c)
	}
	return s
}

// setBuffers asks for size bytes of socket buffer, forcing past the sysctl
// limits when privileged, else taking what the kernel allows.
func setBuffers(c *net.UDPConn, size int) {
	rc, err := c.SyscallConn()
	if err == nil {
		rc.Control(func(fd uintptr) {
			if forceBuffer(fd, true, size) != nil {
				c.SetReadBuffer(size)
			}
			if forceBuffer(fd, false, size) != nil {
				c.SetWriteBuffer(size)
			}
		})
	}
}

// SocketBuffers is plane.BufferedConn's: the size asked for (BufferSize)
// and SO_SNDBUF and SO_RCVBUF as the kernel reports them.
func (s *socketConn) SocketBuffers() (requested, send, receive int, err error) {
	rc, err := s.c.SyscallConn()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("socket buffers: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { send, receive, serr = bufferSizes(fd) }); err != nil {
		return 0, 0, 0, fmt.Errorf("socket buffers: %w", err)
	}
	if serr != nil {
		return 0, 0, 0, fmt.Errorf("socket buffers: %w", serr)
	}
	return s.bufSize, send, receive, nil
}

func (s *socketConn) ReadBatch(msgs []plane.Message) (int, error) {
	if len(s.rms) < len(msgs) {
		s.rms = make([]ipv4.Message, len(msgs))
		for i := range s.rms {
			s.rms[i].Buffers = make([][]byte, 1)
		}
	}
	ms := s.rms[:len(msgs)]
	for i := range ms {
		ms[i].Buffers[0] = msgs[i].Buf
	}
	n, err := s.b.ReadBatch(ms, 0)
	for i := 0; i < n; i++ {
		msgs[i].N = ms[i].N
		if a, ok := ms[i].Addr.(*net.UDPAddr); ok {
			msgs[i].Addr = a.AddrPort()
		}
	}
	if err != nil {
		return n, fmt.Errorf("recvmmsg: %w", err)
	}
	return n, nil
}

func (s *socketConn) WriteBatch(msgs []plane.Message) (int, error) {
	if len(s.wms) < len(msgs) {
		s.wms = make([]ipv4.Message, len(msgs))
		for i := range s.wms {
			s.wms[i].Buffers = make([][]byte, 1)
		}
	}
	ms := s.wms[:len(msgs)]
	for i := range ms {
		ms[i].Buffers[0] = msgs[i].Buf[:msgs[i].N]
		ms[i].Addr = nil
		if !s.connected {
			a, ok := s.addrs[msgs[i].Addr]
			if !ok {
				a = net.UDPAddrFromAddrPort(msgs[i].Addr)
				s.addrs[msgs[i].Addr] = a
			}
			ms[i].Addr = a
		}
	}
	n, err := s.b.WriteBatch(ms, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) {
			return n, plane.ErrBackpressure
		}
		return n, fmt.Errorf("sendmmsg: %w", err)
	}
	return n, nil
}

func (s *socketConn) SetReadDeadline(t time.Time) error { return s.c.SetReadDeadline(t) }
func (s *socketConn) LocalAddr() netip.AddrPort         { return s.local }
func (s *socketConn) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.c.Close() })
	return err
}
