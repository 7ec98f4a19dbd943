//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// detachWatch notices that someone else detached a Program: `bpftool
// link detach` on its bpf_link, or, in a libxdp dispatcher, `xdp-loader
// unload` of its program or `ip link set DEV xdp off` of the dispatcher.
// Nothing tells a process that; the sockets' RX waits ask (Program.probe)
// when a slice of their wait passed with nothing, at most every
// detachCheckEvery for all of a program's sockets together.
type detachWatch struct {
	mu      sync.Mutex // the program's link, member, Local set and sockets, against Close
	closing atomic.Bool
	next    atomic.Int64 // Unix nanoseconds before which probe does not ask
	err     atomic.Pointer[error]
}

// detachCheckEvery paces probe: with RX waits looking every
// goneCheckEvery, a detached program is noticed within half a second.
const detachCheckEvery = 250 * time.Millisecond

// probe is Err for the sockets' RX waits: paced, and nil once Close began.
func (p *Program) probe() error {
	w := &p.watch
	if e := w.err.Load(); e != nil {
		return *e
	}
	now := time.Now().UnixNano()
	n := w.next.Load()
	if now < n || !w.next.CompareAndSwap(n, now+int64(detachCheckEvery)) {
		return nil
	}
	return p.Err()
}

// Err returns an error matching ErrDetached once the program no longer
// runs on its interface though Close was not called: its bpf_link was
// detached (`bpftool link detach`), or, in a libxdp dispatcher, the
// dispatcher is gone or no longer holds the program (`xdp-loader
// unload`, `ip link set DEV xdp off`). Frames then go to the kernel's
// stack, and the sockets receive nothing more: their RX waits (Wait,
// Poller.WaitRX) and Device.Receive end with the same error within about
// half a second. Sending is not affected. A program that only fills the
// caller's XSKMAP (UserMap without UserProgram) is never reported
// detached. Err asks the kernel (a bpf syscall; for a dispatcher member a
// netlink request and the pins too); it may be called from any goroutine
// and returns nil after Close.
func (p *Program) Err() error {
	w := &p.watch
	if e := w.err.Load(); e != nil {
		return *e
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing.Load() {
		return nil
	}
	why := p.detached()
	if why == "" {
		return nil
	}
	var err error = &OpError{Op: "XDP program on", Ifindex: p.ifindex, Queue: -1,
		Err: fmt.Errorf("%w: %s; frames go to the kernel's stack again and the sockets receive nothing more", ErrDetached, why)}
	w.err.CompareAndSwap(nil, &err)
	return *w.err.Load()
}

// detached says why the program no longer runs on the interface, or ""
// while it does, or when the kernel's answer does not tell (an error is
// not taken for a detach). w.mu held.
func (p *Program) detached() string {
	switch {
	case p.link != nil:
		info, err := p.link.Info()
		if err != nil {
			return ""
		}
		if x := info.XDP(); x != nil && x.Ifindex == 0 {
			if p.ns != nil {
				// A deleted device detaches its links too: that is the
				// sockets' ErrNoDevice to report, not a detach.
				if _, _, err := attachedProgram(*p.ns, p.ifindex); errors.Is(err, ErrNoDevice) {
					return ""
				}
			}
			return fmt.Sprintf("its bpf_link %d was detached from the interface (bpftool link detach)", info.ID)
		}
	case p.member != nil:
		m := p.member
		a, _, err := attachedProgram(m.ns, p.ifindex)
		if err != nil {
			return ""
		}
		if a == nil {
			return "the libxdp dispatcher it ran in was detached (ip link set DEV xdp off, or xdp-loader unload --all)"
		}
		if a.name != dispatcherName {
			return fmt.Sprintf("the libxdp dispatcher it ran in was replaced by program %d %q", a.id, a.name)
		}
		d, err := readDispatcher(a.id, p.ifindex, m.dir)
		if err != nil || d == nil {
			return ""
		}
		defer d.close()
		if !slices.ContainsFunc(d.comps, func(c component) bool { return c.id == m.ownID }) {
			return fmt.Sprintf("the libxdp dispatcher (id %d) no longer holds it (xdp-loader unload)", a.id)
		}
	}
	return ""
}

// setProgram records the program that feeds s (Register), whose detach its
// RX waits look for; nil forgets it.
func (s *Socket) setProgram(p *Program) { s.prog.Store(p) }

// probeRX is probeGone for an RX wait: a device that is gone, then a
// program that was detached.
func (s *Socket) probeRX() error {
	if err := s.probeGone(); err != nil {
		return err
	}
	if p := s.prog.Load(); p != nil {
		return p.probe()
	}
	return nil
}
