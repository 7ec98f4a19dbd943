//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xdpnet"
)

// ---- xdpnet: the UDP socket over AF_XDP ----

// xdpnetRX is a UDP sink on package xdpnet: with queues, one goroutine
// per RX queue reads datagrams in place (Queue.ReadView); without, one
// goroutine reads the conn's ReadBatch, which copies every datagram into
// the caller's buffers. Both parse and verify every frame (checksums).
type xdpnetRX struct {
	queues bool
	nap    bool // Config.RXNap = Options.Nap
	c      *xdpnet.UDPConn
	l      loops
}

func (r *xdpnetRX) start(h *vethpair.Host, o *Options) error {
	cfg := xdpnet.Config{BatchSize: o.Batch}
	if r.nap {
		cfg.RXNap = o.Nap
	}
	if err := h.Do(func() (err error) {
		r.c, err = xdpnet.ListenUDP(h.Link, netip.AddrPortFrom(h.IPv4, o.Port), cfg)
		return err
	}); err != nil {
		return fmt.Errorf("xdpnet: %w", err)
	}
	if !r.queues {
		r.l.run(1, func(_ int, ctr *atomic.Uint64) error {
			msgs := make([]xdpnet.Message, o.Batch)
			for i := range msgs {
				msgs[i].Buf = make([]byte, 2048)
			}
			for !r.l.quit.Load() {
				r.c.SetReadDeadline(time.Now().Add(idle))
				n, err := r.c.ReadBatch(msgs)
				switch {
				case err == nil:
					ctr.Add(uint64(n))
				case errors.Is(err, net.ErrClosed):
					return nil
				case !isTimeout(err):
					return err
				}
			}
			return nil
		})
		return nil
	}
	qs := r.c.Queues()
	r.l.run(len(qs), func(i int, ctr *atomic.Uint64) error {
		q := qs[i]
		msgs := make([]xdpnet.Message, o.Batch)
		for !r.l.quit.Load() {
			n, err := q.ReadView(msgs, idle)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				return err
			}
			ctr.Add(uint64(n))
		}
		q.Release()
		return nil
	})
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (r *xdpnetRX) count() (uint64, error) { return sum(r.l.ctr), nil }

func (r *xdpnetRX) stop() error {
	r.l.quit.Store(true)
	err := r.l.halt()
	if r.c != nil {
		r.c.Close()
	}
	return err
}

func (r *xdpnetRX) appCPU() time.Duration { return r.l.appCPU() }
func (r *xdpnetRX) appSys() time.Duration { return r.l.appSys() }

func (r *xdpnetRX) stats() map[string]uint64 {
	if r.c == nil {
		return nil
	}
	t := r.c.Stats().Total()
	return map[string]uint64{"delivered": t.Datagrams, "dropped": t.Drops.Total(), "socket_rx_dropped": t.Socket.RXDropped, "socket_ring_full": t.Socket.RXRingFull}
}

// ---- kernel UDP sockets with UDP_GRO ----

// socketGRORx is the kernel socket sink with UDP_GRO: the kernel hands
// consecutive datagrams of a flow over as one buffer with their segment
// size (a cmsg), and this counts the datagrams in it. The generator's
// flows arrive interleaved, so how much GRO merges depends on the NAPI
// batches.
type socketGRORx struct {
	fds []int
	l   loops
}

func (r *socketGRORx) start(h *vethpair.Host, o *Options) error {
	n := o.Sockets
	var err error
	if r.fds, err = udpSinks(h, o, true); err != nil {
		return err
	}
	r.l.run(n, func(i int, ctr *atomic.Uint64) error {
		fd := r.fds[i]
		const bufLen = 65536 // a GRO buffer holds up to 64 segments
		batch := max(1, o.Batch/8)
		msgs := make([]mmsghdr, batch)
		iovs := make([]unix.Iovec, batch)
		buf := make([]byte, batch*bufLen)
		oob := make([]byte, batch*64)
		for j := range msgs {
			iovs[j].Base = &buf[j*bufLen]
			iovs[j].SetLen(bufLen)
			msgs[j].hdr.Iov = &iovs[j]
			msgs[j].hdr.SetIovlen(1)
		}
		for !r.l.quit.Load() {
			for j := range msgs {
				msgs[j].hdr.Control = &oob[j*64]
				msgs[j].hdr.SetControllen(64)
			}
			got, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), unix.MSG_WAITFORONE, 0, 0)
			switch e {
			case 0:
				var d uint64
				for j := 0; j < int(got); j++ {
					d += groSegments(int(msgs[j].len), oob[j*64:j*64+int(msgs[j].hdr.Controllen)])
				}
				ctr.Add(d)
			case unix.EAGAIN, unix.EINTR:
			default:
				return fmt.Errorf("recvmmsg: %w", e)
			}
		}
		return nil
	})
	return nil
}

// groSegments counts the datagrams in a UDP_GRO buffer of n bytes whose
// control messages are oob.
func groSegments(n int, oob []byte) uint64 {
	cms, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, cm := range cms {
			if cm.Header.Level == unix.IPPROTO_UDP && cm.Header.Type == unix.UDP_GRO && len(cm.Data) >= 2 {
				seg := int(*(*uint16)(unsafe.Pointer(&cm.Data[0])))
				if seg > 0 {
					return uint64((n + seg - 1) / seg)
				}
			}
		}
	}
	return 1
}

func (r *socketGRORx) count() (uint64, error) { return sum(r.l.ctr), nil }

func (r *socketGRORx) stop() error {
	err := r.l.halt()
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	return err
}

func (r *socketGRORx) appCPU() time.Duration { return r.l.appCPU() }
func (r *socketGRORx) appSys() time.Duration { return r.l.appSys() }
