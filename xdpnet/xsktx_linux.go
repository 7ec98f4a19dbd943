//go:build linux

package xdpnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// The TX side of an xskQueue: datagrams built into UMEM frames and put on
// the socket's TX ring, or handed to the kernel socket while the next hop
// is not known (or for datagrams longer than a frame).

// write sends msgs in order through the TX ring (Queue.WriteBatch).
func (x *xskQueue) write(msgs []Message) (int, error) {
	c := x.q.c
	x.txmu.Lock()
	defer x.txmu.Unlock()
	if !x.q.acquire() {
		return 0, c.opErr("write", netip.AddrPort{}, net.ErrClosed)
	}
	defer x.q.release()
	done := 0 // messages wholly on the ring
	// Consecutive messages to one address look its hop up once.
	var last netip.Addr
	var hop nexthop.Hop
	for i := range msgs {
		m := &msgs[i]
		dst := c.peer(c.dstOf(m))
		if dst.Addr() != last {
			if err := c.checkDst(dst); err != nil {
				return x.failAt(i, done, c.opErr("write", dst, err))
			}
			var ok bool
			if hop, ok = c.res.Lookup(dst.Addr()); ok {
				last = dst.Addr()
			} else {
				last = netip.Addr{}
			}
		} else if dst.Port() == 0 {
			return x.failAt(i, done, c.opErr("write", dst, c.checkDst(dst)))
		}
		if !last.IsValid() || c.overFrame(m, dst) {
			// Not resolved yet (a new peer, or the tables changed): the
			// resolver starts on it, and the kernel sends this message as
			// it sends its own, queueing it while it resolves the
			// neighbour. Nothing blocks; a failure the resolver remembers
			// (nobody answered) is this write's error. A datagram longer
			// than a UMEM frame holds (jumbo MTU) goes the same way.
			mtu := hop.MTU
			if !last.IsValid() {
				if err := c.res.Start(dst.Addr()); err != nil {
					return x.failAt(i, done, c.opErr("write", dst, err))
				}
				mtu = c.mtu
			}
			// The kernel's socket checks a single datagram's size itself,
			// with the kernel's MTU, which is current: ours may be a
			// moment old (an MTU raised just now), and the kernel's
			// EMSGSIZE (its socket never fragments) is the answer then.
			if err := c.checkSize(m, dst, mtu, false); err != nil && m.SegSize > 0 && m.SegSize < m.N {
				return x.failAt(i, done, c.opErr("write", dst, err))
			}
			if err := x.flushTX(); err != nil {
				return done, c.opErr("write", dst, err)
			}
			if _, err := c.kq.write(msgs[i : i+1]); err != nil {
				return i, err
			}
			done = i + 1
			continue
		}
		if err := x.queueMessage(m, dst, hop); err != nil {
			return x.failAt(i, done, c.opErr("write", dst, err))
		}
		if x.tb.Cap()-x.tb.Len() < maxSegments {
			if err := x.flushTX(); err != nil {
				return done, c.opErr("write", dst, err)
			}
			done = i + 1
		}
	}
	if err := x.flushTX(); err != nil {
		return done, c.opErr("write", netip.AddrPort{}, err)
	}
	return len(msgs), nil
}

// failAt ends a WriteBatch whose message i failed with err: the messages
// before it, queued on tb, still go out.
func (x *xskQueue) failAt(i, done int, err error) (int, error) {
	if x.flushTX() == nil {
		done = i
	}
	return done, err
}

