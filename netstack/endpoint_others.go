//go:build !linux

package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/xdpio/xdpio/xsk"
)

var errOS = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, ErrNotSupported)

// Endpoint is a gVisor link endpoint on AF_XDP sockets (Linux only).
type Endpoint struct{}

// NewEndpoint returns ErrNotSupported: AF_XDP exists only on Linux.
func NewEndpoint(ifname string, cfg Config) (*Endpoint, error) { return nil, errOS }

// Close does nothing.
func (e *Endpoint) Close() {}

// Err returns nil.
func (e *Endpoint) Err() error { return nil }

// Stats returns zero counters.
func (e *Endpoint) Stats() Stats { return Stats{} }

// Info returns the zero Info.
func (e *Endpoint) Info() xsk.Info { return xsk.Info{} }

// Stack is a gVisor stack on an Endpoint (Linux only).
type Stack struct{}

// Open returns ErrNotSupported: AF_XDP exists only on Linux.
func Open(ifname string, cfg Config) (*Stack, error) { return nil, errOS }

// Endpoint returns nil.
func (st *Stack) Endpoint() *Endpoint { return nil }

// ListenTCP returns ErrNotSupported.
func (st *Stack) ListenTCP(port uint16) (net.Listener, error) { return nil, errOS }

// DialTCP returns ErrNotSupported.
func (st *Stack) DialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return nil, errOS
}

// ListenUDP returns ErrNotSupported.
func (st *Stack) ListenUDP(port uint16) (net.PacketConn, error) { return nil, errOS }

// Close does nothing.
func (st *Stack) Close() error { return nil }

// Shutdown closes the stack once its connections have ended (never open here).
func (st *Stack) Shutdown(ctx context.Context) error { return nil }

// TCPStats returns zero counters.
func (st *Stack) TCPStats() TCPStats { return TCPStats{} }

// TCPConnInfo returns ErrNotSupported.
func (st *Stack) TCPConnInfo(c net.Conn) (TCPConnInfo, error) { return TCPConnInfo{}, errOS }
