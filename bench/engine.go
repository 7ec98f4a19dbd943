package bench

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/cpustat"
)

// Counters are one stream's running totals as seen by one end.
type Counters struct {
	iperf3.RecvCounters
	SentBytes   uint64 // payload bytes sent
	SentPackets int64  // datagrams sent (the last sequence number used)
	// TCP is a TCP test's sender's connection figures at its last
	// sample (zero otherwise).
	TCP plane.TCPInfo
}

// stream is one UDP flow or TCP data connection of a test.
type stream struct {
	id    int
	peer  netip.AddrPort // the other end's address
	local netip.AddrPort
	mu    sync.Mutex
	recv  iperf3.RecvStats
	sentB uint64
	sentP int64

	// A TCP test's: the connection, and at a sender its figures at the
	// last sample and what the intervals saw of them; at a receiver,
	// eof once the peer has closed its sending.
	conn plane.TCPConn
	info plane.TCPInfo
	agg  tcpAgg
	eof  bool
}

func (s *stream) counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Counters{RecvCounters: s.recv.RecvCounters, SentBytes: s.sentB, SentPackets: s.sentP, TCP: s.info}
}

// group is a plane.PacketConn and the streams that use it.
type group struct {
	conn    plane.PacketConn
	streams []*stream
	byPeer  map[netip.AddrPort]*stream
	stray   atomic.Int64 // datagrams from no known stream
}

func (g *group) lookup(a netip.AddrPort) *stream {
	if len(g.streams) == 1 && g.byPeer == nil {
		return g.streams[0]
	}
	return g.byPeer[a]
}

// dataRun moves the datagrams of one test at one end.
type dataRun struct {
	groups     []*group
	sender     bool
	blksize    int
	rate       uint64 // bits/s per stream; 0 unlimited
	counters64 bool
	tcp        bool // a TCP test's: streams over TCP connections

	stopping atomic.Bool
	stopCh   chan struct{}
	wg       sync.WaitGroup
	errMu    sync.Mutex
	err      error
	failed   chan struct{} // closed with the first error, from begin on
	start    time.Time
	end      time.Time
	// endMark, when set before stop, is where the test's window ends
	// (as iperf3 counts it: at TEST_END) rather than when stop is called.
	endMark time.Time

	cpu     *cpustat.Meter
	cpuOnce sync.Once
	usage   cpustat.Usage // what cpu measured, once, in results()
	host    *HostCPU      // usage's machine figures, for the report
}

func (r *dataRun) setErr(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
		if r.failed != nil {
			close(r.failed)
		}
	}
	r.errMu.Unlock()
}

// failure returns a channel that is closed when a data goroutine fails
// (stop returns the error): the test cannot go on. It is nil before
// begin.
func (r *dataRun) failure() <-chan struct{} {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.failed
}

func (r *dataRun) begin() {
	if r.stopping.Load() {
		return
	}
	r.errMu.Lock()
	r.failed = make(chan struct{})
	r.errMu.Unlock()
	r.stopCh = make(chan struct{})
	r.start = time.Now()
	r.cpu = cpustat.Start()
	for _, g := range r.groups {
		if mq, ok := g.conn.(plane.MultiQueueConn); ok && !r.sender {
			for _, q := range mq.QueueReaders() {
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					done := cpustat.ThreadClock()
					defer func() { r.cpu.Thread(done()) }()
					if err := r.queueLoop(g, q); err != nil {
						r.setErr(err)
					}
				}()
			}
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			done := cpustat.ThreadClock()
			defer func() { r.cpu.Thread(done()) }()
			var err error
			if r.sender {
				err = r.sendLoop(g)
			} else {
				err = r.recvLoop(g)
			}
			if err != nil {
				r.setErr(err)
			}
		}()
	}
}

// stop ends sending at once; receivers read what is already queued and
// then return.
func (r *dataRun) stop() error {
	if r.stopping.CompareAndSwap(false, true) {
		r.end = r.stopTime()
		if r.stopCh != nil { // begun
			close(r.stopCh)
		}
	}
	r.wg.Wait()
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// markEnd sets where the test's window ends, for a stop that comes
// later: t, or the start if t is before it.
func (r *dataRun) markEnd(t time.Time) {
	if t.Before(r.start) {
		t = r.start
	}
	r.endMark = t
}

// stopTime is the end of the test's window for a stop called now.
func (r *dataRun) stopTime() time.Time {
	if !r.endMark.IsZero() {
		return r.endMark
	}
	return time.Now()
}

func (r *dataRun) sendLoop(g *group) error {
	msgs := make([]plane.Message, plane.BatchSize)
	for i := range msgs {
		msgs[i].Buf = make([]byte, r.blksize)
		for j := iperf3.HeaderLen(r.counters64); j < r.blksize; j++ {
			msgs[i].Buf[j] = byte(j)
		}
		msgs[i].N = r.blksize
	}
	hl := iperf3.HeaderLen(r.counters64)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if r.stopping.Load() {
			return nil
		}
		now := time.Now()
		el := now.Sub(r.start).Seconds()
		wait := time.Millisecond
		sent := false
		for _, s := range g.streams {
			k := plane.BatchSize
			if r.rate > 0 {
				allowed := int64(float64(r.rate)*el/8) - int64(s.sentB)
				if a := allowed / int64(r.blksize); a < int64(k) {
					k = int(a)
				}
				if k <= 0 {
					due := float64(s.sentB+uint64(r.blksize))*8/float64(r.rate) - el
					if d := time.Duration(due * 1e9); d < wait {
						wait = d
					}
					continue
				}
			}
			h := iperf3.UDPHeader{Sec: uint32(now.Unix()), Usec: uint32(now.Nanosecond() / 1000)}
			for i := 0; i < k; i++ {
				h.Seq = uint64(s.sentP) + 1 + uint64(i)
				h.Put(msgs[i].Buf[:hl], r.counters64)
				msgs[i].Addr = s.peer
			}
			n, err := g.conn.WriteBatch(msgs[:k])
			if n > 0 {
				sent = true
				s.mu.Lock()
				s.sentP += int64(n)
				s.sentB += uint64(n * r.blksize)
				s.mu.Unlock()
			}
			if err != nil && !errors.Is(err, plane.ErrBackpressure) {
				if r.stopping.Load() {
					return nil
				}
				return err
			}
			if err != nil {
				wait = 50 * time.Microsecond
			}
		}
		if !sent {
			if wait < 20*time.Microsecond {
				continue
			}
			timer.Reset(wait)
			select {
			case <-r.stopCh:
				return nil
			case <-timer.C:
			}
		}
	}
}

