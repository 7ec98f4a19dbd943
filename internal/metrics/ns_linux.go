//go:build linux

package metrics

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
	"github.com/xdpio/xdpio/internal/nsdo"
	"golang.org/x/sys/unix"
)

// namespace is a network namespace a NICReader reads in: a handle to it,
// and its identity to tell whether a thread is in it already.
type namespace struct {
	h        netns.NsHandle
	dev, ino uint64
}

// threadNS is the calling thread's network namespace link.
const threadNS = "/proc/thread-self/ns/net"

// currentNamespace returns the calling thread's network namespace.
func currentNamespace() (*namespace, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("network namespace of the calling thread: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(h), &st); err != nil {
		h.Close()
		return nil, fmt.Errorf("network namespace of the calling thread: %w", err)
	}
	return &namespace{h: h, dev: st.Dev, ino: st.Ino}, nil
}

// do runs fn in the namespace: on the calling thread when it is there
// already, else on a locked thread that enters it and comes back.
func (n *namespace) do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var st unix.Stat_t
	if err := unix.Stat(threadNS, &st); err == nil && st.Dev == n.dev && st.Ino == n.ino {
		return fn()
	}
	return nsdo.Do(n.h, "of the device", fn)
}

func (n *namespace) close() {
	if n.h.IsOpen() {
		n.h.Close()
	}
}
