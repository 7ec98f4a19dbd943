//go:build linux

package xdpnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/xsk"
)

// Group reads every RX queue of a conn in one goroutine, in place: the
// shape for a machine with fewer CPUs than queues, where one thread that
// wakes once for all of them (xsk.Poller; with Config.Coalesce, one
// coalesce.GroupReceiver) costs less than a goroutine per queue. Like a
// Queue's, its read methods belong to one goroutine and take no lock.
//
// Datagrams that reach the kernel socket instead are read too, when a
// wait ends or every few reads: they may wait up to a quarter second
// longer than the rest.
type Group struct {
	c       *UDPConn
	qs      []*xskQueue // the AF_XDP queues
	poller  *xsk.Poller
	grp     *coalesce.GroupReceiver
	bs      []*xsk.Batch // with the poller: each queue's batch of views
	gbs     []*xsk.Batch // with the group receiver: its last batches
	holding bool
	per     int // with the poller: the views each queue's batch can hold
	turn    int
	nap     xsk.Napper // with the poller: nap or wait in poll (Config.RXNap)
}

// Group returns the conn's reader of every queue. It makes the conn read
// through it: from then on the conn's own read methods and its Queues'
// fail with ErrReadConflict, and so does a second Group; it fails itself
// when the conn is read another way already.
func (c *UDPConn) Group() (*Group, error) {
	if !c.readers.CompareAndSwap(0, readGroup) {
		return nil, fmt.Errorf("group: %w", ErrReadConflict)
	}
	g := &Group{c: c, qs: c.xqs}
	socks := make([]*xsk.Socket, len(g.qs))
	for i, x := range g.qs {
		socks[i] = x.s
	}
	if c.cfg.Coalesce != nil {
		p := *c.cfg.Coalesce
		if p.BatchSize == 0 {
			p.BatchSize = c.cfg.BatchSize
		}
		var err error
		if g.grp, err = coalesce.NewGroupReceiver(socks, p, coalesce.Options{IdleWait: readSlice}); err != nil {
			return nil, fmt.Errorf("group: %w", err)
		}
	} else {
		g.poller = xsk.NewPoller(socks...)
		g.nap = xsk.NewNapper(c.cfg.RXNap, socks...)
	}
	return g, nil
}

// enter marks a call in progress on every queue (Close waits for it).
func (g *Group) enter() bool {
	for i, x := range g.qs {
		if !x.q.acquire() {
			for _, p := range g.qs[:i] {
				p.q.release()
			}
			return false
		}
	}
	return true
}

func (g *Group) leave() {
	for _, x := range g.qs {
		x.q.release()
	}
}

// ReadView fills msgs with up to len(msgs) datagrams of any queue without
// copying them, as Queue.ReadView does: the views are valid until the
// next ReadView or Release. It blocks up to timeout (negative: without
// limit) for the first and returns 0 and a nil error when the timeout
// passes. With Config.Coalesce, msgs must hold a whole batch of every
// queue (BatchSize × queues), or it fails with ErrInvalidConfig.
func (g *Group) ReadView(msgs []Message, timeout time.Duration) (int, error) {
	g.Release()
	c := g.c
	if len(msgs) == 0 {
		return 0, nil
	}
	if g.grp != nil && len(msgs) < g.grp.Params().BatchSize*len(g.qs) {
		return 0, c.opErr("read", netip.AddrPort{}, fmt.Errorf("%w: %d messages for %d queues of batches of %d", ErrInvalidConfig, len(msgs), len(g.qs), g.grp.Params().BatchSize))
	}
	if !g.enter() {
		return 0, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
	}
	defer g.leave()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for round := 0; ; round++ {
		if n := g.kernel(msgs, round); n > 0 {
			return n, nil
		}
		if c.detached.Load() {
			// Someone detached the XDP program: nothing reaches the
			// AF_XDP sockets any more, the kernel socket gets it all.
			if over, err := g.kernelWait(timeout, deadline); over || err != nil {
				return 0, err
			}
			continue
		}
		var n int
		var err error
		if g.grp != nil {
			n, err = g.coalesced(msgs, timeout, deadline)
		} else {
			n = g.receive(msgs)
		}
		if err != nil || n > 0 {
			return n, err
		}
		left := readSlice
		if timeout == 0 {
			return 0, nil
		}
		if timeout > 0 {
			if left = min(left, time.Until(deadline)); left <= 0 {
				return 0, nil
			}
		}
		if g.grp != nil {
			c.kready = true // the group receiver waited a slice for nothing
			continue
		}
		if d := g.nap.Idle(); d > 0 {
			if err := g.poller.Sleep(min(d, left)); err != nil {
				return 0, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
			}
			continue
		}
		ready, err := g.poller.WaitRX(left)
		if errors.Is(err, xsk.ErrDetached) {
			c.detached.Store(true)
			continue
		}
		if err != nil {
			if errors.Is(err, xsk.ErrClosed) || c.closed.Load() {
				return 0, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
			}
			return 0, c.opErr("read", netip.AddrPort{}, err)
		}
		if !ready {
			c.kready = true // a slice without AF_XDP traffic: the kernel socket's turn
		}
	}
}

