//go:build linux

package coalesce_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

var benchReport = flag.Bool("bench-report", false, "run the long coalescing benchmark (4s per setting) and check the issue's goals")

const benchPort = 9100

// rig is the benchmark's test network: a 2-queue veth pair, AF_XDP sockets
// on every queue of B's end, and an XDP counter on A's end for TX.
type rig struct {
	t       *testing.T
	pair    *netnstest.Pair
	dev     *xsk.Device
	counter *trafficgen.Counter
}

func newRig(t *testing.T) *rig {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	r := &rig{t: t, pair: pair}
	err := pair.B.Do(func() error {
		var err error
		r.dev, err = xsk.Open(pair.B.Link, xsk.Config{
			// Deep RX rings (160ms at 100k/s per queue): on a shared
			// machine the receiver can be descheduled for a long time.
			UMEM:    xsk.UMEMConfig{FrameSize: 2048, NumFrames: 32768},
			Socket:  xsk.SocketConfig{RXRingSize: 16384, FillRingSize: 16384, TXRingSize: 2048, CompletionRingSize: 2048, TXBudget: 256},
			Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(benchPort)}},
		})
		return err
	})
	if err != nil {
		t.Fatalf("open sockets on %s: %v", pair.B.Link, err)
	}
	t.Cleanup(func() { r.dev.Close() })
	if len(r.dev.Sockets()) != 2 {
		t.Fatalf("%d sockets, want 2", len(r.dev.Sockets()))
	}
	err = pair.A.Do(func() error {
		var err error
		r.counter, err = trafficgen.AttachCounter(pair.A.Ifindex, trafficgen.Drop)
		return err
	})
	if err != nil {
		t.Fatalf("attach counter on %s: %v", pair.A.Link, err)
	}
	t.Cleanup(func() { r.counter.Close() })
	return r
}

// linkDrops returns the frames veth-a dropped on their way to B (its peer's
// queue was full). Frames B's XDP program failed to redirect are counted
// by the sockets (xskDrops), and again in veth-b's rx_dropped, which is
// therefore left out.
func (r *rig) linkDrops() uint64 {
	h := r.pair.A
	nh, err := h.Handle()
	if err != nil {
		r.t.Fatalf("netlink handle for %s: %v", h.NS, err)
	}
	defer nh.Close()
	l, err := nh.LinkByName(h.Link)
	if err != nil {
		r.t.Fatalf("link %s: %v", h.Link, err)
	}
	return l.Attrs().Statistics.TxDropped
}

// syscalls returns the RX wake-up syscalls the sockets made (recvfrom when
// the kernel asked for a wake-up).
func (r *rig) syscalls() uint64 {
	var total uint64
	for _, s := range r.dev.Sockets() {
		st, err := s.Stats()
		if err != nil {
			r.t.Fatalf("socket stats: %v", err)
		}
		total += st.Wakeups
	}
	return total
}

func (r *rig) xskDrops() uint64 {
	var total uint64
	for _, s := range r.dev.Sockets() {
		st, err := s.Stats()
		if err != nil {
			r.t.Fatalf("socket stats: %v", err)
		}
		total += st.RXDropped + st.RXRingFull + st.RXInvalidDescs
	}
	return total
}

type rxRun struct {
	name      string
	rate      float64
	sent      senderResult
	received  uint64
	dups      uint64
	xskDrops  uint64
	linkDrops uint64
	procCPU   time.Duration // RUSAGE_SELF over the run
	schedLat  []uint64      // Go scheduler latency histogram over the run (bucket counts)
	thrCPU    time.Duration // RUSAGE_THREAD of the receiving threads
	delays    []int64       // sender timestamp to delivery, ns
	late      []lateFrame   // frames delayed beyond the run's bound
	bound     time.Duration // rx-usecs + 100µs
	stats     []coalesce.RXStats
	runs      []string // per round: CPU per packet and achieved rate

	rxSyscalls uint64 // the sockets' RX wake-up syscalls (need_wakeup)
}

func (x *rxRun) cpuPerPkt() time.Duration { return x.procCPU / time.Duration(max(x.received, 1)) }
func (x *rxRun) thrPerPkt() time.Duration { return x.thrCPU / time.Duration(max(x.received, 1)) }

func (x *rxRun) quantile(q float64) time.Duration {
	if len(x.delays) == 0 {
		return 0
	}
	i := min(len(x.delays)-1, int(q*float64(len(x.delays))))
	return time.Duration(x.delays[i])
}

// policyDelay returns the largest of the receivers' median and 99th
// percentile delays by their own histograms (the time a frame waited in
// the ring, as the policy saw it; histogram buckets, so upper bounds).
func (x *rxRun) policyDelay() (p50, p99 time.Duration) {
	for _, s := range x.stats {
		p50 = max(p50, time.Duration(s.Delay.Quantile(0.5)))
		p99 = max(p99, time.Duration(s.Delay.Quantile(0.99)))
	}
	return p50, p99
}

