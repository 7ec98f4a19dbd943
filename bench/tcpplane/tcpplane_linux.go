//go:build linux

package tcpplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() iperf3.CPUTime {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return iperf3.CPUTime{}
	}
	return iperf3.CPUTime{User: float64(ru.Utime.Nano()) / 1e9, System: float64(ru.Stime.Nano()) / 1e9}
}

func xskPlane(dp plane.DataPlane) (*xskplane.DataPlane, error) {
	d, ok := dp.(*xskplane.DataPlane)
	if !ok || d == nil {
		return nil, fmt.Errorf("TCP mode runs over AF_XDP only (the xsk backend), not %T: %w", dp, errs.ErrNotSupported)
	}
	return d, nil
}

// frameRoom is the largest frame a TX or RX frame of cfg holds, with room
// to spare for the kernel's headroom.
func frameRoom(cfg xsk.Config) int {
	fs := cfg.UMEM.FrameSize
	if fs == 0 {
		fs = 4096
	}
	return fs - 256 - cfg.UMEM.Headroom
}

func localMSS(dp plane.DataPlane, dst netip.Addr) (int, error) {
	d, err := xskPlane(dp)
	if err != nil {
		return 0, err
	}
	var mtu int
	err = link.Run(d.Do, func() error {
		ifi, err := net.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		mtu = ifi.MTU
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("interface %s: %w", d.Iface, err)
	}
	ip := offload.IPv4MinLen
	if dst.Unmap().Is6() {
		ip = offload.IPv6Len
	}
	mss := min(mtu, frameRoom(d.Config)-offload.EthernetLen) - ip - offload.TCPMinLen
	if err := iperf3.CheckMSS("local", mss); err != nil {
		return 0, fmt.Errorf("interface %s (MTU %d): %w", d.Iface, mtu, err)
	}
	return mss, nil
}

// xskTCPSender sends TCP mode's flows: one AF_XDP socket per queue used,
// with no XDP program (nothing comes back), each owned by one goroutine
// that sends for the flows placed on its queue. With xskplane.DataPlane.Placer
// set, the flows' source ports are the ones it chooses, so that the
// server NIC's RSS spreads them over its queues.
type xskTCPSender struct {
	cfg   SenderConfig
	dev   *xsk.Device
	flows []*tcpTXFlow
	infos []iperf3.TCPStreamInfo
	queue []int // socket index of each flow

	payload  []byte
	ctrs     []Counter
	start    time.Time
	stopping atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	cpu      iperf3.CPUTime
	err      error
	// Each flow's figures, written by the goroutine of its queue only and
	// read by Stop after they ended.
	writes []int64
	sentB  []uint64
	sentP  []int64
	end    time.Time
}

// nextHop finds, in the calling thread's namespace, the source address
// towards dst and the MAC of the next hop, as the kernel's route and
// neighbour tables give them (package internal/nexthop: the route must
// leave through ifi; a missing neighbour is resolved by the kernel).
func nextHop(ifi *net.Interface, dst netip.Addr) (src netip.Addr, mac net.HardwareAddr, err error) {
	r, err := nexthop.New(ifi.Index, nexthop.Options{})
	if err != nil {
		return src, nil, err
	}
	defer r.Close()
	hop, err := r.Resolve(context.Background(), dst) // bounded by the resolver's ResolveTimeout
	if err != nil {
		return src, nil, err
	}
	return hop.Src, slices.Clone(hop.MAC), nil
}

// openSender opens the sockets and builds the flows' headers.
func openSender(dp plane.DataPlane, cfg SenderConfig) (Sender, error) {
	d, err := xskPlane(dp)
	if err != nil {
		return nil, err
	}
	s := &xskTCPSender{cfg: cfg}
	var srcMAC, dstMAC net.HardwareAddr
	var src netip.Addr
	err = link.Run(d.Do, func() error {
		ifi, err := net.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		srcMAC = ifi.HardwareAddr
		if src, dstMAC, err = nextHop(ifi, cfg.Server.Addr().Unmap()); err != nil {
			return err
		}
		nq, err := nic.RXQueues(d.Iface)
		if err != nil {
			return err
		}
		xc := d.Config
		xc.NoProgram = true
		xc.Program = xsk.ProgramConfig{}
		if xc.Socket.TXBudget == 0 {
			xc.Socket.TXBudget = tcpTXBudget
		}
		xc.Queues = nil
		for q := 0; q < min(nq, cfg.Streams); q++ {
			xc.Queues = append(xc.Queues, q)
		}
		s.dev, err = xsk.Open(d.Iface, xc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tcp sender on %s: %w", d.Iface, err)
	}
	nsock := len(s.dev.Sockets())
	base := uint16(tcpPortLow + rand.IntN((tcpPortHigh-tcpPortLow)/128)*128)
	for i := 0; i < cfg.Streams; i++ {
		sp := netip.AddrPortFrom(src, base+uint16(i))
		if d.Placer != nil {
			// Source ports that the server NIC's RSS hash spreads over its
			// queues (the hash does not depend on the protocol).
			port, _, err := d.Placer.Port(src, cfg.Server, tcpPortLow, tcpPortHigh)
			if err != nil {
				s.dev.Close()
				return nil, fmt.Errorf("tcp sender: %w", err)
			}
			sp = netip.AddrPortFrom(src, port)
		}
		isn := rand.Uint32()
		f, err := newTCPTxFlow(srcMAC, dstMAC, sp, cfg.Server, isn, cfg.MSS)
		if err != nil {
			s.dev.Close()
			return nil, err
		}
		s.flows = append(s.flows, f)
		s.queue = append(s.queue, i%nsock)
		s.infos = append(s.infos, iperf3.TCPStreamInfo{ID: iperf3.StreamID(i), Src: src.String(), SrcPort: sp.Port(), ISN: isn})
	}
	s.writes = make([]int64, cfg.Streams)
	s.sentB = make([]uint64, cfg.Streams)
	s.sentP = make([]int64, cfg.Streams)
	s.payload = make([]byte, cfg.Write)
	for i := range s.payload {
		s.payload[i] = byte(i*7 + i>>8)
	}
	return s, nil
}

// tcpTXBudget is how many frames one TX kick sends in copy mode unless
// xskplane.DataPlane.Config sets its own: a write's segments in one syscall.
const tcpTXBudget = 256

// tcpRXRing is the RX and fill ring size of TCP mode's receiving sockets
// unless xskplane.DataPlane.Config sets its own.
const tcpRXRing = 8192

// Source ports of TCP mode's flows: below Linux's ephemeral range, like
// the UDP client's.
const (
	tcpPortLow  = 20000
	tcpPortHigh = 32000
)

func (s *xskTCPSender) Flows() []iperf3.TCPStreamInfo { return s.infos }

func (s *xskTCPSender) Start(counters []Counter, start time.Time) {
	s.ctrs, s.start = counters, start
	for qi, sock := range s.dev.Sockets() {
		var mine []int
		for i, q := range s.queue {
			if q == qi {
				mine = append(mine, i)
			}
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			err := s.loop(sock, mine)
			c := threadCPU().Sub(c0)
			s.mu.Lock()
			s.cpu = s.cpu.Add(c)
			if err != nil && s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
		}()
	}
}

// loop sends writes for the flows in turn until Stop, then waits for the
// TX ring to drain.
func (s *xskTCPSender) loop(sock *xsk.Socket, flows []int) error {
	k := s.flows[0].segments(s.cfg.Write)
	b := sock.NewBatch(max(k, 64))
	sizes := make([]int, b.Cap())
	segNo := make([]int64, len(s.flows))
	defer s.drain(sock)
	for !s.stopping.Load() {
		el := time.Since(s.start).Seconds()
		wait := time.Duration(0)
		for _, fi := range flows {
			if s.cfg.Rate > 0 {
				sent := s.sentB[fi]
				if float64(sent+uint64(s.cfg.Write))*8 > float64(s.cfg.Rate)*el {
					due := time.Duration((float64(sent+uint64(s.cfg.Write))*8/float64(s.cfg.Rate) - el) * 1e9)
					if wait == 0 || due < wait {
						wait = due
					}
					continue
				}
			}
			if !s.alloc(sock, b, k) {
				wait = 20 * time.Microsecond
				continue
			}
			i := 0
			next := func(size int) []byte {
				buf := b.Buffer(i)
				if len(buf) < size {
					return nil
				}
				sizes[i] = size
				i++
				return buf[:size]
			}
			f := s.flows[fi]
			var n int
			var err error
			if s.cfg.TSO {
				n, err = f.writeTSO(s.payload, next)
			} else {
				n, err = f.writeSegments(s.payload, next)
			}
			if err != nil {
				sock.Free(b)
				return fmt.Errorf("stream %d: %w", s.infos[fi].ID, err)
			}
			hl := len(f.hdr)
			for j := 0; j < n; j++ {
				b.SetLen(j, sizes[j])
				if s.cfg.Corrupt != nil {
					s.cfg.Corrupt(fi, segNo[fi]+int64(j), b.Frame(j))
				}
			}
			s.writes[fi]++
			// Hand every segment of the write to the TX ring, in order.
			j := 0
			for b.Len() > 0 {
				done, err := sock.Transmit(b)
				var bytes uint64
				for _, sz := range sizes[j : j+done] {
					bytes += uint64(sz - hl)
				}
				j += done
				if done > 0 {
					s.sentB[fi] += bytes
					s.sentP[fi] += int64(done)
					s.ctrs[fi].AddSent(bytes, int64(done))
				}
				if err != nil {
					sock.Free(b)
					return fmt.Errorf("stream %d: transmit: %w", s.infos[fi].ID, err)
				}
				if b.Len() > 0 {
					if s.stopping.Load() {
						sock.Free(b)
						break
					}
					if sock.Complete() == 0 {
						sock.Kick()
					}
				}
			}
			segNo[fi] += int64(n)
		}
		if wait > 0 {
			if wait > 5*time.Millisecond {
				wait = 5 * time.Millisecond
			}
			sock.Sleep(wait)
		}
	}
	return nil
}

// alloc puts k free frames in b. In copy mode the kernel sends only a
// budget of frames per kick, so while the pool is short it kicks and
// reclaims (Complete) rather than sleep; it gives up, with b empty, when
// the kernel makes no progress (the device pushes back) or the test stops.
func (s *xskTCPSender) alloc(sock *xsk.Socket, b *xsk.Batch, k int) bool {
	idle := 0
	for !s.stopping.Load() {
		if sock.Alloc(b, k-b.Len()) > 0 && b.Len() == k {
			return true
		}
		if sock.Complete() == 0 {
			if idle++; idle > 8 {
				break
			}
			if sock.TXPending() > 0 {
				sock.Kick()
			}
		} else {
			idle = 0
		}
	}
	sock.Free(b)
	return false
}

// drain waits (bounded) until the kernel has sent what is on the TX ring.
func (s *xskTCPSender) drain(sock *xsk.Socket) {
	deadline := time.Now().Add(500 * time.Millisecond)
	for sock.TXPending() > 0 && time.Now().Before(deadline) {
		if sock.Complete() == 0 {
			sock.Kick()
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func (s *xskTCPSender) Stop() (iperf3.TCPSenderStats, error) {
	if s.stopping.CompareAndSwap(false, true) {
		s.end = time.Now()
	}
	s.wg.Wait()
	st := iperf3.TCPSenderStats{TSO: s.cfg.TSO, MSS: s.cfg.MSS, Seconds: s.end.Sub(s.start).Seconds()}
	for i := range s.ctrs {
		st.Streams = append(st.Streams, iperf3.TCPSenderStream{ID: s.infos[i].ID, Bytes: s.sentB[i], Segments: s.sentP[i], Writes: s.writes[i]})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.CPU = s.cpu
	return st, s.err
}

func (s *xskTCPSender) Close() error {
	s.stopping.Store(true)
	s.wg.Wait()
	return s.dev.Close()
}

// xskTCPReceiver receives TCP mode's flows on every queue of the
// interface: an XDP filter takes TCP to the data port (and nothing else,
// so the control connection stays with the kernel); one goroutine per
// socket checks every frame's checksums with offload.VerifyRX and
// accounts it to its flow.
type xskTCPReceiver struct {
	d     *xskplane.DataPlane
	dev   *xsk.Device
	port  uint16
	mss   int
	ln    net.Listener // reserves the data port in the kernel
	flows map[netip.AddrPort]*rxFlowState

	start     time.Time
	end       time.Time
	stopping  atomic.Bool
	wg        sync.WaitGroup
	mu        sync.Mutex
	cpu       iperf3.CPUTime
	stray     atomic.Int64
	malformed atomic.Int64
	closeOnce sync.Once
	stopOnce  sync.Once
}

type rxFlowState struct {
	mu  sync.Mutex
	f   tcpRXFlow
	ctr Counter
}

// openReceiver reserves the data port on the server's address and opens
// the sockets with their XDP filter.
func openReceiver(dp plane.DataPlane, local netip.AddrPort, port uint16) (Receiver, error) {
	d, err := xskPlane(dp)
	if err != nil {
		return nil, err
	}
	r := &xskTCPReceiver{d: d, port: port, flows: map[netip.AddrPort]*rxFlowState{}}
	cfg := d.Config
	cfg.NoProgram = false
	cfg.Program.Filter = []xsk.Rule{{Protocol: unix.IPPROTO_TCP, DstPortMin: port, DstPortMax: port}}
	// Deeper rings than the default, so that a receiving thread the
	// scheduler keeps off its core for tens of milliseconds loses nothing
	// (a sender without congestion control does not slow down).
	if cfg.Socket.RXRingSize == 0 && cfg.Socket.FillRingSize == 0 && cfg.UMEM.NumFrames == 0 {
		cfg.Socket.RXRingSize, cfg.Socket.FillRingSize = tcpRXRing, tcpRXRing
		cfg.UMEM.NumFrames = 2 * tcpRXRing
	}
	err = link.Run(d.Do, func() error {
		ifi, err := net.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		ip := offload.IPv4MinLen
		if local.Addr().Unmap().Is6() {
			ip = offload.IPv6Len
		}
		r.mss = min(ifi.MTU, frameRoom(cfg)-offload.EthernetLen) - ip - offload.TCPMinLen
		if err := iperf3.CheckMSS("server", r.mss); err != nil {
			return fmt.Errorf("MTU %d: %w", ifi.MTU, err)
		}
		// Hold the port in the kernel so that no local TCP socket uses it
		// while the filter takes its traffic.
		if r.ln, err = net.Listen("tcp", netip.AddrPortFrom(local.Addr(), port).String()); err != nil {
			return fmt.Errorf("reserve data port: %w", err)
		}
		if r.dev, err = xsk.Open(d.Iface, cfg); err != nil {
			r.ln.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tcp receiver on %s port %d: %w", d.Iface, port, err)
	}
	return r, nil
}

func (r *xskTCPReceiver) Port() uint16 { return r.port }
func (r *xskTCPReceiver) MSS() int     { return r.mss }

func (r *xskTCPReceiver) Register(infos []iperf3.TCPStreamInfo, counters []Counter) {
	for i, in := range infos {
		a, _ := netip.ParseAddr(in.Src)
		r.flows[netip.AddrPortFrom(a.Unmap(), in.SrcPort)] = &rxFlowState{f: tcpRXFlow{TCPReceiverStream: iperf3.TCPReceiverStream{ID: in.ID}, next: in.ISN}, ctr: counters[i]}
	}
}

func (r *xskTCPReceiver) Start(start time.Time) {
	r.start = start
	for _, sock := range r.dev.Sockets() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			r.loop(sock)
			c := threadCPU().Sub(c0)
			r.mu.Lock()
			r.cpu = r.cpu.Add(c)
			r.mu.Unlock()
		}()
	}
}

func (r *xskTCPReceiver) loop(sock *xsk.Socket) {
	b := sock.NewBatch(64)
	var idle time.Time
	for {
		if r.stopping.Load() && time.Since(r.end) > 500*time.Millisecond {
			return // a sender that does not stop cannot keep the test open
		}
		if sock.Receive(b) == 0 {
			if r.stopping.Load() {
				if idle.IsZero() {
					idle = time.Now()
				} else if time.Since(idle) > 50*time.Millisecond {
					return
				}
			}
			if _, err := sock.Wait(10*time.Millisecond, false); errors.Is(err, xsk.ErrClosed) {
				return
			}
			continue
		}
		idle = time.Time{}
		for i := 0; i < b.Len(); i++ {
			r.handle(b.Frame(i))
		}
		sock.Release(b)
	}
}

// handle checks and accounts one frame.
func (r *xskTCPReceiver) handle(f []byte) {
	v := offload.VerifyRX(f)
	seg, err := parseTCPSegment(f)
	if err != nil || v.Malformed() {
		r.malformed.Add(1)
		return
	}
	fl := r.flows[seg.src]
	if fl == nil || seg.dst.Port() != r.port {
		r.stray.Add(1)
		return
	}
	fl.mu.Lock()
	if v.Bad() {
		fl.f.BadChecksum++
	} else {
		fl.f.add(seg.seq, seg.payload)
	}
	in := fl.f.TCPReceiverStream
	fl.mu.Unlock()
	fl.ctr.SetReceived(in)
}

func (r *xskTCPReceiver) Stop() iperf3.TCPReceiverStats {
	r.stopOnce.Do(func() {
		r.end = time.Now()
		r.stopping.Store(true)
	})
	r.wg.Wait()
	st := iperf3.TCPReceiverStats{Seconds: r.end.Sub(r.start).Seconds(), Stray: r.stray.Load(), Malformed: r.malformed.Load()}
	for _, x := range r.sortedFlows() {
		x.mu.Lock()
		st.Streams = append(st.Streams, x.f.TCPReceiverStream)
		x.mu.Unlock()
	}
	for _, s := range r.dev.Sockets() {
		if x, err := s.Stats(); err == nil {
			st.Dropped += x.RXDropped + x.RXRingFull
		}
	}
	r.mu.Lock()
	st.CPU = r.cpu
	r.mu.Unlock()
	return st
}

func (r *xskTCPReceiver) sortedFlows() []*rxFlowState {
	var fs []*rxFlowState
	for _, f := range r.flows {
		fs = append(fs, f)
	}
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].f.ID < fs[j-1].f.ID; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
	return fs
}

func (r *xskTCPReceiver) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.stopOnce.Do(func() {
			r.end = time.Now()
			r.stopping.Store(true)
		})
		r.wg.Wait()
		if r.d.OnClose != nil {
			var qs []plane.QueueCount
			for _, s := range r.dev.Sockets() {
				st, err := s.Stats()
				if err != nil {
					continue
				}
				qs = append(qs, plane.QueueCount{Queue: s.Queue(), Packets: st.RXFrames, Bytes: st.RXBytes, Dropped: st.RXDropped + st.RXRingFull})
			}
			r.d.OnClose(qs)
		}
		err = r.dev.Close()
		r.ln.Close()
	})
	return err
}
