//go:build linux

package main

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	asavie "github.com/asavie/xdp"

	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

// sender is a txonly backend: it sends the template frame from one
// socket per queue of host h. What arrives is counted at the peer by an
// XDP_DROP counter; sent reports the sender's own count.
type sender interface {
	receiver
	sent() uint64
}

// ---- xdpio txonly ----

type xdpioTX struct {
	socks []*xsk.Socket
	umems []*xsk.UMEM
	l     loops
	rx    *trafficgen.Counter // at the peer
	// run sends through the runner with its defaults (Device.Send,
	// RunConfig{}) on sockets Open made with its defaults.
	run bool
	dev *xsk.Device
}

func (t *xdpioTX) start(h *vethpair.Host, o *Options) error {
	if t.run {
		return t.startRun(h, o)
	}
	err := h.Do(func() error {
		for q := 0; q < o.Queues; q++ {
			u, err := xsk.NewUMEM(xsk.UMEMConfig{FrameSize: o.FrameSize, NumFrames: o.NumFrames})
			if err != nil {
				return err
			}
			t.umems = append(t.umems, u)
			s, err := xsk.NewSocket(u, h.Ifindex, q, xsk.SocketConfig{
				NoRX:               true,
				TXRingSize:         o.RingSize,
				CompletionRingSize: o.RingSize,
				Frames:             o.NumFrames,
				TXBudget:           o.TXBudget,
			})
			if err != nil {
				return err
			}
			t.socks = append(t.socks, s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("xdpio: %w", err)
	}
	for _, s := range t.socks {
		// Write the template into every frame once; frames keep it as
		// they cycle through the TX and completion rings.
		b := s.NewBatch(o.NumFrames)
		n := s.Alloc(b, o.NumFrames)
		for i := 0; i < n; i++ {
			copy(b.Buffer(i), o.frame)
		}
		s.Free(b)
	}
	t.l.run(len(t.socks), func(i int, ctr *atomic.Uint64) error {
		s := t.socks[i]
		batch := o.TXBatch
		if batch == 0 {
			batch = o.RingSize
		}
		b := s.NewBatch(batch)
		size := len(o.frame)
		for !t.l.quit.Load() {
			if o.EagerComplete {
				// Reclaim completed frames first, so that Alloc hands
				// out the recently sent (cache-warm) ones from the LIFO
				// pool instead of cycling through the whole UMEM.
				s.Complete()
			}
			have := b.Len()
			n := s.Alloc(b, batch-have)
			for j := have; j < have+n; j++ {
				b.SetLen(j, size)
			}
			if b.Len() == 0 {
				// Every frame is in flight: wait for completions.
				if _, err := s.Wait(idle, true); err != nil {
					return err
				}
				s.Complete()
				continue
			}
			sent, err := s.Transmit(b)
			if err != nil {
				return err
			}
			ctr.Add(uint64(sent))
		}
		s.Free(b)
		return nil
	})
	return nil
}

// startRun opens every queue with Open's defaults for a sender and sends
// through Device.Send.
func (t *xdpioTX) startRun(h *vethpair.Host, o *Options) error {
	err := h.Do(func() (err error) {
		// The same UMEM and rings as every other sender: what is
		// measured is the runner's loop.
		t.dev, err = xsk.Open(h.Link, xsk.Config{
			Queues:    seq(o.Queues),
			NoProgram: true,
			UMEM:      xsk.UMEMConfig{FrameSize: o.FrameSize, NumFrames: o.NumFrames},
			Socket:    xsk.SocketConfig{NoRX: true, TXRingSize: o.RingSize, CompletionRingSize: o.RingSize, Frames: o.NumFrames},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("xdpio: %w", err)
	}
	size := len(o.frame)
	for _, s := range t.dev.Sockets() {
		// Frames keep the template as they cycle, as for xdpio.
		b := s.NewBatch(o.NumFrames)
		n := s.Alloc(b, b.Cap())
		for i := 0; i < n; i++ {
			copy(b.Buffer(i), o.frame)
		}
		s.Free(b)
	}
	t.l.run(1, func(_ int, ctr *atomic.Uint64) error {
		return t.dev.Send(t.l.ctx, xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) error {
			t.l.thread(s.Queue())
			for i := range b.Len() {
				b.SetLen(i, size)
			}
			ctr.Add(uint64(b.Len()))
			return nil
		})
	})
	return nil
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func (t *xdpioTX) sent() uint64 { return sum(t.l.ctr) }

func (t *xdpioTX) count() (uint64, error) { return t.rx.Count() }

func (t *xdpioTX) stop() error {
	err := t.l.halt()
	if t.dev != nil {
		err = errors.Join(err, t.dev.Close())
	}
	for _, s := range t.socks {
		s.Close()
	}
	for _, u := range t.umems {
		u.Close()
	}
	return err
}

// ---- asavie/xdp txonly ----

type asavieTX struct {
	socks []*asavie.Socket
	l     loops
	rx    *trafficgen.Counter
}

func (t *asavieTX) start(h *vethpair.Host, o *Options) error {
	err := h.Do(func() error {
		// asavie/xdp's Poll reads the RX ring unconditionally: keep one.
		opts := asavieOptions(o)
		for q := 0; q < o.Queues; q++ {
			s, err := newAsavieSocket(h.Ifindex, q, opts)
			if err != nil {
				return err
			}
			t.socks = append(t.socks, s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("asavie/xdp: %w", err)
	}
	for _, s := range t.socks {
		for _, d := range s.GetDescs(o.NumFrames) {
			copy(s.GetFrame(d), o.frame)
		}
	}
	t.l.run(len(t.socks), func(i int, ctr *atomic.Uint64) (err error) {
		defer recoverInto(&err)
		s := t.socks[i]
		size := uint32(len(o.frame))
		// The send loop of asavie/xdp's sendudp example.
		for !t.l.quit.Load() {
			descs := s.GetDescs(s.NumFreeTxSlots())
			for j := range descs {
				descs[j].Len = size
			}
			ctr.Add(uint64(s.Transmit(descs)))
			if _, _, err := s.Poll(int(idle.Milliseconds())); err != nil {
				return err
			}
		}
		return nil
	})
	return nil
}

func (t *asavieTX) sent() uint64 { return sum(t.l.ctr) }

func (t *asavieTX) count() (uint64, error) { return t.rx.Count() }

func (t *asavieTX) stop() error {
	err := t.l.halt()
	for _, s := range t.socks {
		err = errors.Join(err, closeAsavie(s))
	}
	return err
}

func (t *xdpioTX) appCPU() time.Duration  { return t.l.appCPU() }
func (t *xdpioTX) appSys() time.Duration  { return t.l.appSys() }
func (t *asavieTX) appCPU() time.Duration { return t.l.appCPU() }
func (t *asavieTX) appSys() time.Duration { return t.l.appSys() }

// ---- kernel UDP sockets with UDP_SEGMENT (GSO) ----

// socketGSOTx sends the template's UDP payload through kernel UDP sockets,
// one per queue's worth of senders, each write a UDP_SEGMENT (GSO) batch
// that the kernel cuts into datagrams of the template's size: the fastest
// way the kernel's own stack sends UDP, and the peer a user could pick
// instead of AF_XDP.
type socketGSOTx struct {
	fds []int
	l   loops
	rx  *trafficgen.Counter
}

// gsoBatch is how many datagrams one GSO write carries (the kernel takes
// up to 64 segments and 64 KiB).
func gsoBatch(payload int) int { return max(1, min(64, 65000/payload)) }

func (t *socketGSOTx) start(h *vethpair.Host, o *Options) error {
	f := o.frame
	lo, r := offload.Parse(f)
	if r != offload.ReasonNone || lo.IPv6 || lo.Proto != offload.ProtoUDP || lo.Payload == 0 {
		return fmt.Errorf("socket-gso: the template is not an IPv4 UDP frame")
	}
	// The template is the generator's frame, from A to B: B sends back.
	dst := netip.AddrFrom4([4]byte(lo.Src(f)))
	src := netip.AddrFrom4([4]byte(lo.Dst(f)))
	udp := offload.UDP(f[lo.L4:])
	sport, dport := udp.SrcPort(), udp.DstPort()
	payload := lo.End - lo.Payload
	err := h.Do(func() error {
		for q := 0; q < o.Queues; q++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			t.fds = append(t.fds, fd)
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4(), Port: int(sport) + q}); err != nil {
				return err
			}
			if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.As4(), Port: int(dport)}); err != nil {
				return err
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, payload); err != nil {
				return fmt.Errorf("UDP_SEGMENT: %w", err)
			}
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		}
		return nil
	})
	if err != nil {
		t.closeAll()
		return fmt.Errorf("socket-gso: %w", err)
	}
	segs := gsoBatch(payload)
	t.l.run(len(t.fds), func(i int, ctr *atomic.Uint64) error {
		buf := make([]byte, segs*payload)
		for k := 0; k < segs; k++ {
			copy(buf[k*payload:], udp[8:])
		}
		fd := t.fds[i]
		for !t.l.quit.Load() {
			_, err := unix.Write(fd, buf)
			switch err {
			case nil:
				ctr.Add(uint64(segs))
			case unix.ENOBUFS, unix.EAGAIN:
				// The qdisc or the device queue is full: try again.
			default:
				return fmt.Errorf("socket-gso: write: %w", err)
			}
		}
		return nil
	})
	return nil
}

func (t *socketGSOTx) closeAll() {
	for _, fd := range t.fds {
		unix.Close(fd)
	}
	t.fds = nil
}

func (t *socketGSOTx) sent() uint64 { return sum(t.l.ctr) }

func (t *socketGSOTx) count() (uint64, error) { return t.rx.Count() }

func (t *socketGSOTx) stop() error {
	err := t.l.halt()
	t.closeAll()
	return err
}

func (t *socketGSOTx) appCPU() time.Duration { return t.l.appCPU() }
func (t *socketGSOTx) appSys() time.Duration { return t.l.appSys() }