func (r *dataRun) recvLoop(g *group) error {
	size := r.blksize
	if size < 2048 {
		size = 2048
	}
	msgs := make([]plane.Message, plane.BatchSize)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	var dr drain
	for {
		stopping := r.stopping.Load()
		d, over := dr.next(stopping)
		if over {
			return nil
		}
		g.conn.SetReadDeadline(time.Now().Add(d))
		n, err := g.conn.ReadBatch(msgs)
		r.account(g, msgs[:max(n, 0)], time.Now())
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if stopping {
					return nil
				}
				continue
			}
			if stopping {
				return nil
			}
			return err
		}
	}
}

// drain paces a receive loop: reads wait 50ms while the test runs; once
// it stops, 20ms at a time for what is still queued, for at most 500ms.
type drain struct{ start time.Time }

// next returns how long the next read may wait, or over when draining
// is done.
func (d *drain) next(stopping bool) (wait time.Duration, over bool) {
	if !stopping {
		return 50 * time.Millisecond, false
	}
	if d.start.IsZero() {
		d.start = time.Now()
	}
	return 20 * time.Millisecond, time.Since(d.start) > 500*time.Millisecond
}

// queueLoop is recvLoop for one receive queue of a MultiQueueConn: the
// datagrams are counted where they lie in the receive ring.
func (r *dataRun) queueLoop(g *group, q plane.QueueReader) error {
	defer q.Done()
	msgs := make([]plane.Message, plane.BatchSize)
	var dr drain
	for {
		stopping := r.stopping.Load()
		d, over := dr.next(stopping)
		if over {
			return nil
		}
		n, err := q.ReadView(msgs, d)
		r.account(g, msgs[:n], time.Now())
		if err != nil {
			if stopping {
				return nil
			}
			switch q.Queue() {
			case -1:
				return fmt.Errorf("rx queues: %w", err)
			case plane.KernelSocketQueue:
				return fmt.Errorf("rx kernel socket: %w", err)
			}
			return fmt.Errorf("rx queue %d: %w", q.Queue(), err)
		}
		if n == 0 && stopping {
			return nil
		}
	}
}

// account counts received datagrams in their streams' statistics, taking
// each stream's lock once per run of its datagrams.
func (r *dataRun) account(g *group, msgs []plane.Message, arrival time.Time) {
	var (
		cur     *stream
		curAddr netip.AddrPort
	)
	defer func() {
		if cur != nil {
			cur.mu.Unlock()
		}
	}()
	for i := range msgs {
		m := &msgs[i]
		if cur == nil || m.Addr != curAddr {
			if cur != nil {
				cur.mu.Unlock()
			}
			cur, curAddr = g.lookup(m.Addr), m.Addr
			if cur == nil {
				g.stray.Add(1)
				continue
			}
			cur.mu.Lock()
		}
		b := m.Buf[:m.N]
		if iperf3.IsConnectMsg(b) {
			continue // a late retransmitted setup message
		}
		if h, err := iperf3.ParseUDPHeader(b, r.counters64); err != nil {
			cur.recv.AddMalformed(m.N)
		} else {
			cur.recv.Add(m.N, h, arrival)
		}
	}
}

// results returns this end's per-stream results in iperf3's form.
func (r *dataRun) results() iperf3.Results {
	res := iperf3.Results{SenderHasRetransmits: -1}
	if r.sender {
		res.SenderHasRetransmits = 0
	}
	if r.tcp {
		r.tcpResults(&res)
	}
	if r.cpu != nil {
		r.cpuOnce.Do(func() {
			r.usage = r.cpu.Finish()
			r.host = hostCPU(r.usage)
		})
		res.CPUUtilTotal, res.CPUUtilUser, res.CPUUtilSystem = r.usage.Total, r.usage.User, r.usage.System
	}
	end := r.end
	if end.IsZero() {
		end = time.Now()
	}
	for _, g := range r.groups {
		for _, s := range g.streams {
			c := s.counters()
			sr := iperf3.StreamResults{ID: s.id, Retransmits: -1, EndTime: end.Sub(r.start).Seconds()}
			if r.tcp && r.sender {
				sr.Retransmits = int64(c.TCP.Retransmits)
			}
			if r.sender {
				sr.Bytes, sr.Packets = c.SentBytes, c.SentPackets
			} else {
				sr.Bytes, sr.Packets, sr.Errors, sr.Jitter = c.Bytes, c.Packets, c.Lost, c.Jitter
			}
			res.Streams = append(res.Streams, sr)
		}
	}
	return res
}

func (r *dataRun) allStreams() []*stream {
	var all []*stream
	for _, g := range r.groups {
		all = append(all, g.streams...)
	}
	return all
}
