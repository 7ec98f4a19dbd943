//go:build linux

package xsk

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	_ = unix.XDP_RING_NEED_WAKEUP - ringNeedWakeup // the portable copy must match
)

type mmapOffsets struct {
	rx, tx, fr, cr ringOffsets
}

func getsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) (uintptr, error) {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return uintptr(l), nil
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getMmapOffsets(fd int) (mmapOffsets, error) {
	var raw unix.XDPMmapOffsets
	n, err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&raw), unsafe.Sizeof(raw))
	if err != nil {
		return mmapOffsets{}, fmt.Errorf("getsockopt XDP_MMAP_OFFSETS: %w", err)
	}
	if n != unsafe.Sizeof(raw) {
		return mmapOffsets{}, fmt.Errorf("getsockopt XDP_MMAP_OFFSETS: kernel returned %d bytes, want %d (kernel older than 5.4 lacks ring flags): %w", n, unsafe.Sizeof(raw), ErrNotSupported)
	}
	conv := func(o unix.XDPRingOffset) ringOffsets {
		return ringOffsets{o.Producer, o.Consumer, o.Desc, o.Flags}
	}
	return mmapOffsets{conv(raw.Rx), conv(raw.Tx), conv(raw.Fr), conv(raw.Cr)}, nil
}

func mmapRing(fd int, pgoff int64, off ringOffsets, entries uint32, entrySize uintptr) ([]byte, error) {
	size := int(off.desc) + int(entries)*int(entrySize)
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	return mem, nil
}

func setsockoptInt(fd, level, opt, v int) error {
	return unix.SetsockoptInt(fd, level, opt, v)
}

func getsockoptInt(fd, level, opt int) (int, error) {
	return unix.GetsockoptInt(fd, level, opt)
}

// pollFd is one entry of a ppoll set.
type pollFd = unix.PollFd
