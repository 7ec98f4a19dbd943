//go:build linux

package asaviefix

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"
)

// Close closes s with asavie's Socket.Close and then unmaps the rings that
// it leaves mapped, so that the kernel releases the socket and its queue
// binding. It is safe to call on a socket asavie failed to close; it must
// not race with any other use of s.
func Close(s *asavie.Socket) error {
	fd := s.FD()
	if fd < 0 {
		return nil // already closed
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		s.Close()
		return fmt.Errorf("asaviefix: fstat socket %d: %w", fd, err)
	}
	if err := s.Close(); err != nil {
		// The rings are still mapped: unmap them anyway, so that a
		// failed close does not keep the queue bound.
		return fmt.Errorf("asaviefix: close socket: %w (unmapping rings: %w)", err, Unmap(st.Ino))
	}
	return Unmap(st.Ino)
}

// Unmap unmaps every mapping of the socket with inode ino in the calling
// process. Mappings of anything else are left alone.
func Unmap(ino uint64) error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("asaviefix: %w", err)
	}
	defer f.Close()
	spans, err := socketMappings(f, ino)
	if err != nil {
		return fmt.Errorf("asaviefix: read /proc/self/maps: %w", err)
	}
	for _, sp := range spans {
		if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(sp.Start), uintptr(sp.End-sp.Start), 0); e != 0 {
			return fmt.Errorf("asaviefix: munmap ring of socket:[%d] at %#x: %w", ino, sp.Start, e)
		}
	}
	return nil
}

// Mapped reports how many mappings of the socket with inode ino the
// calling process has.
func Mapped(ino uint64) (int, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("asaviefix: %w", err)
	}
	defer f.Close()
	spans, err := socketMappings(f, ino)
	if err != nil {
		return 0, fmt.Errorf("asaviefix: read /proc/self/maps: %w", err)
	}
	return len(spans), nil
}

// socketMappings returns the address ranges of r (in the format of
// /proc/PID/maps) that map the socket with inode ino.
func socketMappings(r io.Reader, ino uint64) ([]Span, error) {
	name := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	var spans []Span
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		m, err := ParseMapsLine(sc.Text())
		if err != nil {
			return nil, err
		}
		if m.Path == name {
			spans = append(spans, m.Span)
		}
	}
	return spans, sc.Err()
}
