package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/xdpio/xdpio/offload"
	"math/rand/v2"

	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// flowFrames builds nflows UDP/IPv4 flows (every fourth one IPv6) of
// per frames each, interleaved; the payload carries flow and sequence
// numbers.
func flowFrames(tb testing.TB, nflows, per int) [][]byte {
	tb.Helper()
	templ := make([][]byte, nflows)
	for f := range templ {
		udp := &layers.UDP{SrcPort: layers.UDPPort(10000 + f), DstPort: 5201}
		pl := gopacket.Payload(make([]byte, 8))
		if f%4 == 3 {
			templ[f] = build(tb, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolUDP, "2001:db8::1", fmt.Sprintf("2001:db8::%x", f+2)), udp, pl)
		} else {
			templ[f] = build(tb, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP, "198.18.0.1", fmt.Sprintf("198.19.%d.%d", f/250, f%250+1)), udp, pl)
		}
	}
	var out [][]byte
	for seq := range per {
		for f := range nflows {
			fr := append([]byte(nil), templ[f]...)
			binary.BigEndian.PutUint32(fr[len(fr)-8:], uint32(f))
			binary.BigEndian.PutUint32(fr[len(fr)-4:], uint32(seq))
			out = append(out, fr)
		}
	}
	return out
}

func frameSeq(fr []byte) (flow, seq uint32) {
	return binary.BigEndian.Uint32(fr[len(fr)-8:]), binary.BigEndian.Uint32(fr[len(fr)-4:])
}

