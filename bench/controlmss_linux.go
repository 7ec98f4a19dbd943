package bench

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// controlMSS is the TCP maximum segment size of conn (TCP_MAXSEG), or 0 when
// it cannot be read.
func controlMSS(conn net.Conn) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	mss := 0
	rc.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil {
			mss = v
		}
	})
	return mss
}
