package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// A forwarder keeps forwarding: its frames come back through the
// completion ring and must be lent to the fill ring again. Before the
// library fed the fill ring from the pool, l2fwd stopped after exactly
// one fill ring (2048 frames) per queue. Here A sends over AF_XDP on each
// of 4 queues (a veth frame sent on queue q arrives on the peer's queue
// q), l2fwd on B sends every frame back, and A counts what returns, until
// more than a million frames went round; every frame is accounted for at
// both ends by the sockets' and the links' own counters.
func TestForwardsAMillionFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  xsk.Config
	}{
		{"copy", xsk.Config{Socket: xsk.SocketConfig{Bind: xsk.BindCopy}}},
		{"shared UMEM", xsk.Config{SharedUMEM: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { testForwardMillion(t, tc.cfg) })
	}
}

const (
	fwdQueues = 4
	fwdPort   = 9000
	fwdGoal   = 1_000_000
	// fwdWindow is how many frames a queue of A keeps in flight: less than
	// veth's 256-entry ring, so that a fast A does not just overflow it.
	fwdWindow = 192
)

func testForwardMillion(t *testing.T, cfg xsk.Config) {
	pair := netnstest.New(t, netnstest.Config{Queues: fwdQueues})
	cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(fwdPort)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fwdCtx, fwdStop := context.WithCancel(ctx)
	defer fwdStop()
	started := make(chan struct{})
	type result struct {
		sum summary
		err error
	}
	fwdDone := make(chan result, 1)
	go func() {
		var r result
		r.err = pair.B.Do(func() (err error) {
			r.sum, err = l2fwdStarted(fwdCtx, io.Discard, pair.B.Link, cfg, 64, 0, func() { close(started) })
			return err
		})
		fwdDone <- r
	}()
	<-started

	frame, err := trafficgen.BuildFrame(trafficgen.FrameSpec{
		SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC, Src: pair.A.IPv4, Dst: pair.B.IPv4,
		SrcPort: 40000, DstPort: fwdPort, Size: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	var dev *xsk.Device
	if err := pair.A.Do(func() (err error) {
		dev, err = xsk.Open(pair.A.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(fwdPort)}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	linkA0, linkB0 := linkStats(t, pair.A), linkStats(t, pair.B)

	// Each queue of A sends its share, keeping at most fwdWindow frames
	// unanswered; a window that makes no progress for a while lost frames
	// on the way (counted below), and the queue goes on.
	var wg sync.WaitGroup
	errs := make(chan error, fwdQueues)
	perQueue := fwdGoal/fwdQueues + 1000
	for _, s := range dev.Sockets() {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			if err := echoSender(ctx, s, frame, perQueue); err != nil {
				errs <- fmt.Errorf("A queue %d: %w", s.Queue(), err)
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Let the last frames come back (until none came for 100 ms), stop
	// the forwarder, and take what it sent while it stopped.
	back := drainUntilQuiet(dev, 100*time.Millisecond)
	fwdStop()
	r := <-fwdDone
	if r.err != nil {
		t.Fatalf("l2fwd: %v", r.err)
	}
	back += drainUntilQuiet(dev, 50*time.Millisecond)
	var sent, backRX, backDropped uint64
	for _, s := range dev.Sockets() {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.FramesTX != 0 {
			t.Errorf("A queue %d: %d frames never completed", s.Queue(), st.FramesTX)
		}
		sent += st.TXFrames
		backRX += st.RXFrames
		backDropped += st.RXDropped + st.RXRingFull
	}
	if back > backRX {
		t.Errorf("A took %d frames off its rings, its sockets count %d", back, backRX)
	}
	back = backRX
	linkA, linkB := linkStats(t, pair.A), linkStats(t, pair.B)
	lostAB := linkA.TXDropped - linkA0.TXDropped // veth-a could not hand to B
	lostBA := linkB.TXDropped - linkB0.TXDropped
	f := r.sum
	t.Logf("A sent %d; B received %d, dropped %d+%d, forwarded %d, pending %d; A got back %d, dropped %d; veth lost %d A→B, %d B→A",
		sent, f.Received, f.KernelDropped, f.RingFull, f.Forwarded, f.Pending, back, backDropped, lostAB, lostBA)
	if f.Forwarded < fwdGoal {
		t.Errorf("l2fwd forwarded %d frames, want at least %d", f.Forwarded, fwdGoal)
	}
	if got := f.Received + f.KernelDropped + f.RingFull + lostAB; got != sent {
		t.Errorf("B's end: A sent %d, but B received %d + dropped %d + ring full %d + veth lost %d = %d",
			sent, f.Received, f.KernelDropped, f.RingFull, lostAB, got)
	}
	if f.Pending != 0 || f.Forwarded != f.Received {
		t.Errorf("l2fwd received %d but forwarded %d, %d still pending", f.Received, f.Forwarded, f.Pending)
	}
	if got := back + backDropped + lostBA; got != f.Forwarded {
		t.Errorf("A's end: B forwarded %d, but A got back %d + dropped %d + veth lost %d = %d",
			f.Forwarded, back, backDropped, lostBA, got)
	}
}

// drainUntilQuiet receives and releases what dev's sockets get until
// none got a frame for quiet (at most 5 s), and returns how many.
func drainUntilQuiet(dev *xsk.Device, quiet time.Duration) uint64 {
	var n uint64
	deadline := time.Now().Add(5 * time.Second)
	last := time.Now()
	batches := map[*xsk.Socket]*xsk.Batch{}
	for time.Since(last) < quiet && time.Now().Before(deadline) {
		for _, s := range dev.Sockets() {
			b := batches[s]
			if b == nil {
				b = s.NewBatch(64)
				batches[s] = b
			}
			if k := s.Receive(b); k > 0 {
				n += uint64(k)
				s.Release(b)
				last = time.Now()
			}
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

// echoSender sends n copies of frame through s, with at most fwdWindow of
// them unanswered, receiving and releasing what comes back.
func echoSender(ctx context.Context, s *xsk.Socket, frame []byte, n int) error {
	tx, rx := s.NewBatch(64), s.NewBatch(64)
	sent, got := 0, 0
	forgiven := 0 // frames given up for lost after a stall
	lastProgress := time.Now()
	for sent < n {
		if ctx.Err() != nil {
			return fmt.Errorf("sent %d of %d, %d came back: %w", sent, n, got, ctx.Err())
		}
		s.Complete()
		if k := s.Receive(rx); k > 0 {
			got += k
			s.Release(rx)
			lastProgress = time.Now()
		}
		if out := sent - got - forgiven; out >= fwdWindow {
			if time.Since(lastProgress) > 20*time.Millisecond {
				forgiven += out // lost on the way: the counters have them
				lastProgress = time.Now()
			}
			if _, err := s.Wait(time.Millisecond, false); err != nil {
				return err
			}
			continue
		}
		k := s.Alloc(tx, min(64, n-sent, fwdWindow-(sent-got-forgiven)))
		for i := 0; i < k; i++ {
			tx.SetLen(i, copy(tx.Buffer(i), frame))
		}
		m, err := s.Transmit(tx)
		sent += m
		s.Free(tx) // what did not fit goes back
		if err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Second)
	for s.TXPending() > 0 {
		if time.Now().After(deadline) {
			return errors.New("TX frames did not complete")
		}
		if s.Complete() == 0 {
			s.Kick()
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// linkCounts are the counters of a veth interface.
type linkCounts struct{ TXDropped, RXDropped, RXPackets uint64 }

func linkStats(t *testing.T, h *netnstest.Host) linkCounts {
	t.Helper()
	a, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	return linkCounts{TXDropped: a.Statistics.TxDropped, RXDropped: a.Statistics.RxDropped, RXPackets: a.Statistics.RxPackets}
}