// TestDispatchOrderAndAccounting sends interleaved flows through small
// queues with backpressure: every frame is delivered once, each flow's
// frames arrive in order on one worker (the one Worker predicts), and the
// counters add up.
func TestDispatchOrderAndAccounting(t *testing.T) {
	const nflows, per = 64, 200
	frames := flowFrames(t, nflows, per)
	var mu sync.Mutex
	next := make([]uint32, nflows)
	workerOf := make([]int, nflows)
	for i := range workerOf {
		workerOf[i] = -1
	}
	var fail atomic.Value
	d, err := NewDispatcher(DispatchOptions{Workers: 4, QueueLen: 32, BatchSize: 8}, func(w int, fs [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, fr := range fs {
			f, seq := frameSeq(fr)
			if seq != next[f] {
				fail.CompareAndSwap(nil, fmt.Sprintf("flow %d: got seq %d, want %d", f, seq, next[f]))
			}
			next[f]++
			if workerOf[f] == -1 {
				workerOf[f] = w
			} else if workerOf[f] != w {
				fail.CompareAndSwap(nil, fmt.Sprintf("flow %d on workers %d and %d", f, workerOf[f], w))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(frames); i += 37 { // odd-sized calls
		n, err := d.Dispatch(frames[i:min(i+37, len(frames))]...)
		if err != nil || n != min(37, len(frames)-i) {
			t.Fatalf("Dispatch = %d, %v", n, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if f := fail.Load(); f != nil {
		t.Fatal(f)
	}
	s := d.Stats()
	if s.Frames != uint64(len(frames)) || s.Delivered != s.Frames || s.Dropped != 0 || s.Refused != 0 || s.Pending != 0 {
		t.Errorf("stats %+v, want all %d frames delivered", s, len(frames))
	}
	var sum uint64
	used := 0
	for i, w := range s.Workers {
		sum += w.Delivered
		if w.Enqueued != w.Delivered {
			t.Errorf("worker %d: enqueued %d, delivered %d", i, w.Enqueued, w.Delivered)
		}
		if w.Delivered > 0 {
			used++
		}
	}
	if sum != s.Delivered {
		t.Errorf("workers delivered %d, total %d", sum, s.Delivered)
	}
	if used < 4 {
		t.Errorf("%d flows used only %d of 4 workers", nflows, used)
	}
	for f := range nflows {
		if next[f] != per {
			t.Errorf("flow %d: %d of %d frames", f, next[f], per)
		}
		if w := d.Worker(frames[f]); w != workerOf[f] {
			t.Errorf("flow %d: Worker says %d, delivered on %d", f, w, workerOf[f])
		}
	}
	if _, err := d.Dispatch(frames[0]); !errors.Is(err, ErrDispatcherClosed) {
		t.Errorf("Dispatch after Close: %v", err)
	}
	if s := d.Stats(); s.Refused != 1 || s.Frames != s.Delivered+s.Refused {
		t.Errorf("after a refused frame: %+v", s)
	}
}

// TestDispatchDrop fills the queues of a stalled worker with the Drop
// option: the overflow is dropped, counted and handed to OnDrop, and
// frames + dropped + delivered add up.
func TestDispatchDrop(t *testing.T) {
	frames := flowFrames(t, 16, 100)
	release := make(chan struct{})
	var dropped atomic.Uint64
	d, err := NewDispatcher(DispatchOptions{Workers: 2, QueueLen: 16, BatchSize: 4, Drop: true, OnDrop: func([]byte) { dropped.Add(1) }},
		func(w int, fs [][]byte) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, fr := range frames {
		n, err := d.Dispatch(fr)
		if err != nil {
			t.Fatal(err)
		}
		accepted += n
	}
	s := d.Stats()
	if s.Dropped == 0 || s.Dropped != dropped.Load() || s.Dropped+uint64(accepted) != uint64(len(frames)) {
		t.Errorf("stalled workers: stats %+v, OnDrop %d, accepted %d of %d", s, dropped.Load(), accepted, len(frames))
	}
	if s.Frames != s.Delivered+s.Dropped+s.Pending {
		t.Errorf("counters do not add up: %+v", s)
	}
	// Each worker holds at most QueueLen frames.
	if s.Pending > 2*16 {
		t.Errorf("%d frames pending with 2 workers of 16", s.Pending)
	}
	close(release)
	d.Close()
	s = d.Stats()
	if s.Pending != 0 || s.Delivered != uint64(accepted) || s.Frames != s.Delivered+s.Dropped {
		t.Errorf("after Close: %+v, accepted %d", s, accepted)
	}
}

// TestDispatchCloseUnblocks closes a Dispatcher while Dispatch waits for
// room (backpressure): Dispatch returns ErrDispatcherClosed, the frames it
// could not queue are refused and counted, the ones it had queued are
// still delivered.
func TestDispatchCloseUnblocks(t *testing.T) {
	frames := flowFrames(t, 1, 100) // one flow: one worker
	release := make(chan struct{})
	var refused atomic.Uint64
	d, err := NewDispatcher(DispatchOptions{Workers: 2, QueueLen: 8, BatchSize: 4, OnDrop: func([]byte) { refused.Add(1) }},
		func(int, [][]byte) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result)
	go func() {
		n, err := d.Dispatch(frames...)
		done <- result{n, err}
	}()
	// Wait until Dispatch is blocked: QueueLen (8) frames are queued or
	// held by the stalled handler.
	deadline := time.Now().Add(5 * time.Second)
	for d.Stats().Workers[d.Worker(frames[0])].Enqueued < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("Dispatch did not fill the queue: %+v", d.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	r := <-done
	if !errors.Is(r.err, ErrDispatcherClosed) {
		t.Fatalf("Dispatch = %d, %v; want ErrDispatcherClosed", r.n, r.err)
	}
	close(release)
	<-closed
	s := d.Stats()
	if s.Delivered != uint64(r.n) || s.Refused != uint64(len(frames)-r.n) || s.Refused != refused.Load() || s.Pending != 0 {
		t.Errorf("stats %+v, accepted %d, OnDrop %d", s, r.n, refused.Load())
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDispatchClasses(t *testing.T) {
	cs := frameCases(t)
	var got atomic.Uint64
	d, err := NewDispatcher(DispatchOptions{Workers: 3}, func(w int, fs [][]byte) { got.Add(uint64(len(fs))) })
	if err != nil {
		t.Fatal(err)
	}
	var noPorts, nonIP, malformed uint64
	for _, c := range cs {
		switch {
		case errors.Is(c.wantErr, ErrNotIP):
			nonIP++
		case c.wantErr != nil:
			malformed++
			if w := d.Worker(c.frame); w != 0 {
				t.Errorf("%s: malformed frame to worker %d, want 0", c.name, w)
			}
		case !c.ports:
			noPorts++
		}
		if _, err := d.Dispatch(c.frame); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	s := d.Stats()
	if s.NoPorts != noPorts || s.NonIP != nonIP || s.Malformed != malformed || s.Delivered != uint64(len(cs)) || got.Load() != uint64(len(cs)) {
		t.Errorf("stats %+v, want no_ports %d non_ip %d malformed %d delivered %d", s, noPorts, nonIP, malformed, len(cs))
	}
}

func TestDispatchSymmetric(t *testing.T) {
	d, err := NewDispatcher(DispatchOptions{Workers: 7, Symmetric: SymmetricXOR}, func(int, [][]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 200 {
		src, dst := fmt.Sprintf("198.18.%d.%d", i/200, i%200+1), "198.19.0.1"
		a := build(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP, src, dst), &layers.TCP{SrcPort: layers.TCPPort(30000 + i), DstPort: 443, DataOffset: 5})
		b := build(t, &layers.Ethernet{SrcMAC: macB, DstMAC: macA, EthernetType: layers.EthernetTypeIPv4}, ip4(layers.IPProtocolTCP, dst, src), &layers.TCP{SrcPort: 443, DstPort: layers.TCPPort(30000 + i), DataOffset: 5})
		if d.Worker(a) != d.Worker(b) {
			t.Fatalf("flow %d: directions on workers %d and %d", i, d.Worker(a), d.Worker(b))
		}
	}
}

func TestDispatchOptions(t *testing.T) {
	h := func(int, [][]byte) {}
	for _, c := range []struct {
		o    DispatchOptions
		h    Handler
		want error
	}{
		{DispatchOptions{}, nil, ErrDispatchOptions},
		{DispatchOptions{Workers: -1}, h, ErrDispatchOptions},
		{DispatchOptions{Workers: 5000}, h, ErrDispatchOptions},
		{DispatchOptions{BatchSize: -1}, h, ErrDispatchOptions},
		{DispatchOptions{QueueLen: -5}, h, ErrDispatchOptions},
		{DispatchOptions{Symmetric: 7}, h, ErrSymmetricInvalid},
		{DispatchOptions{Key: []byte{1, 2}}, h, ErrKeyInvalid},
	} {
		if _, err := NewDispatcher(c.o, c.h); !errors.Is(err, c.want) {
			t.Errorf("%+v: error = %v, want %v", c.o, err, c.want)
		}
	}
}

// BenchmarkDispatch measures the dispatcher (parse, hash, batch, hand over
// to 2 workers) against a naive one (parse and hash the same way, then one
// channel send per frame), in the same binary:
//
//	go test ./rss -run '^$' -bench Dispatch
func BenchmarkDispatch(b *testing.B) {
	frames := flowFrames(b, 1024, 1)
	const batch = 64
	size := len(frames[0])
	b.Run("batched", func(b *testing.B) {
		var n atomic.Uint64
		d, err := NewDispatcher(DispatchOptions{Workers: 2}, func(_ int, fs [][]byte) { n.Add(uint64(len(fs))) })
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(size * batch))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			j := (i * batch) & 1023
			d.Dispatch(frames[j : j+batch]...)
			i++
		}
		d.Close()
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "frames/s")
	})
	b.Run("naive", func(b *testing.B) {
		t := newT(b, nil)
		chans := []chan []byte{make(chan []byte, 4096), make(chan []byte, 4096)}
		var wg sync.WaitGroup
		var n atomic.Uint64
		for _, c := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range c {
					n.Add(1)
				}
			}()
		}
		b.SetBytes(int64(size * batch))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			j := (i * batch) & 1023
			for _, fr := range frames[j : j+batch] {
				k, _ := ParseFlowKey(fr)
				h := t.HashFlow(k, SymmetricNone)
				chans[uint64(h)*2>>32] <- fr
			}
			i++
		}
		for _, c := range chans {
			close(c)
		}
		wg.Wait()
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "frames/s")
	})
	b.Run("parse+hash", func(b *testing.B) {
		t := newT(b, nil)
		b.SetBytes(int64(size))
		b.ReportAllocs()
		var x uint32
		i := 0
		for b.Loop() {
			fr := frames[i&1023]
			var lo offload.Layout
			fi, r := parseFlow(fr, &lo)
			if r != flowOK {
				b.Fatal(flowErr(fr, &lo, r))
			}
			x ^= t.hashFrame(fr, fi, SymmetricNone) // HashFrame without the error wrap
			i++
		}
		sinkHash = x
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	})
}

// BenchmarkDispatchSpeedup hands 4096 frames of 1024 flows to 2 workers
// and waits until all are handled, alternately with the Dispatcher
// (batches of 64 per Dispatch call) and with the naive per-frame channel
// send, and reports the ratio of the fastest round of each:
//
//	go test ./rss -run '^$' -bench DispatchSpeedup
func BenchmarkDispatchSpeedup(b *testing.B) {
	frames := flowFrames(b, 1024, 4)
	const batch = 64
	var got atomic.Uint64
	d, err := NewDispatcher(DispatchOptions{Workers: 2}, func(_ int, fs [][]byte) { got.Add(uint64(len(fs))) })
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	t := newT(b, nil)
	chans := []chan []byte{make(chan []byte, 4096), make(chan []byte, 4096)}
	var wg sync.WaitGroup
	for _, c := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range c {
				got.Add(1)
			}
		}()
	}
	defer func() {
		for _, c := range chans {
			close(c)
		}
		wg.Wait()
	}()
	wait := func(n uint64) {
		for got.Load() < n {
			runtime.Gosched()
		}
	}
	b.ReportAllocs()
	minD, minN := time.Duration(1<<62), time.Duration(1<<62)
	var total uint64
	for b.Loop() {
		t0 := time.Now()
		for i := 0; i < len(frames); i += batch {
			d.Dispatch(frames[i : i+batch]...)
		}
		total += uint64(len(frames))
		wait(total)
		t1 := time.Now()
		for _, fr := range frames {
			k, _ := ParseFlowKey(fr)
			chans[uint64(t.HashFlow(k, SymmetricNone))*2>>32] <- fr
		}
		total += uint64(len(frames))
		wait(total)
		minD, minN = min(minD, t1.Sub(t0)), min(minN, time.Since(t1))
	}
	b.ReportMetric(float64(len(frames))/minD.Seconds(), "dispatcher-frames/s")
	b.ReportMetric(float64(len(frames))/minN.Seconds(), "naive-frames/s")
	b.ReportMetric(float64(minN)/float64(minD), "speedup")
}

// TestDispatchBehindRSSQueue: the flows an RSS device puts on one queue
// (low hash bits, same key) still spread evenly over the workers of a
// Dispatcher behind that queue (high hash bits).
func TestDispatchBehindRSSQueue(t *testing.T) {
	eq, _ := Equal(4, 128)
	p, _ := NewPredictor(PredictorOptions{Indirection: eq})
	// 4 workers: a dispatcher that took the low bits too would put every
	// flow of queue 0 (hash & 3 == 0) on worker 0.
	d, err := NewDispatcher(DispatchOptions{Workers: 4}, func(int, [][]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(21, 22))
	var per [4]int
	n := 0
	for n < 3000 {
		k := randFlow(rng, false)
		k.Ports = true
		if q, _ := p.Queue(k); q != 0 {
			continue
		}
		fr := build(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP, k.Src.String(), k.Dst.String()),
			&layers.TCP{SrcPort: layers.TCPPort(k.SrcPort), DstPort: layers.TCPPort(k.DstPort), DataOffset: 5})
		per[d.Worker(fr)]++
		n++
	}
	for w, c := range per {
		if c < 600 || c > 900 { // 750 each expected; 6 sigma is about 140
			t.Errorf("worker %d got %d of %d flows of one RSS queue: %v", w, c, n, per)
		}
	}
}

// TestDispatchIndirection gives worker 0 three times the share of worker 1
// with a weighted table, and checks Worker against the table.
func TestDispatchIndirection(t *testing.T) {
	tab, err := Weights(128, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(DispatchOptions{Workers: 2, Indirection: tab}, func(int, [][]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := newT(t, nil)
	var per [2]int
	for _, fr := range flowFrames(t, 4000, 1) {
		hash, err := h.HashFrame(fr, SymmetricNone)
		if err != nil {
			t.Fatal(err)
		}
		w := d.Worker(fr)
		if want := int(tab[uint64(hash)*128>>32]); w != want {
			t.Fatalf("Worker = %d, the table says %d", w, want)
		}
		per[w]++
	}
	if per[0] < 2700 || per[0] > 3300 { // 3000 expected
		t.Errorf("weights 3:1 over 4000 flows gave %v", per)
	}
	if _, err := NewDispatcher(DispatchOptions{Workers: 2, Indirection: []uint32{0, 2}}, func(int, [][]byte) {}); !errors.Is(err, ErrDispatchOptions) {
		t.Errorf("entry past the workers: error = %v", err)
	}
	d2, err := NewDispatcher(DispatchOptions{Workers: 2, Indirection: []uint32{}}, func(int, [][]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	d2.Worker(flowFrames(t, 1, 1)[0]) // an empty table means none
	d2.Close()
}