func (x *rxRun) sum() (batches, frames, wakeups uint64, profiles string) {
	var ps []string
	for _, s := range x.stats {
		batches += s.Batches
		frames += s.Frames
		wakeups += s.Wakeups
		if s.Profile >= 0 {
			ps = append(ps, fmt.Sprintf("%dµs/%dch", s.Current.Usecs, s.ProfileChanges))
		}
		if s.SleepLateness > 0 {
			ps = append(ps, fmt.Sprintf("late %v", s.SleepLateness.Round(time.Microsecond)))
		}
	}
	return batches, frames, wakeups, strings.Join(ps, ",")
}

// rxMode is a receiving setting of the benchmark.
type rxMode struct {
	name  string
	p     coalesce.Params
	group bool // one goroutine for both queues (GroupReceiver)
	// runner receives through xsk's Device.Receive with cfg instead of a
	// coalescing receiver; plain with the loop a user writes by hand: a
	// goroutine per queue that receives, releases and waits in poll.
	runner bool
	cfg    xsk.RunConfig
	plain  bool
	// napi, when set, is applied to every NAPI of the receiving veth for
	// the run (netdev napi-set) and the previous values put back after.
	napi *nic.NAPISettings
}

// benchReceiver is a Receiver or a GroupReceiver.
type benchReceiver struct {
	next    func(context.Context) ([]*xsk.Batch, error)
	release func()
	stats   func() coalesce.RXStats
}

func newBenchReceiver(socks []*xsk.Socket, p coalesce.Params) (*benchReceiver, error) {
	o := coalesce.Options{IdleWait: 10 * time.Millisecond}
	if len(socks) > 1 {
		g, err := coalesce.NewGroupReceiver(socks, p, o)
		if err != nil {
			return nil, err
		}
		return &benchReceiver{next: g.Next, release: g.Release, stats: g.Stats}, nil
	}
	r, err := coalesce.NewReceiver(socks[0], p, o)
	if err != nil {
		return nil, err
	}
	one := make([]*xsk.Batch, 1)
	return &benchReceiver{
		next: func(ctx context.Context) ([]*xsk.Batch, error) {
			b, err := r.Next(ctx)
			one[0] = b
			return one, err
		},
		release: r.Release,
		stats:   r.Stats,
	}, nil
}

