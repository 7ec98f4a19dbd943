//go:build !linux

package bench

import (
	"fmt"
	"net/netip"
)

func localTCPMSS(dp DataPlane, dst netip.Addr) (int, error) {
	return 0, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}

type tcpSenderConfig struct {
	server  netip.AddrPort
	streams int
	mss     int
	tso     bool
	wlen    int
	rate    uint64
	corrupt func(flow int, seg int64, frame []byte)
}

func openTCPSender(dp DataPlane, cfg tcpSenderConfig) (tcpSender, error) {
	return nil, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}

func openTCPReceiver(dp DataPlane, local netip.AddrPort, port uint16) (tcpReceiver, error) {
	return nil, fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", ErrUnsupported)
}
