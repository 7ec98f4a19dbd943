//go:build linux

package xdpnet

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Closing a conn: the program first (the traffic goes back to the
// kernel), then what writes left on the TX rings, the sockets, and the
// UMEMs last, once no view into them is out.

// Close releases the conn: the XDP program is detached (the traffic goes
// back to the kernel), blocked calls end with errors matching
// net.ErrClosed, and the sockets, the kernel socket and its port are
// released before Close returns. Only the UMEM of a queue whose ReadView
// views are still out stays mapped until Release. Close may be called
// from any goroutine; later calls return nil.
func (c *UDPConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		c.Detached() // remembered for Stats after Close
		c.localMu.Lock()
		c.prog = nil
		c.localMu.Unlock()
		if p := c.dev.Program(); p != nil {
			c.closeErr = p.Close()
		}
		c.wake()
		c.drainTX()
		// Closing the AF_XDP sockets ends waits on them (and waits for
		// the library's calls on them); the UMEM stays mapped.
		var wg sync.WaitGroup
		for _, x := range c.xqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x.s.Close() // an RCU grace period each: in parallel
			}()
		}
		wg.Wait()
		for _, q := range c.queues {
			for q.calls.Load() != 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		c.release()
		c.closeDone.Store(true)
		c.freeUMEM()
	})
	return c.closeErr
}

// drainTXFor bounds how long Close lets the kernel send what writes left
// on the TX rings.
const drainTXFor = 100 * time.Millisecond

// drainTX gives the datagrams still on the TX rings (copy mode sends a
// budget of frames per kick) up to drainTXFor to leave, so that what a
// write accepted is not dropped with the socket. Writers still in a call
// hold the queue's TX lock; they end at Close's flag.
func (c *UDPConn) drainTX() {
	deadline := time.Now().Add(drainTXFor)
	for _, x := range c.xqs {
		if !x.txmu.TryLock() {
			continue
		}
		for x.s.TXPending() > 0 && time.Now().Before(deadline) && x.s.Err() == nil {
			if x.s.Complete() == 0 {
				if x.s.Kick() != nil {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		x.txmu.Unlock()
	}
}

// freeUMEM unmaps the UMEMs once the conn is closed and no queue has
// views out.
func (c *UDPConn) freeUMEM() {
	if !c.closeDone.Load() {
		return // Close calls it again when it is through
	}
	for _, q := range c.queues {
		if q.views.Load() {
			return
		}
	}
	c.unmap.Do(func() {
		if c.dev != nil {
			c.dev.Close()
		}
	})
}

// release closes what the conn holds but its AF_XDP sockets and UMEMs. It
// runs once, in Close or when open fails.
func (c *UDPConn) release() {
	c.finish.Do(func() {
		for _, ks := range c.kss {
			ks.c.Close()
		}
		if c.res != nil {
			c.res.Close()
		}
		if c.wakeFD >= 0 {
			unix.Close(c.wakeFD)
			c.wakeFD = -1
		}
	})
}