// runRX receives on both queues with setting m while a child process in
// namespace A sends rate datagrams per second for dur.
func (r *rig) runRX(m rxMode, rate float64, dur time.Duration) *rxRun {
	t := r.t
	name := m.name
	x := &rxRun{name: name, rate: rate, bound: time.Duration(m.p.RXUsecs)*time.Microsecond + 100*time.Microsecond}
	if m.napi != nil {
		var nd *nic.Device
		if err := r.pair.B.Do(func() (err error) { nd, err = nic.Open(r.pair.B.Link); return err }); err != nil {
			t.Fatal(err)
		}
		ch, err := nd.SetNAPI(nic.AllNAPIs(), *m.napi)
		if err != nil {
			nd.Close()
			t.Fatalf("%s: set NAPI: %v", name, err)
		}
		defer func() {
			for _, n := range ch.Before {
				nd.SetNAPI(nic.NAPIByID(n.ID), nic.NAPISettings{DeferHardIRQs: n.DeferHardIRQs, GROFlushTimeout: n.GROFlushTimeout})
			}
			nd.Close()
		}()
	}
	xd0, ld0, sw0 := r.xskDrops(), r.linkDrops(), r.syscalls()
	expect := int(rate * dur.Seconds())
	seen := make([]uint64, expect/64+64)
	var got, dups atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	socks := r.dev.Sockets()
	ready := make(chan struct{}, len(socks))
	cpu0 := processCPU()
	sl0 := schedLatencies()
	groups := make([][]*xsk.Socket, 0, len(socks))
	if m.group {
		groups = append(groups, socks)
	} else {
		for _, s := range socks {
			groups = append(groups, []*xsk.Socket{s})
		}
	}
	// consume takes the stamped datagrams of b, received on queue q, into
	// delays and late and returns how many there were.
	consume := func(q int, b *xsk.Batch, delays *[]int64, late *[]lateFrame) int {
		now := mono()
		n := 0
		for j := 0; j < b.Len(); j++ {
			pl, ok := udpPayload(b.Frame(j), benchPort)
			if !ok {
				continue
			}
			seq, ts, ok := unstamp(pl)
			if !ok {
				continue
			}
			n++
			*delays = append(*delays, now-ts)
			if now-ts > int64(x.bound) {
				*late = append(*late, lateFrame{queue: q, at: now, delay: now - ts})
			}
			if w := seq / 64; w < uint64(len(seen)) {
				if atomic.OrUint64(&seen[w], 1<<(seq%64))&(1<<(seq%64)) != 0 {
					dups.Add(1)
				}
			}
		}
		return n
	}
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	if m.runner || m.plain {
		groups = nil // the runner's or the plain loop's goroutines
		x.stats = nil
		delays := make([][]int64, len(socks))
		late := make([][]lateFrame, len(socks))
		handler := func(s *xsk.Socket, b *xsk.Batch) {
			i := slices.Index(socks, s)
			got.Add(uint64(consume(s.Queue(), b, &delays[i], &late[i])))
		}
		collect := func() {
			mu.Lock()
			for i := range socks {
				x.delays = append(x.delays, delays[i]...)
				x.late = append(x.late, late[i]...)
			}
			mu.Unlock()
		}
		if m.runner {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer collect()
				ready <- struct{}{}
				if err := r.dev.Receive(ctx, m.cfg, handler); err != nil {
					fail(err)
				}
			}()
			<-ready
		} else {
			var pw sync.WaitGroup
			for _, sk := range socks {
				wg.Add(1)
				pw.Add(1)
				go func() {
					defer wg.Done()
					defer pw.Done()
					b := sk.NewBatch(64)
					ready <- struct{}{}
					for ctx.Err() == nil {
						if sk.Receive(b) == 0 {
							if _, err := sk.Wait(10*time.Millisecond, false); err != nil {
								fail(err)
								return
							}
							continue
						}
						handler(sk, b)
						sk.Release(b)
					}
				}()
			}
			for range socks {
				<-ready
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pw.Wait()
				collect()
			}()
		}
	}
	x.stats = make([]coalesce.RXStats, len(groups))
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := coalesce.LockThread()
			if err != nil {
				ready <- struct{}{}
				fail(err)
				return
			}
			defer unlock()
			boost()
			rcv, err := newBenchReceiver(g, m.p)
			if err != nil {
				ready <- struct{}{}
				fail(err)
				return
			}
			delays := make([]int64, 0, expect)
			var late []lateFrame
			c0 := threadCPU()
			ready <- struct{}{}
			for {
				bs, err := rcv.next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					break
				}
				n := 0
				for k, b := range bs {
					n += consume(g[k].Queue(), b, &delays, &late)
				}
				rcv.release()
				got.Add(uint64(n))
			}
			c := threadCPU() - c0
			mu.Lock()
			x.thrCPU += c
			x.delays = append(x.delays, delays...)
			x.late = append(x.late, late...)
			x.stats[i] = rcv.stats()
			mu.Unlock()
		}()
	}
	for range groups {
		<-ready
	}
	boostProcess(benchNice)
	cfg, _ := json.Marshal(senderConfig{Dst: r.pair.B.IPv4.String(), Port: benchPort, Rate: rate, Duration: dur, Flows: 8, Size: 64,
		Bursty: os.Getenv("XDPIO_COALESCE_BURSTY") != "", Nice: envInt("XDPIO_COALESCE_SENDER_NICE", senderNice)})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), dur+10*time.Second)
	defer scancel()
	cmd := r.pair.A.Command(sctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envSender+"="+string(cfg))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		cancel()
		wg.Wait()
		t.Fatalf("sender: %v: %s", err, stderr.String())
	}
	if err := json.Unmarshal(out.Bytes(), &x.sent); err != nil {
		t.Fatalf("sender output %q: %v", out.String(), err)
	}
	// Drain: frames still in flight, bounded.
	for deadline := time.Now().Add(time.Second); got.Load() < x.sent.Sent && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	wg.Wait()
	x.procCPU = processCPU() - cpu0
	x.schedLat = schedLatencies()
	for i := range x.schedLat {
		x.schedLat[i] -= sl0[i]
	}
	if len(errs) > 0 {
		t.Fatalf("%s: receivers failed: %v", name, errs)
	}
	x.received, x.dups = got.Load(), dups.Load()
	x.runs = []string{fmt.Sprintf("%v@%.0fk", x.cpuPerPkt(), float64(x.sent.Sent)/x.sent.Elapsed.Seconds()/1e3)}
	x.xskDrops, x.linkDrops = r.xskDrops()-xd0, r.linkDrops()-ld0
	x.rxSyscalls = r.syscalls() - sw0
	slices.Sort(x.delays)
	return x
}

// lateFrame is a frame delivered later than a run's bound.
type lateFrame struct {
	queue int
	at    int64 // delivery, mono()
	delay int64 // ns since the sender's stamp
}

