//go:build !linux

package kernelplane

import (
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/errs"
)

// tcpInfo is Linux's (TCP_INFO).
func tcpInfo(fd uintptr) (plane.TCPInfo, bool, error) {
	return plane.TCPInfo{}, false, errs.ErrNotSupported
}

// congestion is Linux's (TCP_CONGESTION).
func congestion(fd uintptr) (string, error) { return "", errs.ErrNotSupported }
