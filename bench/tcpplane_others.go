//go:build !linux

package bench

import (
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/bench/plane"
)

func localTCPMSS(dp plane.DataPlane, dst netip.Addr) (int, error) {
	if p, ok := dp.(tcpPlane); ok {
		return p.tcpMSS(dst)
	}
	return 0, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}

func openTCPSender(dp plane.DataPlane, cfg tcpSenderConfig) (tcpSender, error) {
	if p, ok := dp.(tcpPlane); ok {
		return p.openTCPSender(cfg)
	}
	return nil, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}

func openTCPReceiver(dp plane.DataPlane, local netip.AddrPort, port uint16) (tcpReceiver, error) {
	if p, ok := dp.(tcpPlane); ok {
		return p.openTCPReceiver(local, port)
	}
	return nil, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}