// episodes groups the late frames into stalls: late frames of one queue
// delivered within a millisecond of each other belong to one episode (a
// receiver, or the kernel path before it, held up once). It returns the
// number of episodes, the frames in the largest, and the worst delay.
func (x *rxRun) episodes() (n, largest int, worst time.Duration) {
	ls := slices.Clone(x.late)
	slices.SortFunc(ls, func(a, b lateFrame) int {
		if a.queue != b.queue {
			return a.queue - b.queue
		}
		return int(a.at - b.at)
	})
	size := 0
	for i, l := range ls {
		if i == 0 || l.queue != ls[i-1].queue || l.at-ls[i-1].at > int64(time.Millisecond) {
			n++
			size = 0
		}
		size++
		largest = max(largest, size)
		worst = max(worst, time.Duration(l.delay))
	}
	return n, largest, worst
}

// merge adds run y to x (nil x: y) and sorts the delays.
func (x *rxRun) merge(y *rxRun) *rxRun {
	if x == nil {
		return y
	}
	x.sent.Sent += y.sent.Sent
	x.sent.Elapsed += y.sent.Elapsed
	x.sent.Errors += y.sent.Errors
	x.received += y.received
	x.dups += y.dups
	x.xskDrops += y.xskDrops
	x.linkDrops += y.linkDrops
	x.rxSyscalls += y.rxSyscalls
	x.procCPU += y.procCPU
	for i := range x.schedLat {
		x.schedLat[i] += y.schedLat[i]
	}
	x.thrCPU += y.thrCPU
	x.delays = append(x.delays, y.delays...)
	x.late = append(x.late, y.late...)
	slices.Sort(x.delays)
	x.stats = append(x.stats, y.stats...)
	x.runs = append(x.runs, y.runs...)
	return x
}

func (x *txRun) merge(y *txRun) *txRun {
	if x == nil {
		return y
	}
	x.sent += y.sent
	x.counted += y.counted
	x.kicks += y.kicks
	x.cpu += y.cpu
	x.elapsed += y.elapsed
	x.p99 = append(x.p99, y.p99...)
	return x
}

type txRun struct {
	name    string
	rate    float64
	sent    uint64 // frames put on the TX ring
	counted uint64 // frames the XDP counter on A saw
	kicks   uint64
	cpu     time.Duration // RUSAGE_THREAD of the sending thread
	stats   coalesce.TXStats
	elapsed time.Duration
	p99     []time.Duration // per round, submit to TX ring
}

