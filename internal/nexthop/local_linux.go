package nexthop

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Local returns the Resolver's current view of this host: its
// interface's MAC address and addresses, and every address of the
// namespace. It makes no system call; the view follows the kernel through
// the Resolver's subscription (Options.OnLocal tells of each change).
func (r *Resolver) Local() Local {
	if l := r.local.Load(); l != nil {
		return *l
	}
	return Local{}
}

// markLocal asks the reader to read the addresses again once it is
// through the notifications at hand. mu held.
func (r *Resolver) markLocal() { r.localDirty = true }

// takeLocal reports whether the addresses must be read again, and clears
// the mark.
func (r *Resolver) takeLocal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.localDirty
	r.localDirty = false
	return d
}

// refreshLocal reads the namespace's addresses (RTM_GETADDR) and, when
// the view changed, publishes it and calls Options.OnLocal. It runs on
// the reader (and once in New), never under mu. When the kernel cannot
// answer, the old view stays and the sweeper tries again.
func (r *Resolver) refreshLocal() error {
	r.localMu.Lock() // the reader and the sweeper: one at a time, in order
	defer r.localMu.Unlock()
	var list []netlink.Addr
	var err error
	for range 5 {
		list, err = r.h.AddrList(nil, netlink.FAMILY_ALL)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	r.mu.Lock()
	mac := slices.Clone(r.mac)
	if err != nil {
		r.localDirty = true // the sweeper tries again
		r.mu.Unlock()
		return fmt.Errorf("nexthop: read the addresses: %w", err)
	}
	r.mu.Unlock()
	l := Local{MAC: mac}
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		l.Host = append(l.Host, ip)
		if a.LinkIndex == r.ifindex && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
			l.Addrs = append(l.Addrs, ip)
		}
	}
	slices.SortFunc(l.Addrs, netip.Addr.Compare)
	l.Addrs = slices.Compact(l.Addrs)
	slices.SortFunc(l.Host, netip.Addr.Compare)
	l.Host = slices.Compact(l.Host)
	if old := r.local.Load(); old != nil && old.equal(l) {
		return nil
	}
	r.local.Store(&l)
	if r.opts.OnLocal != nil {
		r.opts.OnLocal(l)
	}
	return nil
}

func (l Local) equal(o Local) bool {
	return bytes.Equal(l.MAC, o.MAC) && slices.Equal(l.Addrs, o.Addrs) && slices.Equal(l.Host, o.Host)
}
