//go:build !linux

package xdpnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/coalesce"
)

var errOS = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, ErrNotSupported)

// UDPConn is a UDP endpoint over AF_XDP (Linux only).
type UDPConn struct{}

// Queue is one RX queue of a UDPConn (Linux only).
type Queue struct{}

// ListenUDP returns an error wrapping ErrNotSupported: AF_XDP exists only
// on Linux.
func ListenUDP(ifname string, laddr netip.AddrPort, cfg Config) (*UDPConn, error) { return nil, errOS }

// DialUDP returns an error wrapping ErrNotSupported.
func DialUDP(ifname string, laddr, raddr netip.AddrPort, cfg Config) (*UDPConn, error) {
	return nil, errOS
}

// ReadFrom returns ErrNotSupported.
func (c *UDPConn) ReadFrom(p []byte) (int, net.Addr, error) { return 0, nil, errOS }

// WriteTo returns ErrNotSupported.
func (c *UDPConn) WriteTo(p []byte, addr net.Addr) (int, error) { return 0, errOS }

// ReadFromUDPAddrPort returns ErrNotSupported.
func (c *UDPConn) ReadFromUDPAddrPort(p []byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, errOS
}

// WriteToUDPAddrPort returns ErrNotSupported.
func (c *UDPConn) WriteToUDPAddrPort(p []byte, addr netip.AddrPort) (int, error) { return 0, errOS }

// ReadBatch returns ErrNotSupported.
func (c *UDPConn) ReadBatch(msgs []Message) (int, error) { return 0, errOS }

// WriteBatch returns ErrNotSupported.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) { return 0, errOS }

// Read returns ErrNotSupported.
func (c *UDPConn) Read(p []byte) (int, error) { return 0, errOS }

// Write returns ErrNotSupported.
func (c *UDPConn) Write(p []byte) (int, error) { return 0, errOS }

// Close does nothing.
func (c *UDPConn) Close() error { return nil }

// LocalAddr returns nil.
func (c *UDPConn) LocalAddr() net.Addr { return nil }

// LocalAddrPort returns the zero AddrPort.
func (c *UDPConn) LocalAddrPort() netip.AddrPort { return netip.AddrPort{} }

// RemoteAddr returns nil.
func (c *UDPConn) RemoteAddr() net.Addr { return nil }

// Interface returns "".
func (c *UDPConn) Interface() string { return "" }

// Info returns the zero Info.
func (c *UDPConn) Info() Info { return Info{} }

// SyscallConn returns ErrNotSupported.
func (c *UDPConn) SyscallConn() (syscall.RawConn, error) { return nil, errOS }

// SetDeadline returns ErrNotSupported.
func (c *UDPConn) SetDeadline(t time.Time) error { return errOS }

// SetReadDeadline returns ErrNotSupported.
func (c *UDPConn) SetReadDeadline(t time.Time) error { return errOS }

// SetWriteDeadline returns ErrNotSupported.
func (c *UDPConn) SetWriteDeadline(t time.Time) error { return errOS }

// Queues returns nil.
func (c *UDPConn) Queues() []*Queue { return nil }

// Stats returns no counters.
func (c *UDPConn) Stats() Stats { return Stats{} }

// ID returns KernelQueue.
func (q *Queue) ID() int { return KernelQueue }

// ReadView returns ErrNotSupported.
func (q *Queue) ReadView(msgs []Message, timeout time.Duration) (int, error) { return 0, errOS }

// Release does nothing.
func (q *Queue) Release() {}

// ReadBatch returns ErrNotSupported.
func (q *Queue) ReadBatch(msgs []Message, timeout time.Duration) (int, error) { return 0, errOS }

// WriteBatch returns ErrNotSupported.
func (q *Queue) WriteBatch(msgs []Message) (int, error) { return 0, errOS }

// WriteTo returns ErrNotSupported.
func (q *Queue) WriteTo(p []byte, addr netip.AddrPort) (int, error) { return 0, errOS }

// Stats returns no counters.
func (q *Queue) Stats() QueueStats { return QueueStats{Queue: KernelQueue} }

// Group reads every RX queue of a conn in one goroutine (Linux only).
type Group struct{}

// Group returns ErrNotSupported.
func (c *UDPConn) Group() (*Group, error) { return nil, errOS }

// ReadView returns ErrNotSupported.
func (g *Group) ReadView(msgs []Message, timeout time.Duration) (int, error) { return 0, errOS }

// Release does nothing.
func (g *Group) Release() {}

// CoalesceStats returns no counters.
func (g *Group) CoalesceStats() (coalesce.RXStats, bool) { return coalesce.RXStats{}, false }

// Route returns ErrNotSupported.
func (c *UDPConn) Route(ctx context.Context, dst netip.Addr) (netip.Addr, int, error) {
	return netip.Addr{}, 0, errOS
}
