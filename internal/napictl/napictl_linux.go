//go:build linux

package napictl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/internal/netdev"
	"golang.org/x/sys/unix"
)

// Holder holds applied NAPI settings until Close.
type Holder struct {
	mu      sync.Mutex
	c       *netdev.Client
	path    string
	entries []Entry
	closed  bool
}

// lock takes the directory's lock file, which serialises record updates
// between processes.
func lock(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("napictl: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("napictl: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("napictl: lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// restore puts e's originals back on its NAPI. A NAPI that no longer
// exists, or now belongs to another device, has nothing to restore.
func restore(c *netdev.Client, ifindex int, e Entry) error {
	n, err := c.NAPI(e.NAPI)
	if errors.Is(err, unix.ENOENT) || err == nil && n.Ifindex != ifindex {
		return nil
	}
	if err != nil {
		return err
	}
	d, g := e.DeferHardIRQs, time.Duration(e.GROFlushTimeoutNS)
	cfg := netdev.NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g}
	if e.IRQSuspendTimeoutNS != nil {
		is := time.Duration(*e.IRQSuspendTimeoutNS)
		cfg.IRQSuspendTimeout = &is
	}
	return c.SetNAPI(e.NAPI, cfg)
}

// Report says what RestoreStale did.
type Report struct {
	// Restored are the NAPIs whose originals were put back.
	Restored []Entry
	// Held are entries of live holders, left alone.
	Held []Entry
}

// restoreStale restores and drops the entries of dead holders in r that
// belong to namespace ns. The caller holds the lock.
func restoreStale(c *netdev.Client, r *Record, ns uint64, rep *Report) error {
	var keep []Entry
	var first error
	for _, e := range r.Entries {
		switch {
		case e.NetNS != ns:
			keep = append(keep, e)
		case alive(e):
			keep = append(keep, e)
			if rep != nil {
				rep.Held = append(rep.Held, e)
			}
		default:
			if err := restore(c, r.Ifindex, e); err != nil {
				keep = append(keep, e)
				if first == nil {
					first = fmt.Errorf("napictl: restore napi %d of %s (holder pid %d is gone): %w", e.NAPI, r.Ifname, e.PID, err)
				}
				continue
			}
			if rep != nil {
				rep.Restored = append(rep.Restored, e)
			}
		}
	}
	r.Entries = keep
	return first
}

// RestoreStale restores the NAPIs of device ifname/ifindex that a dead
// process left deferred, in the caller's namespace, and reports the
// entries live holders still hold. dir "" is DefaultDir.
func RestoreStale(c *netdev.Client, dir, ifname string, ifindex int) (Report, error) {
	var rep Report
	if dir == "" {
		dir = DefaultDir
	}
	ns := c.NetNS()
	unlock, err := lock(dir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	path := Path(dir, ifname, ifindex)
	r, err := readRecord(path)
	if err != nil || len(r.Entries) == 0 {
		return rep, err
	}
	r.Ifname, r.Ifindex = ifname, ifindex
	serr := restoreStale(c, &r, ns, &rep)
	if err := writeRecord(path, r); err != nil {
		return rep, err
	}
	return rep, serr
}

// Apply restores what a dead holder left on the device, records the
// current values of req.NAPIs, then sets req.Settings on them. The NAPIs
// must belong to the device; one another live process holds is an error.
// On failure, nothing stays changed.
func Apply(c *netdev.Client, req Request) (*Holder, error) {
	if len(req.NAPIs) == 0 {
		return nil, fmt.Errorf("napictl: %s: no NAPI to apply deferral to", req.Ifname)
	}
	if req.Settings.GROFlushTimeout < 0 {
		return nil, fmt.Errorf("napictl: invalid gro-flush-timeout %v: must not be negative", req.Settings.GROFlushTimeout)
	}
	if req.Settings.IRQSuspendTimeout < 0 {
		return nil, fmt.Errorf("napictl: invalid irq-suspend-timeout %v: must not be negative", req.Settings.IRQSuspendTimeout)
	}
	attrs := []uint16{netdev.AttrNAPIDeferHardIRQs, netdev.AttrNAPIGROFlushTimeout}
	if req.Settings.IRQSuspendTimeout > 0 {
		attrs = append(attrs, netdev.AttrNAPIIRQSuspendTimeout)
	}
	for _, a := range attrs {
		if !c.SupportsAttr(netdev.CmdNAPISet, a) {
			return nil, &netdev.Error{Family: netdev.FamilyName, Op: "napi-set", NotSupported: true, Err: unix.EOPNOTSUPP,
				Missing: "per-NAPI " + netdev.NAPIAttrName(a) + " (Linux 6.13); napictl never falls back to the device-wide sysfs files"}
		}
	}
	dir := req.Dir
	if dir == "" {
		dir = DefaultDir
	}
	ns := c.NetNS()
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return nil, fmt.Errorf("napictl: own start time: %w", err)
	}
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := Path(dir, req.Ifname, req.Ifindex)
	r, err := readRecord(path)
	if err != nil {
		return nil, err
	}
	r.Ifname, r.Ifindex = req.Ifname, req.Ifindex
	if err := restoreStale(c, &r, ns, nil); err != nil {
		return nil, err
	}
	held := map[uint32]Entry{}
	for _, e := range r.Entries {
		if e.NetNS == ns {
			held[e.NAPI] = e
		}
	}
	h := &Holder{c: c, path: path}
	for _, id := range req.NAPIs {
		if e, ok := held[id]; ok {
			return nil, fmt.Errorf("napictl: napi %d of %s: deferral already held by pid %d", id, req.Ifname, e.PID)
		}
		n, err := c.NAPI(id)
		if err != nil {
			return nil, fmt.Errorf("napictl: %w", err)
		}
		if n.Ifindex != req.Ifindex {
			return nil, fmt.Errorf("napictl: napi %d belongs to ifindex %d, not %s (ifindex %d)", id, n.Ifindex, req.Ifname, req.Ifindex)
		}
		if n.DeferHardIRQs == nil || n.GROFlushTimeout == nil {
			return nil, &netdev.Error{Family: netdev.FamilyName, Op: "napi-get", Target: fmt.Sprintf("napi %d", id), NotSupported: true,
				Err: unix.EOPNOTSUPP, Missing: "the reply has no defer-hard-irqs or gro-flush-timeout"}
		}
		e := Entry{
			NAPI: id, PID: pid, Start: start, NetNS: ns,
			DeferHardIRQs: *n.DeferHardIRQs, GROFlushTimeoutNS: int64(*n.GROFlushTimeout),
			AppliedDeferHardIRQs: req.Settings.DeferHardIRQs, AppliedGROFlushTimeoutNS: int64(req.Settings.GROFlushTimeout),
		}
		if req.Settings.IRQSuspendTimeout > 0 {
			if n.IRQSuspendTimeout == nil {
				return nil, &netdev.Error{Op: "napi-get", Target: fmt.Sprintf("napi %d", id), NotSupported: true,
					Err: unix.EOPNOTSUPP, Missing: "the reply has no irq-suspend-timeout"}
			}
			orig := int64(*n.IRQSuspendTimeout)
			e.IRQSuspendTimeoutNS = &orig
			e.AppliedIRQSuspendNS = int64(req.Settings.IRQSuspendTimeout)
		}
		h.entries = append(h.entries, e)
		held[id] = h.entries[len(h.entries)-1]
	}
	// The originals are on disk before anything changes.
	r.Entries = append(r.Entries, h.entries...)
	if err := writeRecord(path, r); err != nil {
		return nil, err
	}
	d, g, is := req.Settings.DeferHardIRQs, req.Settings.GROFlushTimeout, req.Settings.IRQSuspendTimeout
	set := netdev.NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g}
	if is > 0 {
		set.IRQSuspendTimeout = &is
	}
	for i, e := range h.entries {
		if err := c.SetNAPI(e.NAPI, set); err != nil {
			for _, done := range h.entries[:i] {
				restore(c, req.Ifindex, done)
			}
			r.Entries = r.Entries[:len(r.Entries)-len(h.entries)]
			writeRecord(path, r)
			return nil, fmt.Errorf("napictl: %w", err)
		}
	}
	return h, nil
}

// Entries returns the holder's entries: each NAPI with its originals.
func (h *Holder) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// Close restores the original values and removes the holder's entries
// from the record. Calling it again does nothing.
func (h *Holder) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	unlock, err := lock(filepath.Dir(h.path))
	if err != nil {
		return err
	}
	defer unlock()
	r, err := readRecord(h.path)
	if err != nil {
		return err
	}
	var first error
	mine := map[uint32]bool{}
	for _, e := range h.entries {
		if err := restore(h.c, r.Ifindex, e); err != nil && first == nil {
			first = fmt.Errorf("napictl: restore napi %d: %w", e.NAPI, err)
		} else if err == nil {
			mine[e.NAPI] = true
		}
	}
	var keep []Entry
	for _, e := range r.Entries {
		if !(mine[e.NAPI] && e.PID == h.entries[0].PID && e.Start == h.entries[0].Start && e.NetNS == h.entries[0].NetNS) {
			keep = append(keep, e)
		}
	}
	r.Entries = keep
	if err := writeRecord(h.path, r); err != nil && first == nil {
		first = err
	}
	return first
}
