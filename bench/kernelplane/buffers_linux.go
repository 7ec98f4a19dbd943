package kernelplane

import "syscall"

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