// runTX sends rate frames per second for dur through a Transmitter on B's
// queue 0, one Submit per frame, and counts them with the XDP counter on A.
func (r *rig) runTX(name string, p coalesce.TXParams, rate float64, dur time.Duration) *txRun {
	t := r.t
	x := &txRun{name: name, rate: rate}
	s := r.dev.Sockets()[0]
	frame, err := trafficgen.BuildFrame(trafficgen.FrameSpec{
		SrcMAC: r.pair.B.MAC, DstMAC: r.pair.A.MAC, Src: r.pair.B.IPv4, Dst: r.pair.A.IPv4,
		SrcPort: 42000, DstPort: benchPort + 1, Size: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	c0, err := r.counter.Count()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		unlock, err := coalesce.LockThread()
		if err != nil {
			done <- err
			return
		}
		defer unlock()
		boost()
		tx, err := coalesce.NewTransmitter(s, p, coalesce.Options{})
		if err != nil {
			done <- err
			return
		}
		st0, _ := s.Stats()
		b := s.NewBatch(1)
		cpu0 := threadCPU()
		start := mono()
		end := start + int64(dur)
		tick := 10 * time.Microsecond
		var made uint64
		for {
			now := mono()
			if now >= end {
				break
			}
			due := uint64(float64(now-start)*rate/1e9) + 1
			for made < due && mono() < end {
				if tx.Alloc(b, 1) == 0 {
					if _, err := tx.Poll(); err != nil {
						done <- err
						return
					}
					break
				}
				copy(b.Buffer(0), frame)
				b.SetLen(0, len(frame))
				if _, err := tx.Submit(b); err != nil {
					done <- err
					return
				}
				made++
			}
			d, err := tx.Poll()
			if err != nil {
				done <- err
				return
			}
			if d <= 0 || d > tick {
				d = tick
			}
			// The same short sleep as the Receiver's, which keeps the P:
			// the loop's own cost is what the settings share.
			s.SleepShort(d)
		}
		if err := tx.Flush(); err != nil {
			done <- err
			return
		}
		for deadline := mono() + int64(time.Second); s.TXPending() > 0 && mono() < deadline; {
			s.Complete()
		}
		x.elapsed = time.Duration(mono() - start)
		x.cpu = threadCPU() - cpu0
		st1, _ := s.Stats()
		x.sent = st1.TXFrames - st0.TXFrames
		x.kicks = st1.Kicks - st0.Kicks
		x.stats = tx.Stats()
		x.p99 = []time.Duration{time.Duration(x.stats.Delay.Quantile(0.99))}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		c1, err := r.counter.Count()
		if err != nil {
			t.Fatal(err)
		}
		x.counted = c1 - c0
		if x.counted >= x.sent || time.Now().After(deadline) {
			break
		}
	}
	return x
}

// TestCoalesceBenchmark is the benchmark: a kernel UDP sender at
// fixed rates into a 2-queue AF_XDP receiver, CPU per packet and added
// delay with batching off, rx-usecs 50 and adaptive (a goroutine per
// queue), and rx-usecs 50 with one goroutine for both queues
// (GroupReceiver; the long version also runs batching off that way, and
// the goals compare each setting with batching off in the same shape);
// then TX frames per
// kick and CPU per packet with tx-usecs 0 and 50. The short version (CI)
// checks the accounting; -bench-report runs longer and checks the goals:
//
//	go test -run TestCoalesceBenchmark -v ./coalesce/ -args -bench-report
//
// It also measures the floor no policy can beat on this machine at this
// moment: how late a bare 50µs timed sleep ends on a thread set up like
// the receivers' (before and after the runs), and how busy the machine
// was (CPU pressure). Knobs, for experiments: XDPIO_COALESCE_RATES
// (comma-separated packets/s), XDPIO_COALESCE_MODES (indexes into the
// settings), XDPIO_COALESCE_MS and XDPIO_COALESCE_ROUNDS (per setting),
// XDPIO_COALESCE_BURSTY=1 (the sender sleeps 10µs between sends),
// XDPIO_COALESCE_SENDER_NICE, XDPIO_COALESCE_RT=1 (receivers run
// SCHED_FIFO), XDPIO_COALESCE_PROCS (GOMAXPROCS of the receiving process,
// default one more than its receiving goroutines), XDPIO_COALESCE_NOTX=1
// and XDPIO_COALESCE_TXONLY=1.
func TestCoalesceBenchmark(t *testing.T) {
	dur, rounds, rates := time.Second, 1, []float64{100e3, 300e3}
	if *benchReport {
		dur, rounds = 2*time.Second, 3
	}
	start := time.Now()
	r := newRig(t)
	// One P more than there are receiving goroutines, as the Receiver's
	// documentation advises, so that all of them keep their P through
	// their timed sleeps and the rest of the program still has one.
	procs := envInt("XDPIO_COALESCE_PROCS", len(r.dev.Sockets())+1)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	modes := []rxMode{
		{name: "off (rx-usecs 0)", p: coalesce.Params{}},
		{name: "rx-usecs 50", p: coalesce.Params{RXUsecs: 50}},
		{name: "adaptive ≤50µs", p: coalesce.Params{RXUsecs: 50, Adaptive: true}},
		{name: "50, one thread", p: coalesce.Params{RXUsecs: 50}, group: true},
	}
	if *benchReport {
		modes = append(modes,
			rxMode{name: "off, one thread", p: coalesce.Params{}, group: true},
			rxMode{name: "rx-usecs 200", p: coalesce.Params{RXUsecs: 200}},
			rxMode{name: noHoldMode, p: coalesce.Params{RXUsecs: 50}})
	}
	if v := os.Getenv("XDPIO_COALESCE_RATES"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			var x float64
			fmt.Sscan(f, &x)
			rates = append(rates, x)
		}
	}
	if v := os.Getenv("XDPIO_COALESCE_MODES"); v != "" {
		var sel []int
		for _, f := range strings.Split(v, ",") {
			var i int
			fmt.Sscan(f, &i)
			sel = append(sel, i)
		}
		var ms = modes
		modes = nil
		for _, i := range sel {
			modes = append(modes, ms[i])
		}
	}
	dur = time.Duration(envInt("XDPIO_COALESCE_MS", int(dur/time.Millisecond))) * time.Millisecond
	rounds = envInt("XDPIO_COALESCE_ROUNDS", rounds)
	var rx [][]*rxRun
	if os.Getenv("XDPIO_COALESCE_TXONLY") != "" {
		rates = nil
	}
	psi0 := cpuPressure()
	floor0 := r.timerFloor(50*time.Microsecond, 2000)
	// Rounds interleave the settings, so that a burst of load from
	// elsewhere on the machine does not fall on one setting only.
	for _, rate := range rates {
		row := make([]*rxRun, len(modes))
		for range rounds {
			for i, m := range modes {
				old := coalesce.SetHoldP(m.name != noHoldMode)
				row[i] = row[i].merge(r.runRX(m, rate, dur))
				coalesce.SetHoldP(old)
			}
		}
		rx = append(rx, row)
	}
	txModes := []struct {
		name string
		p    coalesce.TXParams
	}{{"tx-usecs 0", coalesce.TXParams{}}, {"tx-usecs 50", coalesce.TXParams{TXUsecs: 50}}}
	if os.Getenv("XDPIO_COALESCE_NOTX") != "" {
		txModes = nil
	}
	tx := make([]*txRun, len(txModes))
	for range rounds {
		for i, m := range txModes {
			tx[i] = tx[i].merge(r.runTX(m.name, m.p, 100e3, dur))
		}
	}

	floor1 := r.timerFloor(50*time.Microsecond, 2000)
	psi1 := cpuPressure()
	var sb strings.Builder
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&sb, "load average at the end: %s", la)
	}
	if psi1 > psi0 {
		fmt.Fprintf(&sb, "CPU pressure over the run (some tasks waiting for a CPU): %.0f%% of the time\n", 100*(psi1-psi0).Seconds()/elapsed(start).Seconds())
	}
	fmt.Fprintf(&sb, "timer floor, a 50µs SleepShort on a receiver-like thread, lateness p50/p99/max: before %v, after %v\n", floor0, floor1)
	fmt.Fprintf(&sb, "GOMAXPROCS %d on %d CPUs\n", procs, runtime.NumCPU())
	fmt.Fprintf(&sb, "RX: kernel UDP sender (8 flows, sendmmsg) → veth (2 queues, XDP copy mode) → 2 AF_XDP sockets, %v per setting\n", dur)
	fmt.Fprintf(&sb, "%-8s %-17s %9s %9s %6s %7s %10s %10s %6s %6s %6s %8s %8s %8s %s\n",
		"rate", "setting", "sent/s", "received", "lost", "drops", "cpu/pkt", "thr/pkt", "ratio", "fr/b", "wk/b", "p50", "p99", "max", "profile")
	for _, row := range rx {
		base := row[0].cpuPerPkt()
		for _, x := range row {
			batches, frames, wakeups, prof := x.sum()
			fmt.Fprintf(&sb, "%-8s %-17s %9.0f %9d %6d %7d %10v %10v %6.2f %6.1f %6.2f %8v %8v %8v %s\n",
				fmt.Sprintf("%.0fk", x.rate/1e3), x.name, float64(x.sent.Sent)/x.sent.Elapsed.Seconds(), x.received,
				int64(x.sent.Sent)-int64(x.received), x.xskDrops+x.linkDrops, x.cpuPerPkt(), x.thrPerPkt(),
				float64(x.cpuPerPkt())/float64(base), float64(frames)/float64(max(batches, 1)), float64(wakeups)/float64(max(batches, 1)),
				x.quantile(0.5).Round(time.Microsecond), x.quantile(0.99).Round(time.Microsecond),
				time.Duration(x.delays[len(x.delays)-1]).Round(time.Microsecond), prof)
		}
	}
	for _, row := range rx {
		var off1, on1 *rxRun
		for _, x := range row {
			switch x.name {
			case "off, one thread":
				off1 = x
			case "50, one thread":
				on1 = x
			}
		}
		if off1 != nil && on1 != nil {
			fmt.Fprintf(&sb, "%.0fk: with one thread for both queues, rx-usecs 50 uses %.2f of the CPU per packet of batching off\n", on1.rate/1e3, float64(on1.cpuPerPkt())/float64(off1.cpuPerPkt()))
		}
	}
	fmt.Fprintf(&sb, "TX: one Submit per frame at 100k frames/s from B queue 0, counted by XDP on A\n")
	fmt.Fprintf(&sb, "%-12s %9s %9s %9s %8s %9s %10s %6s %s\n", "setting", "sent/s", "sent", "counted", "kicks", "fr/kick", "cpu/pkt", "ratio", "p99 wait per round")
	for _, x := range tx {
		fmt.Fprintf(&sb, "%-12s %9.0f %9d %9d %8d %9.1f %10v %6.2f %v\n", x.name, float64(x.sent)/x.elapsed.Seconds(), x.sent, x.counted, x.kicks,
			float64(x.sent)/float64(max(x.kicks, 1)), x.cpu/time.Duration(max(x.sent, 1)),
			float64(x.cpu/time.Duration(max(x.sent, 1)))/float64(tx[0].cpu/time.Duration(max(tx[0].sent, 1))), x.p99)
	}
	fmt.Fprintf(&sb, "delay tail (sender stamp to delivery): p90 p95 p99 p99.9; frames over the bound (rx-usecs + 100µs) in stall episodes (late frames of a queue within 1ms of each other): frames, episodes, largest, worst\n")
	for _, row := range rx {
		for _, x := range row {
			n, largest, worst := x.episodes()
			fmt.Fprintf(&sb, "  %.0fk %-17s %v %v %v %v; over %v: %d (%.2f%%) in %d episodes, largest %d frames, worst %v\n", x.rate/1e3, x.name,
				x.quantile(0.9).Round(time.Microsecond), x.quantile(0.95).Round(time.Microsecond), x.quantile(0.99).Round(time.Microsecond), x.quantile(0.999).Round(time.Microsecond),
				x.bound, len(x.late), 100*float64(len(x.late))/float64(max(len(x.delays), 1)), n, largest, worst.Round(time.Microsecond))
		}
	}
	fmt.Fprintf(&sb, "delay as the receivers saw it (last look at an empty ring to delivery), worst socket: p50, p99\n")
	for _, row := range rx {
		for _, x := range row {
			m, p := x.policyDelay()
			fmt.Fprintf(&sb, "  %.0fk %-17s %v %v\n", x.rate/1e3, x.name, m.Round(time.Microsecond), p.Round(time.Microsecond))
		}
	}
	fmt.Fprintf(&sb, "receivers' counters: polls (kernel waits for a first frame), sleeps, batches by timer/early/frames\n")
	for _, row := range rx {
		for _, x := range row {
			var polls, sleeps, timer, early, limit uint64
			for _, st := range x.stats {
				polls += st.Polls
				sleeps += st.Sleeps
				timer += st.TimerExpiries
				early += st.Early
				limit += st.FrameLimit
			}
			fmt.Fprintf(&sb, "  %.0fk %-17s %d %d %d/%d/%d\n", x.rate/1e3, x.name, polls, sleeps, timer, early, limit)
		}
	}
	fmt.Fprintf(&sb, "Go scheduler (goroutines runnable before running, the receiving process): count, p99, max\n")
	for _, row := range rx {
		for _, x := range row {
			n, p99, mx := schedSummary(x.schedLat)
			fmt.Fprintf(&sb, "  %.0fk %-17s %d %v %v\n", x.rate/1e3, x.name, n, p99, mx)
		}
	}
	fmt.Fprintf(&sb, "per round (cpu/pkt@achieved rate), and socket RX wake-up syscalls per batch:\n")
	for _, row := range rx {
		for _, x := range row {
			b, _, _, _ := x.sum()
			fmt.Fprintf(&sb, "  %.0fk %-17s %v %.2f\n", x.rate/1e3, x.name, x.runs, float64(x.rxSyscalls)/float64(max(b, 1)))
		}
	}
	t.Logf("\n%s", sb.String())
	if rates == nil {
		return
	}

	// Accounting, in every run: each datagram the sender's kernel accepted
	// was received exactly once or shows up in a drop counter.
	for _, row := range rx {
		for _, x := range row {
			// Sender and receiver stamp with the same clock; a frame
			// that arrived before it was sent means they do not.
			if len(x.delays) > 0 && x.delays[0] < -int64(50*time.Microsecond) {
				t.Errorf("%.0fk %s: delay %v: the sender's and the receiver's clocks disagree", x.rate/1e3, x.name, time.Duration(x.delays[0]))
			}
			if x.dups != 0 {
				t.Errorf("%.0fk %s: %d duplicate datagrams", x.rate/1e3, x.name, x.dups)
			}
			if x.received+x.xskDrops+x.linkDrops < x.sent.Sent || x.received > x.sent.Sent {
				t.Errorf("%.0fk %s: sent %d, received %d, dropped %d: frames unaccounted for", x.rate/1e3, x.name, x.sent.Sent, x.received, x.xskDrops+x.linkDrops)
			}
		}
		// Under the race detector the receiver with batching off is
		// already late to every frame and batches by itself.
		if off, on := row[0], row[1]; !raceEnabled && batchMean(on) <= batchMean(off) {
			t.Errorf("%.0fk: %.2f frames per batch with rx-usecs 50, %.2f off: batching had no effect", off.rate/1e3, batchMean(on), batchMean(off))
		}
	}
	for _, x := range tx {
		// The counter sees every frame on A's end, including the odd one
		// B's kernel sends itself (IPv6 neighbour discovery, MLD).
		if x.counted < x.sent || x.counted > x.sent+16 {
			t.Errorf("%s: %d frames sent, %d arrived", x.name, x.sent, x.counted)
		}
	}
	if fpk := func(x *txRun) float64 { return float64(x.sent) / float64(max(x.kicks, 1)) }; len(tx) >= 2 && fpk(tx[1]) <= fpk(tx[0]) {
		t.Errorf("tx-usecs 50 sent %.1f frames per kick, tx-usecs 0 %.1f: want more", fpk(tx[1]), fpk(tx[0]))
	}
	if !*benchReport {
		return
	}
	// The goals.
	for _, row := range rx {
		for _, x := range row {
			if got := float64(x.sent.Sent) / x.sent.Elapsed.Seconds(); got < 0.95*x.rate {
				t.Errorf("%.0fk %s: sender reached only %.0f/s", x.rate/1e3, x.name, got)
			}
			if x.received != x.sent.Sent {
				t.Errorf("%.0fk %s: lost %d of %d", x.rate/1e3, x.name, x.sent.Sent-x.received, x.sent.Sent)
			}
		}
		byName := func(name string) *rxRun {
			for _, x := range row {
				if x.name == name {
					return x
				}
			}
			return nil
		}
		// Each batching setting against batching off in the same shape: a
		// goroutine per queue, or one for both (when that ran).
		off, off1 := byName("off (rx-usecs 0)"), byName("off, one thread")
		for _, name := range []string{"rx-usecs 50", "adaptive ≤50µs", "50, one thread"} {
			x := byName(name)
			if x == nil {
				continue
			}
			base := off
			if strings.Contains(name, "one thread") && off1 != nil {
				base = off1
			}
			if base == nil {
				continue // XDPIO_COALESCE_MODES left batching off out
			}
			if ratio := float64(x.cpuPerPkt()) / float64(base.cpuPerPkt()); ratio > 0.6 {
				t.Errorf("%.0fk %s uses %.0f%% of the CPU per packet of %s: goal ≤ 60%%", x.rate/1e3, x.name, 100*ratio, base.name)
			}
			if p99 := x.quantile(0.99); p99 > 150*time.Microsecond {
				t.Errorf("%.0fk %s: p99 delay %v, goal ≤ rx-usecs + 100µs = 150µs", x.rate/1e3, x.name, p99)
			}
		}
	}
}

