//go:build linux && (amd64 || arm64)

package gvisorxdpplane

import (
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	pkgxdp "gvisor.dev/gvisor/pkg/xdp"
)

// stopTimeout bounds the wait for the endpoint's receive loop to end.
const stopTimeout = 2 * time.Second

// release frees what gVisor's endpoint ep never frees (its Close does
// nothing) once the stack is closed and the program detached: it ends
// the endpoint's receive loop if attached (done is closed when it has),
// unmaps the UMEM and the four rings, whose mappings hold the socket, and
// closes the socket fd and the endpoint's eventfd. The endpoint's fields
// are unexported: they are reached by name and checked by type, and a
// gVisor whose endpoint differs fails here with an error (leaving the
// socket to the process's exit) rather than guessing.
func release(ep stack.LinkEndpoint, fd int, attached bool, done <-chan struct{}) error {
	v := reflect.ValueOf(ep)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("release gVisor's AF_XDP endpoint: %T is not the endpoint this was written for", ep)
	}
	e := v.Elem()
	cbv := e.FieldByName("control")
	efdv := e.FieldByName("stopFD").FieldByName("EFD")
	if !cbv.IsValid() || cbv.Type() != reflect.TypeFor[*pkgxdp.ControlBlock]() || cbv.IsNil() || !efdv.IsValid() || efdv.Kind() != reflect.Int {
		return fmt.Errorf("release gVisor's AF_XDP endpoint: %T has no control block and eventfd where this expects them", ep)
	}
	cb := (*pkgxdp.ControlBlock)(cbv.UnsafePointer())
	efd := int(efdv.Int())
	var mems [][]byte
	for _, f := range []any{&cb.UMEM, &cb.Fill, &cb.RX, &cb.TX, &cb.Completion} {
		m := reflect.ValueOf(f).Elem().FieldByName("mem")
		if !m.IsValid() || m.Type() != reflect.TypeFor[[]byte]() || m.Len() == 0 {
			return fmt.Errorf("release gVisor's AF_XDP endpoint: %T has no mapping where this expects it", f)
		}
		mems = append(mems, unsafe.Slice((*byte)(m.UnsafePointer()), m.Len()))
	}
	if attached {
		if err := stopReceiving(fd, efd, done); err != nil {
			return err
		}
	}
	// A packet the stack still writes waits on the lock for ever instead
	// of writing into memory that is gone.
	cb.UMEM.Lock()
	var errs []error
	for _, m := range mems {
		// gVisor mapped them with the raw system call, which unix.Munmap,
		// keeping its own list of unix.Mmap's mappings, does not know.
		if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), 0); e != 0 {
			errs = append(errs, fmt.Errorf("unmap gVisor's AF_XDP endpoint's memory: %w", e))
		}
	}
	errs = append(errs, unix.Close(fd), unix.Close(efd))
	return errors.Join(errs...)
}

// stopReceiving ends the endpoint's receive loop, which polls the socket
// fd and the eventfd efd: the endpoint's own way, the eventfd, alone only
// makes the loop spin (it goes on polling), and it ends only on a poll
// error or hang-up on fd. So fd is first made a pipe whose writing end is
// closed, which polls as hung up (the socket lives on in its mappings),
// and the eventfd then wakes the loop from its current poll.
func stopReceiving(fd, efd int, done <-chan struct{}) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("stop gVisor's AF_XDP endpoint: %w", err)
	}
	unix.Close(p[1])
	err := unix.Dup3(p[0], fd, unix.O_CLOEXEC)
	unix.Close(p[0])
	if err != nil {
		return fmt.Errorf("stop gVisor's AF_XDP endpoint: %w", err)
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	if _, err := unix.Write(efd, one); err != nil {
		return fmt.Errorf("stop gVisor's AF_XDP endpoint: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("stop gVisor's AF_XDP endpoint: its receive loop still runs after %v", stopTimeout)
	}
}
