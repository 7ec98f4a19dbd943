//go:build linux

package asaviefix

import (
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// The kernel's own /proc/self/maps parses line by line, and a memfd this
// test maps shows up with the address, offset and inode the kernel gave.
func TestParseOwnMaps(t *testing.T) {
	fd, err := unix.MemfdCreate("asaviefix-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	page := os.Getpagesize()
	if err := unix.Ftruncate(fd, int64(3*page)); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, int64(page), page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	start := uint64(uintptr(unsafe.Pointer(&b[0])))
	found := false
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		m, err := ParseMapsLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if m.Start == start {
			found = true
			if m.End != start+uint64(page) || m.Offset != uint64(page) || m.Inode != st.Ino || m.Perms != "r--s" || !strings.HasPrefix(m.Path, "/memfd:asaviefix-test") {
				t.Errorf("memfd mapping parsed as %+v; want %#x-%#x offset %#x inode %d r--s /memfd:asaviefix-test", m, start, start+uint64(page), page, st.Ino)
			}
		}
	}
	if !found {
		t.Errorf("no mapping at %#x in /proc/self/maps", start)
	}
}

// newSocket binds an asavie socket to queue 0 of the host's interface
// (with NewSocket, which leaks nothing when bind fails), retrying while the kernel still releases an earlier one (its pool is
// freed from a work queue). It returns the last error after wait.
func newSocket(h *netnstest.Host, wait time.Duration) (s *asavie.Socket, err error) {
	deadline := time.Now().Add(wait)
	for {
		err = h.Do(func() (err error) {
			s, err = NewSocket(h.Ifindex, 0, nil)
			return err
		})
		// asavie formats errors with %v: the errno is only in the text.
		if err == nil || !strings.Contains(err.Error(), unix.EBUSY.Error()) || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func inode(t *testing.T, s *asavie.Socket) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(s.FD(), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Oracle: the kernel's bind. After asavie's own Close the queue stays
// bound (EBUSY) because the rings are still mapped; after Close here it
// binds again, and no mapping of the old socket is left.
func TestCloseReleasesQueue(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	s, err := newSocket(pair.B, 0)
	if err != nil {
		t.Fatal(err)
	}
	ino := inode(t, s)
	if n, err := Mapped(ino); err != nil || n != 4 {
		t.Fatalf("socket:[%d] has %d mappings (%v), want asavie's 4 rings", ino, n, err)
	}

	// The leak: asavie's Close alone.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := Mapped(ino); n != 4 {
		t.Errorf("after asavie's Close socket:[%d] has %d mappings: has asavie/xdp stopped leaking its rings? Then this package can go", ino, n)
	}
	if s2, err := newSocket(pair.B, time.Second); err == nil {
		s2.Close()
		t.Fatalf("queue 0 bound again although the leaked socket:[%d] still holds it", ino)
	} else if !strings.Contains(err.Error(), unix.EBUSY.Error()) {
		t.Fatalf("bind after the leak: %v, want EBUSY", err)
	}
	if err := Unmap(ino); err != nil {
		t.Fatal(err)
	}
	if n, _ := Mapped(ino); n != 0 {
		t.Errorf("after Unmap socket:[%d] has %d mappings", ino, n)
	}

	// Close: closes and unmaps in one step, twice in a row.
	for i := 0; i < 2; i++ {
		s, err := newSocket(pair.B, 2*time.Second)
		if err != nil {
			t.Fatalf("round %d: bind after release: %v", i, err)
		}
		ino := inode(t, s)
		if err := Close(s); err != nil {
			t.Fatal(err)
		}
		if n, _ := Mapped(ino); n != 0 {
			t.Errorf("round %d: after Close socket:[%d] has %d mappings", i, ino, n)
		}
		if err := Close(s); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	s, err = newSocket(pair.B, 2*time.Second)
	if err != nil {
		t.Fatalf("bind after Close: %v", err)
	}
	if err := Close(s); err != nil {
		t.Fatal(err)
	}
}

// orphans returns the sockets mapped in this process that no file
// descriptor refers to: leaked ones.
func orphans(t *testing.T) map[uint64]bool {
	t.Helper()
	mapped, err := mappedSockets()
	if err != nil {
		t.Fatal(err)
	}
	open, err := openSockets()
	if err != nil {
		t.Fatal(err)
	}
	for ino := range open {
		delete(mapped, ino)
	}
	return mapped
}

// Oracle: the kernel's bind and /proc/self/maps. While queue 0 is bound,
// asavie.NewSocket fails with EBUSY and leaves the new socket's 4 rings
// mapped with no descriptor; NewSocket fails the same way and leaves
// nothing; once the queue is free it binds.
func TestNewSocketFailureLeavesNothing(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	holder, err := newSocket(pair.B, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(orphans(t)); n != 0 {
		t.Fatalf("%d leaked sockets before the test", n)
	}

	// The leak, with asavie's own NewSocket.
	err = pair.B.Do(func() error {
		s, err := asavie.NewSocket(pair.B.Ifindex, 0, nil)
		if err == nil {
			Close(s)
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), unix.EBUSY.Error()) {
		t.Fatalf("asavie.NewSocket on a bound queue: %v, want EBUSY", err)
	}
	leaked := orphans(t)
	if len(leaked) != 1 {
		t.Errorf("after asavie's failed NewSocket: %d sockets mapped without a descriptor, want its 1: has asavie/xdp stopped leaking? Then NewSocket can go", len(leaked))
	}
	for ino := range leaked {
		if n, _ := Mapped(ino); n != 4 {
			t.Errorf("leaked socket:[%d] has %d mappings, want 4 rings", ino, n)
		}
		if err := Unmap(ino); err != nil {
			t.Fatal(err)
		}
	}

	// NewSocket: the same error, nothing left.
	for i := 0; i < 3; i++ {
		err = pair.B.Do(func() error {
			s, err := NewSocket(pair.B.Ifindex, 0, nil)
			if err == nil {
				Close(s)
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), unix.EBUSY.Error()) {
			t.Fatalf("NewSocket on a bound queue: %v, want asavie's EBUSY", err)
		}
		if n := len(orphans(t)); n != 0 {
			t.Fatalf("after NewSocket failed: %d sockets mapped without a descriptor", n)
		}
	}

	if err := Close(holder); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		var s *asavie.Socket
		err = pair.B.Do(func() (err error) {
			s, err = NewSocket(pair.B.Ifindex, 0, nil)
			return err
		})
		if err == nil {
			if err := Close(s); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NewSocket after the holder closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(orphans(t)); n != 0 {
		t.Errorf("%d sockets mapped without a descriptor at the end", n)
	}
}

func TestSocketInode(t *testing.T) {
	for in, want := range map[string]uint64{"socket:[123]": 123, "socket:[0]": 0} {
		if got, ok := socketInode(in); !ok || got != want {
			t.Errorf("socketInode(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "socket:[]", "socket:[12", "pipe:[12]", "socket:[-1]", "socket:[1]x", "/dev/null"} {
		if got, ok := socketInode(bad); ok {
			t.Errorf("socketInode(%q) = %d, true; want not a socket", bad, got)
		}
	}
}