const schedMetric = "/sched/latencies:seconds"

// schedLatencies returns the bucket counts of the Go scheduler's latency
// histogram: how long goroutines waited runnable before they ran.
func schedLatencies() []uint64 {
	sm := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(sm)
	return slices.Clone(sm[0].Value.Float64Histogram().Counts)
}

// schedSummary returns the count, the 99th percentile and the largest
// bucket (upper bounds) of a difference of schedLatencies.
func schedSummary(c []uint64) (n uint64, p99, mx time.Duration) {
	sm := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(sm)
	b := sm[0].Value.Float64Histogram().Buckets
	for _, v := range c {
		n += v
	}
	var acc uint64
	for i, v := range c {
		if v == 0 {
			continue
		}
		up := time.Duration(b[i+1] * 1e9)
		if math.IsInf(b[i+1], 1) {
			up = time.Duration(b[i] * 1e9)
		}
		acc += v
		if p99 == 0 && acc >= n*99/100 {
			p99 = up
		}
		mx = up
	}
	return n, p99, mx
}

// floor is the lateness distribution of a timed sleep.
type floor struct{ p50, p99, max time.Duration }

func (f floor) String() string {
	return fmt.Sprintf("%v/%v/%v", f.p50.Round(time.Microsecond), f.p99.Round(time.Microsecond), f.max.Round(time.Microsecond))
}

