package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// accountRE is l2fwd's account line.
var accountRE = regexp.MustCompile(`(?m)^account: (\d+) frames reached the sockets = (\d+) forwarded \+ (\d+) not completed \+ (\d+) not sent \+ (\d+) rx_dropped \+ (\d+) rx_ring_full$`)

// l2fwd's account, printed when it stops, holds for every frame A sends
// as fast as it can (faster than l2fwd forwards, so that the kernel drops
// some): checked against counters l2fwd does not keep. The frames A's
// socket completed either reached l2fwd's sockets or were lost by A's veth
// (its tx_dropped) or, once l2fwd stopped, went to B's kernel, which
// counts them as UDP to a port nobody listens on. What l2fwd says the
// kernel dropped is what B's interface counts as RX drops, and what it
// forwarded came back to A's interface, less what B's veth lost. Once
// with every frame forwarded or dropped before l2fwd stops, once with
// l2fwd stopped while A sends (the frames in its hands and on its RX
// rings then are "not sent").
func TestAccountAddsUp(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stopMidway bool
		perQueue   int
	}{
		{"sender done first", false, 200_000},
		{"stopped while frames come", true, 400_000},
	} {
		t.Run(tc.name, func(t *testing.T) { testAccount(t, tc.stopMidway, tc.perQueue) })
	}
}

