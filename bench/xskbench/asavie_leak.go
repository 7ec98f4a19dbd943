//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"
)

// asavie/xdp v0.3.3's Socket.Close closes the file descriptor but never
// unmaps the four rings it mapped from the socket. The mappings keep the
// socket alive, still bound to its queue, until the process exits, and
// no other socket can bind that queue (EBUSY). closeAsavie closes s and
// then unmaps what it left behind, found in /proc/self/maps by the
// socket's inode, so that the next backend can bind.
func closeAsavie(s *asavie.Socket) error {
	var st unix.Stat_t
	if err := unix.Fstat(s.FD(), &st); err != nil {
		s.Close()
		return fmt.Errorf("fstat asavie socket: %w", err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	return unmapSocket(st.Ino)
}

// unmapSocket unmaps every mapping of the socket with inode ino.
func unmapSocket(ino uint64) error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	name := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	type span struct{ lo, hi uint64 }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != name {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		spans = append(spans, span{a, b})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, sp := range spans {
		if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(sp.lo), uintptr(sp.hi-sp.lo), 0); e != 0 {
			return fmt.Errorf("munmap asavie ring at %#x: %w", sp.lo, e)
		}
	}
	return nil
}
