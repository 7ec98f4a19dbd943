//go:build !linux

package wireguard

import (
	"fmt"
	"net/netip"
	"runtime"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/xdpio/xdpio/xdpnet"
)

// Options configure a Bind (Linux only).
type Options struct {
	Addr   netip.Addr
	Config xdpnet.Config
	Do     func(func() error) error
}

// Bind is a conn.Bind over AF_XDP (Linux only): Open fails elsewhere.
type Bind struct{}

// NewBind returns a Bind whose Open fails: AF_XDP exists only on Linux.
func NewBind(ifname string, opts Options) *Bind { return &Bind{} }

var errOS = fmt.Errorf("wireguard over AF_XDP on %s: %w", runtime.GOOS, xdpnet.ErrNotSupported)

// Open returns an error wrapping xdpnet.ErrNotSupported.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) { return nil, 0, errOS }

// Close does nothing.
func (b *Bind) Close() error { return nil }

// SetMark does nothing.
func (b *Bind) SetMark(mark uint32) error { return nil }

// Send returns an error wrapping xdpnet.ErrNotSupported.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error { return errOS }

// ParseEndpoint parses "ip:port".
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, fmt.Errorf("wireguard endpoint %q: %w", s, err)
	}
	return &Endpoint{AddrPort: ap}, nil
}

// BatchSize returns conn.IdealBatchSize.
func (b *Bind) BatchSize() int { return conn.IdealBatchSize }
