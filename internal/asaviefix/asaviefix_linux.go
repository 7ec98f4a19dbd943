//go:build linux

package asaviefix

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"
)

// mu serialises this package's calls, so that NewSocket never takes the
// rings of a socket another goroutine is closing for a failed call's.
var mu sync.Mutex

// NewSocket is asavie.NewSocket without its leak on failure. When a step
// after the ring mappings fails (bind, most often: EBUSY while the kernel
// still releases the queue's previous socket), asavie closes the socket's
// file descriptor and leaves the rings mapped, which keeps the socket
// alive with its UMEM's pages pinned (16 MiB with xdpio's sizes) until
// the process exits; a caller that retries leaks that much per attempt.
// NewSocket unmaps what the failed call left behind: the mappings of
// sockets that appeared during the call and that no file descriptor of
// the process refers to. The error is asavie's, unchanged.
func NewSocket(ifindex, queue int, opts *asavie.SocketOptions) (*asavie.Socket, error) {
	mu.Lock()
	defer mu.Unlock()
	before, err := mappedSockets()
	if err != nil {
		return nil, err
	}
	s, err := asavie.NewSocket(ifindex, queue, opts)
	if err == nil {
		return s, nil
	}
	after, err2 := mappedSockets()
	open, err3 := openSockets()
	if err2 != nil || err3 != nil {
		return nil, fmt.Errorf("%w (asaviefix: finding its leaked rings: %w)", err, errors.Join(err2, err3))
	}
	for ino := range after {
		if !before[ino] && !open[ino] {
			if err2 := unmap(ino); err2 != nil {
				return nil, fmt.Errorf("%w (%w)", err, err2)
			}
		}
	}
	return nil, err
}

// Close closes s with asavie's Socket.Close and then unmaps the rings that
// it leaves mapped, so that the kernel releases the socket and its queue
// binding. It is safe to call on a socket asavie failed to close; it must
// not race with any other use of s.
func Close(s *asavie.Socket) error {
	mu.Lock()
	defer mu.Unlock()
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
		return fmt.Errorf("asaviefix: close socket: %w (unmapping rings: %w)", err, unmap(st.Ino))
	}
	return unmap(st.Ino)
}

// Unmap unmaps every mapping of the socket with inode ino in the calling
// process. Mappings of anything else are left alone.
func Unmap(ino uint64) error {
	mu.Lock()
	defer mu.Unlock()
	return unmap(ino)
}

func unmap(ino uint64) error {
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

// mappedSockets returns the inodes of the sockets the process has
// mappings of.
func mappedSockets() (map[uint64]bool, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("asaviefix: %w", err)
	}
	inos := map[uint64]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		m, err := ParseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("asaviefix: read /proc/self/maps: %w", err)
		}
		if ino, ok := socketInode(m.Path); ok {
			inos[ino] = true
		}
	}
	return inos, nil
}

// openSockets returns the inodes of the sockets the process has file
// descriptors of.
func openSockets() (map[uint64]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("asaviefix: %w", err)
	}
	inos := map[uint64]bool{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed since the directory was read
		}
		if ino, ok := socketInode(target); ok {
			inos[ino] = true
		}
	}
	return inos, nil
}

// socketInode parses "socket:[INODE]".
func socketInode(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, "socket:[")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(rest, 10, 64)
	return ino, err == nil
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