// timerFloor measures how late n sleeps of d through Socket.SleepShort
// end, on a thread set up like the receivers' (locked, 1ns timer slack,
// boosted): the wake-up latency no batching policy can beat, on this
// machine, at this moment.
func (r *rig) timerFloor(d time.Duration, n int) floor {
	s := r.dev.Sockets()[0]
	res := make(chan floor)
	go func() {
		unlock, err := coalesce.LockThread()
		if err == nil {
			defer unlock()
		}
		boost()
		late := make([]time.Duration, n)
		for i := range late {
			t0 := mono()
			s.SleepShort(d)
			late[i] = time.Duration(mono()-t0) - d
		}
		slices.Sort(late)
		res <- floor{late[n/2], late[n*99/100], late[n-1]}
	}()
	return <-res
}

// cpuPressure returns the machine's total time some task waited for a CPU
// (/proc/pressure/cpu), or 0 where it cannot be read.
func cpuPressure() time.Duration {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	i := bytes.Index(b, []byte("total="))
	if i < 0 {
		return 0
	}
	var us int64
	fmt.Sscan(string(b[i+len("total="):]), &us)
	return time.Duration(us) * time.Microsecond
}

func elapsed(t time.Time) time.Duration { return time.Since(t) }

// noHoldMode is rx-usecs 50 with every sleep through the Go scheduler
// (Socket.Sleep), which hands the P over: what SleepShort saves.
const noHoldMode = "50, P handed over"

// envInt reads an integer knob of the benchmark from the environment.
func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var x int
		if _, err := fmt.Sscan(v, &x); err == nil {
			return x
		}
	}
	return def
}

func batchMean(x *rxRun) float64 {
	b, f, _, _ := x.sum()
	return float64(f) / float64(max(b, 1))
}

var _ = unix.ETH_P_IP