// kernel reads the kernel socket's datagrams into the kernel queue's
// buffers, as views, when it may have some.
func (g *Group) kernel(msgs []Message, round int) int {
	c := g.c
	if !c.kready && (g.turn+round)%kernelEvery != 0 {
		return 0
	}
	if !c.kernel.acquire() {
		return 0
	}
	defer c.kernel.release()
	n, _ := c.kq.view(msgs)
	c.kready = n > 0
	return n
}

// kernelWait waits on the kernel socket alone, until deadline (with a
// positive timeout); over says the timeout passed.
func (g *Group) kernelWait(timeout time.Duration, deadline time.Time) (over bool, err error) {
	c := g.c
	left := time.Duration(-1)
	if timeout == 0 {
		return true, nil
	} else if timeout > 0 {
		if left = time.Until(deadline); left <= 0 {
			return true, nil
		}
	}
	if !c.kernel.acquire() {
		return false, c.opErr("read", netip.AddrPort{}, net.ErrClosed)
	}
	defer c.kernel.release()
	if err := c.kq.wait(left); err != nil {
		return false, c.opErr("read", netip.AddrPort{}, err)
	}
	c.kready = true
	return false, nil
}

// receive takes what the queues have, in turn, as views.
func (g *Group) receive(msgs []Message) int {
	per := max(1, len(msgs)/len(g.qs))
	if g.bs == nil || g.per != per {
		g.bs = make([]*xsk.Batch, len(g.qs))
		for i, x := range g.qs {
			g.bs[i] = x.s.NewBatch(per)
		}
		g.per = per
	}
	n := 0
	for i := 0; i < len(g.qs) && n+per <= len(msgs); i++ {
		j := (g.turn + i) % len(g.qs)
		x, b := g.qs[j], g.bs[j]
		k := x.s.Receive(b)
		if k == 0 {
			continue
		}
		g.nap.Received(k)
		x.vb = b
		n += x.viewsOf(msgs[n:])
	}
	g.turn++
	if n > 0 {
		g.hold()
	} else {
		g.giveBack()
	}
	return n
}

// coalesced takes the group receiver's next batches as views. It waits at
// most a slice, so that the kernel socket is looked at while idle.
func (g *Group) coalesced(msgs []Message, timeout time.Duration, deadline time.Time) (int, error) {
	until := time.Now().Add(readSlice)
	switch {
	case timeout == 0:
		until = time.Now()
	case timeout > 0 && deadline.Before(until):
		until = deadline
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	bs, err := g.grp.Next(ctx)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return 0, nil
		case errors.Is(err, xsk.ErrDetached):
			g.c.detached.Store(true)
			return 0, nil
		case errors.Is(err, xsk.ErrClosed) || g.c.closed.Load():
			return 0, g.c.opErr("read", netip.AddrPort{}, net.ErrClosed)
		}
		return 0, g.c.opErr("read", netip.AddrPort{}, err)
	}
	g.gbs = bs
	n := 0
	for i, x := range g.qs {
		x.vb = bs[i]
		n += x.viewsOf(msgs[n:])
	}
	if n > 0 {
		g.hold()
		return n, nil
	}
	g.grp.Release()
	g.gbs = nil
	return 0, nil
}

// hold marks the views as out on every queue: Close keeps the UMEM
// mapped until Release.
func (g *Group) hold() {
	g.holding = true
	for _, x := range g.qs {
		x.q.views.Store(true)
	}
}

// giveBack releases the frames the group holds, without views out.
func (g *Group) giveBack() {
	if g.grp != nil {
		if g.gbs != nil {
			g.grp.Release()
			g.gbs = nil
		}
		return
	}
	for i, x := range g.qs {
		if g.bs != nil && g.bs[i].Len() > 0 {
			x.s.Release(g.bs[i])
		}
	}
}

// Release gives the frames of the last ReadView back to the kernel; the
// views become invalid.
func (g *Group) Release() {
	if !g.holding {
		return
	}
	g.holding = false
	g.giveBack()
	for _, x := range g.qs {
		x.q.views.Store(false)
	}
	if g.c.closed.Load() {
		g.c.freeUMEM()
	}
}

// CoalesceStats returns the group receiver's counters, when the conn
// coalesces (Config.Coalesce). It may be called from any goroutine.
func (g *Group) CoalesceStats() (coalesce.RXStats, bool) {
	if g.grp == nil {
		return coalesce.RXStats{}, false
	}
	return g.grp.Stats(), true
}
