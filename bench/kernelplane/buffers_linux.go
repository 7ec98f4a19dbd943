package kernelplane

import (
	"fmt"
	"syscall"
)

// forceBuffer sets a socket's receive (rx) or send buffer past the sysctl
// limits (SO_RCVBUFFORCE, SO_SNDBUFFORCE: privileged).
func forceBuffer(fd uintptr, rx bool, size int) error {
	const soRcvbufForce, soSndbufForce = 33, 32
	opt := soSndbufForce
	if rx {
		opt = soRcvbufForce
	}
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size)
}

// bufferSizes reads a socket's SO_SNDBUF and SO_RCVBUF.
func bufferSizes(fd uintptr) (send, receive int, err error) {
	if send, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF); err != nil {
		return 0, 0, fmt.Errorf("SO_SNDBUF: %w", err)
	}
	if receive, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF); err != nil {
		return 0, 0, fmt.Errorf("SO_RCVBUF: %w", err)
	}
	return send, receive, nil
}