// queueMessage writes m's datagrams into frames on x.tb (the caller holds
// txmu and flushes).
func (x *xskQueue) queueMessage(m *Message, dst netip.AddrPort, hop nexthop.Hop) error {
	c := x.q.c
	if m.N < 0 || m.N > len(m.Buf) {
		return fmt.Errorf("%w: message N %d beyond its %d-byte Buf", ErrInvalidConfig, m.N, len(m.Buf))
	}
	payload := m.Buf[:m.N]
	src := c.laddr.Addr()
	if src.IsUnspecified() {
		src = hop.Src
	}
	if !src.IsValid() || src.Is4() != dst.Addr().Is4() {
		return fmt.Errorf("no %s source address for %v on %s: %w", family(dst.Addr()), dst, c.ifname, syscall.EADDRNOTAVAIL)
	}
	seg := len(payload)
	segs := 1
	if m.SegSize > 0 && len(payload) > m.SegSize {
		seg = m.SegSize
		segs = (len(payload) + seg - 1) / seg
		if segs > maxSegments {
			return fmt.Errorf("%w: %d bytes in segments of %d make %d datagrams, at most %d", ErrInvalidConfig, len(payload), seg, segs, maxSegments)
		}
	} else if m.SegSize < 0 {
		return fmt.Errorf("%w: SegSize %d", ErrInvalidConfig, m.SegSize)
	}
	hlen := headerLen(dst.Addr())
	if err := c.checkSize(m, dst, hop.MTU, true); err != nil {
		return err
	}
	sport, err := c.sourcePort(m)
	if err != nil {
		return err
	}
	tos := uint8(c.cfg.TOS)
	if m.ECN != 0 {
		tos = tos&^3 | m.ECN&3
	}
	h := offload.Headers{SrcMAC: c.mac, DstMAC: hop.MAC, Src: netip.AddrPortFrom(src, sport), Dst: dst, TTL: uint8(c.cfg.TTL), TOS: tos}
	// Frames for every segment first: a message goes out whole.
	if x.tb.Cap()-x.tb.Len() < segs {
		if err := x.flushTX(); err != nil {
			return err
		}
	}
	if err := x.alloc(segs); err != nil {
		return err
	}
	base := x.tb.Len() - segs
	for i := 0; i < segs; i++ {
		p := payload[i*seg : min(len(payload), (i+1)*seg)]
		if segs == 1 {
			p = payload
		}
		fi := base + i
		buf := x.tb.Buffer(fi)
		var n int
		var err error
		if c.cfg.TXChecksum == TXChecksumOffload {
			n, err = h.BuildUDPPartial(buf, x.ipID, p)
			x.tb.RequestChecksum(fi, uint16(hlen-udpLen), offload.UDPChecksumOffset)
		} else {
			n, err = h.BuildUDP(buf, x.ipID, p)
		}
		if err != nil {
			// checkSize and the conn's configuration rule this out.
			x.s.FreeTail(x.tb, base)
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		x.ipID++
		x.tb.SetLen(fi, n)
	}
	x.q.ctr.sent.Add(uint64(segs))
	x.q.ctr.sentBytes.Add(uint64(len(payload)))
	return nil
}

// alloc takes n frames onto tb, flushing and waiting (until the write
// deadline) while the pool has fewer.
func (x *xskQueue) alloc(n int) error {
	for {
		start := x.tb.Len()
		if x.s.Alloc(x.tb, n) == n {
			return nil
		}
		x.s.FreeTail(x.tb, start)
		if err := x.flushTX(); err != nil {
			return err
		}
		if err := x.waitTX(); err != nil {
			return err
		}
	}
}

// flushTX puts every frame of tb on the TX ring, waiting (until the write
// deadline) while the ring is full.
func (x *xskQueue) flushTX() error {
	for x.tb.Len() > 0 {
		_, err := x.s.Transmit(x.tb)
		if err != nil {
			x.s.Free(x.tb)
			if errors.Is(err, xsk.ErrClosed) {
				return net.ErrClosed
			}
			if errors.Is(err, xsk.ErrLinkDown) {
				return fmt.Errorf("%w: %w", err, syscall.ENETDOWN)
			}
			return err
		}
		if x.tb.Len() == 0 {
			break
		}
		x.s.Complete()
		if err := x.waitTX(); err != nil {
			x.s.Free(x.tb)
			return err
		}
	}
	x.s.Complete()
	return nil
}

// waitTX waits a moment for the kernel to make room (copy mode sends when
// kicked; Transmit kicks), bounded by the write deadline and Close.
func (x *xskQueue) waitTX() error {
	c := x.q.c
	if c.closed.Load() {
		return net.ErrClosed
	}
	if dl := c.wdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return os.ErrDeadlineExceeded
	}
	if err := x.s.Sleep(50 * time.Microsecond); err != nil {
		if errors.Is(err, xsk.ErrClosed) {
			return net.ErrClosed
		}
		return err
	}
	if x.s.Complete() == 0 {
		if err := x.s.Kick(); err != nil && !errors.Is(err, xsk.ErrLinkDown) {
			return err
		}
	}
	return nil
}