func testAccount(t *testing.T, stopMidway bool, perQueue int) {
	const queues = 2
	pair := netnstest.New(t, netnstest.Config{Queues: queues})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fwdCtx, fwdStop := context.WithCancel(ctx)
	defer fwdStop()
	started := make(chan struct{})
	var out bytes.Buffer
	type result struct {
		sum summary
		err error
	}
	fwdDone := make(chan result, 1)
	go func() {
		var r result
		r.err = pair.B.Do(func() (err error) {
			cfg := xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(fwdPort)}}}
			r.sum, err = l2fwdStarted(fwdCtx, &out, pair.B.Link, cfg, 64, 0, func() { close(started) })
			return err
		})
		fwdDone <- r
	}()
	<-started

	var dev *xsk.Device
	if err := pair.A.Do(func() (err error) {
		dev, err = xsk.Open(pair.A.Link, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	a0, b0 := linkStats(t, pair.A), linkStats(t, pair.B)
	noPorts0 := netnstest.Counter(t, pair.B, "UdpNoPorts")

	var sentSoFar atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, queues)
	for i, s := range dev.Sockets() {
		frame, err := trafficgen.BuildFrame(trafficgen.FrameSpec{
			SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC, Src: pair.A.IPv4, Dst: pair.B.IPv4,
			SrcPort: uint16(40000 + i), DstPort: fwdPort, Size: 64,
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			progress := func(n int) {
				if stopMidway && sentSoFar.Add(int64(n)) >= int64(queues*perQueue/2) {
					once.Do(fwdStop) // l2fwd stops while frames still come
				}
			}
			if err := blast(ctx, s, frame, perQueue, progress); err != nil {
				errs <- fmt.Errorf("A queue %d: %w", s.Queue(), err)
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var sent uint64
	for _, s := range dev.Sockets() {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		sent += st.TXFrames
	}
	if !stopMidway {
		// l2fwd stops at once, leaving what is on its RX rings: let it
		// forward every frame that reached it first (each comes back to
		// A or was dropped on B's link).
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			a, b := linkStats(t, pair.A), linkStats(t, pair.B)
			if a.RXPackets-a0.RXPackets+b.RXDropped-b0.RXDropped >= sent {
				break
			}
		}
	}
	fwdStop()
	r := <-fwdDone
	if r.err != nil {
		t.Fatalf("l2fwd: %v\n%s", r.err, out.String())
	}
	// A's socket completes a frame when veth hands it on, before B's
	// kernel has taken it from its backlog: wait (bounded) for B's
	// kernel to count the last ones. A frame the account missed would
	// never come.
	lostAB := linkStats(t, pair.A).TXDropped - a0.TXDropped
	noPorts := uint64(netnstest.Counter(t, pair.B, "UdpNoPorts") - noPorts0)
	for deadline := time.Now().Add(2 * time.Second); r.sum.Reached()+lostAB+noPorts < sent && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		noPorts = uint64(netnstest.Counter(t, pair.B, "UdpNoPorts") - noPorts0)
	}
	a1, b1 := linkStats(t, pair.A), linkStats(t, pair.B)
	lostBA := b1.TXDropped - b0.TXDropped
	t.Logf("A sent %d; veth lost %d A→B, %d B→A; B's kernel got %d to no port; B's link dropped %d; A's link got back %d\nl2fwd printed:\n%s",
		sent, lostAB, lostBA, noPorts, b1.RXDropped-b0.RXDropped, a1.RXPackets-a0.RXPackets, out.String())

	m := accountRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("l2fwd printed no account line")
	}
	n := make([]uint64, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.ParseUint(m[i], 10, 64)
	}
	reached, forwarded, pending, notSent, dropped, ringFull := n[1], n[2], n[3], n[4], n[5], n[6]
	f := r.sum
	if got := [6]uint64{reached, forwarded, pending, notSent, dropped, ringFull}; got != [6]uint64{f.Reached(), f.Forwarded, f.Pending, f.NotSent, f.KernelDropped, f.RingFull} {
		t.Errorf("the account line says %v, the summary %+v", got, f)
	}
	if sum := forwarded + pending + notSent + dropped + ringFull; sum != reached {
		t.Errorf("the account does not add up: %d forwarded + %d not completed + %d not sent + %d rx_dropped + %d rx_ring_full = %d, not the %d that reached the sockets",
			forwarded, pending, notSent, dropped, ringFull, sum, reached)
	}
	// Where A's frames went, by counters l2fwd does not read.
	if got := reached + lostAB + noPorts; got != sent {
		t.Errorf("A sent %d frames, but %d reached l2fwd's sockets + %d lost by A's veth + %d went to B's kernel = %d",
			sent, reached, lostAB, noPorts, got)
	}
	if got := b1.RXDropped - b0.RXDropped; got != dropped+ringFull {
		t.Errorf("B's interface counted %d RX drops, l2fwd's account %d rx_dropped + %d rx_ring_full", got, dropped, ringFull)
	}
	// A's kernel also gets what B's kernel sends of its own (IPv6
	// neighbour discovery, ICMP port unreachable once l2fwd stopped).
	back := a1.RXPackets - a0.RXPackets
	if back+lostBA < forwarded || back+lostBA > forwarded+noPorts+20 {
		t.Errorf("l2fwd forwarded %d frames, A's interface got %d back (and B's veth lost %d)", forwarded, back, lostBA)
	}
	if forwarded == 0 {
		t.Error("l2fwd forwarded nothing")
	}
	if stopMidway && notSent+noPorts == 0 {
		t.Error("l2fwd stopped while A was sending, yet no frame was left in its hands nor went to B's kernel")
	}
	if !stopMidway && (notSent != 0 || pending != 0 || noPorts != 0) {
		t.Errorf("l2fwd stopped after it had forwarded what came, yet %d frames were not sent, %d not completed, %d went to B's kernel", notSent, pending, noPorts)
	}
}

// blast sends n copies of frame through s as fast as the TX ring takes
// them, calling progress with the count of each Transmit, then waits for
// the kernel to complete them all.
func blast(ctx context.Context, s *xsk.Socket, frame []byte, n int, progress func(int)) error {
	b := s.NewBatch(64)
	defer s.Free(b)
	for sent := 0; sent < n; {
		if ctx.Err() != nil {
			return fmt.Errorf("sent %d of %d: %w", sent, n, ctx.Err())
		}
		from := b.Len()
		k := s.Alloc(b, max(0, min(64, n-sent)-from))
		for i := from; i < from+k; i++ {
			b.SetLen(i, copy(b.Buffer(i), frame))
		}
		m, err := s.Transmit(b) // what does not fit stays in b
		sent += m
		progress(m)
		if err != nil {
			return err
		}
		if m == 0 {
			s.Complete()
		}
	}
	deadline := time.Now().Add(2 * time.Second)
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
