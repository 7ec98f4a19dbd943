//go:build linux

package ethtool

import (
	"fmt"
	"net"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with ifr_data: the name and a pointer to the
// command buffer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the rest of the ifreq union
}

// ifName returns dev's interface name, looking it up by index when only
// that is set.
func ifName(dev Device, op string) (string, error) {
	name := dev.Name
	if name == "" {
		ifi, err := net.InterfaceByIndex(dev.Index)
		if err != nil {
			return "", &Error{Family: family, Op: op, Target: dev.target(), Err: err}
		}
		name = ifi.Name
	}
	if len(name) >= unix.IFNAMSIZ {
		return "", &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("interface name %q too long", name)}
	}
	return name, nil
}

// ethtoolIoctl runs one SIOCETHTOOL request on dev (in the calling
// thread's network namespace) with the command buffer buf, which the
// kernel may write back into. The error is the kernel's errno.
func ethtoolIoctl(dev Device, op string, buf unsafe.Pointer) error {
	name, err := ifName(dev, op)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("socket: %w", err)}
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], name)
	ifr.data = buf
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&ifr)
	if errno != 0 {
		return errno
	}
	return nil
}
