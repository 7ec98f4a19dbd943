//go:build linux

package vethpair

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/xdpio/xdpio/internal/nsdo"
	"golang.org/x/sys/unix"
)

var counter atomic.Uint32

const runDir = "/run/netns"

// Close removes both namespaces (and with them the veth pair); calling it
// again is harmless.
func (p *Pair) Close() error {
	var first error
	for _, h := range []*Host{p.A, p.B} {
		if h.handle.IsOpen() {
			h.handle.Close()
			h.handle = netns.None()
		}
		if err := deleteNamed(h.NS); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func deleteNamed(name string) error {
	path := filepath.Join(runDir, name)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove namespace %s: %w", name, err)
	}
	return nil
}

// sweep removes namespaces left behind by test processes that no longer run
// (killed before their cleanup could run).
func sweep() {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(name, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == unix.ESRCH {
			deleteNamed(e.Name())
		}
	}
}

// shareRunDir makes runDir a shared mount point of its own, as `ip netns
// add` does the first time it runs. Without it, the first `ip netns add`
// after our namespaces were made bind-mounts runDir over itself, which
// hides their mounts: they can then be neither listed as mounts nor
// removed (EBUSY), and stay until the next boot.
func shareRunDir() error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", runDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err != unix.EINVAL {
		return err
	}
	// Not a mount point yet.
	if err := unix.Mount(runDir, runDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", runDir, err)
	}
	return unix.Mount("", runDir, "none", unix.MS_SHARED|unix.MS_REC, "")
}

func (p *Pair) build() error {
	if err := shareRunDir(); err != nil {
		return fmt.Errorf("prepare %s: %w", runDir, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	for _, h := range []*Host{p.A, p.B} {
		// NewNamed switches this thread into the new namespace.
		h.handle, err = netns.NewNamed(h.NS)
		if err != nil {
			netns.Set(orig)
			return fmt.Errorf("create namespace %s: %w", h.NS, err)
		}
	}
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in a test namespace: do not unlock it, so the
		// runtime throws it away.
		runtime.LockOSThread()
		return fmt.Errorf("return to original namespace: %w", err)
	}

	ha, err := netlink.NewHandleAt(p.A.handle, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", p.A.NS, err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(p.B.handle, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", p.B.NS, err)
	}
	defer hb.Close()

	la := netlink.NewLinkAttrs()
	la.Name = p.A.Link
	la.MTU = p.MTU
	la.NumTxQueues = p.Queues
	la.NumRxQueues = p.Queues
	veth := &netlink.Veth{
		LinkAttrs:       la,
		PeerName:        p.B.Link,
		PeerNamespace:   netlink.NsFd(p.B.handle),
		PeerTxQLen:      -1,
		PeerNumTxQueues: uint32(p.Queues),
		PeerNumRxQueues: uint32(p.Queues),
		PeerMTU:         uint32(p.MTU),
	}
	if err := ha.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth pair with %d queues: %w", p.Queues, err)
	}

	for _, x := range []struct {
		h *Host
		n *netlink.Handle
	}{{p.A, ha}, {p.B, hb}} {
		lo, err := x.n.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("%s: find lo: %w", x.h.NS, err)
		}
		if err := x.n.LinkSetUp(lo); err != nil {
			return fmt.Errorf("%s: set lo up: %w", x.h.NS, err)
		}
		l, err := x.n.LinkByName(x.h.Link)
		if err != nil {
			return fmt.Errorf("%s: find %s: %w", x.h.NS, x.h.Link, err)
		}
		x.h.Ifindex = l.Attrs().Index
		x.h.MAC = l.Attrs().HardwareAddr
		for _, a := range []struct {
			ip   netip.Addr
			bits int
		}{{x.h.IPv4, 24}, {x.h.IPv6, 64}} {
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.ip.AsSlice(), Mask: net.CIDRMask(a.bits, a.ip.BitLen())}}
			if a.ip.Is6() {
				addr.Flags = unix.IFA_F_NODAD
			}
			if err := x.n.AddrAdd(l, addr); err != nil {
				return fmt.Errorf("%s: add address %v: %w", x.h.NS, a.ip, err)
			}
		}
	}
	for _, x := range []struct {
		h, peer *Host
		n       *netlink.Handle
	}{{p.A, p.B, ha}, {p.B, p.A, hb}} {
		for _, ip := range []netip.Addr{x.peer.IPv4, x.peer.IPv6} {
			fam := netlink.FAMILY_V4
			if ip.Is6() {
				fam = netlink.FAMILY_V6
			}
			if err := x.n.NeighAdd(&netlink.Neigh{
				LinkIndex:    x.h.Ifindex,
				Family:       fam,
				State:        netlink.NUD_PERMANENT,
				IP:           ip.AsSlice(),
				HardwareAddr: x.peer.MAC,
			}); err != nil {
				return fmt.Errorf("%s: add neighbour %v: %w", x.h.NS, ip, err)
			}
		}
	}
	for _, x := range []struct {
		h *Host
		n *netlink.Handle
	}{{p.A, ha}, {p.B, hb}} {
		l, err := x.n.LinkByIndex(x.h.Ifindex)
		if err != nil {
			return fmt.Errorf("%s: find %s: %w", x.h.NS, x.h.Link, err)
		}
		if err := x.n.LinkSetUp(l); err != nil {
			return fmt.Errorf("%s: set %s up: %w", x.h.NS, x.h.Link, err)
		}
	}
	// The carrier and the default qdisc come through the kernel's link
	// watcher, asynchronously: until the operational state is up, frames
	// sent into the pair are dropped.
	deadline := time.Now().Add(5 * time.Second)
	for _, x := range []struct {
		h *Host
		n *netlink.Handle
	}{{p.A, ha}, {p.B, hb}} {
		for {
			l, err := x.n.LinkByIndex(x.h.Ifindex)
			if err != nil {
				return fmt.Errorf("%s: find %s: %w", x.h.NS, x.h.Link, err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s not operationally up after 5 s (state %v)", x.h.NS, x.h.Link, l.Attrs().OperState)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// Do runs fn on a locked OS thread inside h's namespace and returns its
// error. Sockets, BPF links and netlink handles fn creates belong to h's
// namespace and may be used from any goroutine afterwards. Goroutines fn
// starts do not inherit the namespace.
func (h *Host) Do(fn func() error) error {
	return nsdo.Do(h.handle, h.NS, fn)
}

// Handle returns a netlink handle that operates inside h's namespace. The
// caller closes it.
func (h *Host) Handle() (*netlink.Handle, error) {
	return netlink.NewHandleAt(h.handle, unix.NETLINK_ROUTE)
}

// NsHandle returns the namespace's file descriptor handle, owned by the pair.
func (h *Host) NsHandle() netns.NsHandle { return h.handle }

// Attrs returns the current netlink attributes of h's veth (statistics,
// attached XDP program, queue counts), read inside h's namespace.
func (h *Host) Attrs() (*netlink.LinkAttrs, error) {
	nh, err := h.Handle()
	if err != nil {
		return nil, err
	}
	defer nh.Close()
	l, err := nh.LinkByIndex(h.Ifindex)
	if err != nil {
		return nil, fmt.Errorf("%s: find %s: %w", h.NS, h.Link, err)
	}
	return l.Attrs(), nil
}
