//go:build linux

package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

const itPort = 9200

// oneQueue opens an AF_XDP socket on B's only queue, for UDP to itPort.
func oneQueue(t *testing.T) (*netnstest.Pair, *xsk.Socket) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var d *xsk.Device
	err := pair.B.Do(func() error {
		var err error
		d, err = xsk.Open(pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(itPort)}}})
		return err
	})
	if err != nil {
		t.Fatalf("open %s: %v", pair.B.Link, err)
	}
	t.Cleanup(func() { d.Close() })
	return pair, d.Sockets()[0]
}

// burst sends n datagrams from A's kernel stack to B:itPort as fast as it can.
func burst(t *testing.T, pair *netnstest.Pair, n int) {
	t.Helper()
	err := pair.A.Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: pair.B.IPv4.AsSlice(), Port: itPort})
		if err != nil {
			return err
		}
		defer c.Close()
		p := make([]byte, 32)
		for i := 0; i < n; i++ {
			stamp(p, uint64(i), mono())
			if _, err := c.Write(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
}

// count returns how many frames of b carry a benchmark payload to itPort.
func count(b *xsk.Batch) int {
	n := 0
	for i := 0; i < b.Len(); i++ {
		if p, ok := udpPayload(b.Frame(i), itPort); ok {
			if _, _, ok := unstamp(p); ok {
				n++
			}
		}
	}
	return n
}

// A burst is handed over as one batch when rx-usecs expires, not frame by
// frame; the kernel's packets are all there, and the first frame waited
// about rx-usecs, not much longer.
func TestReceiverTimer(t *testing.T) {
	pair, s := oneQueue(t)
	const window = 30 * time.Millisecond
	r, err := coalesce.NewReceiver(s, coalesce.Params{RXUsecs: int(window / time.Microsecond)}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	burst(t, pair, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, batches := 0, 0
	for got < 10 {
		b, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v", got, err)
		}
		got += count(b)
		batches++
		if _, err := r.Next(ctx); !errors.Is(err, coalesce.ErrBatchHeld) {
			t.Fatalf("Next with the batch unreleased: %v, want ErrBatchHeld", err)
		}
		r.Release()
	}
	st := r.Stats()
	t.Logf("%d batches, stats %+v", batches, st)
	// Allow for a sender descheduled mid-burst on a busy machine.
	if batches > 5 || st.TimerExpiries == 0 {
		t.Errorf("10 back-to-back datagrams came in %d batches (%d by timer): want them coalesced", batches, st.TimerExpiries)
	}
	if min := time.Duration(st.Delay.Max); min < window {
		t.Errorf("longest wait %v: a batch closed by the timer must have waited rx-usecs %v", min, window)
	}
	if st.Delay.Max > uint64(window+250*time.Millisecond) {
		t.Errorf("longest wait %v, rx-usecs %v: held far too long", time.Duration(st.Delay.Max), window)
	}
}

// rx-frames closes a batch long before rx-usecs.
func TestReceiverFrameLimit(t *testing.T) {
	pair, s := oneQueue(t)
	r, err := coalesce.NewReceiver(s, coalesce.Params{RXUsecs: coalesce.MaxUsecs, RXFrames: 4}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	burst(t, pair, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	got := 0
	for got < 8 {
		b, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v", got, err)
		}
		got += count(b)
		r.Release()
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("8 frames with rx-frames 4 took %v: the frame limit did not close the batches (rx-usecs is 1s)", el)
	}
	if st := r.Stats(); st.FrameLimit == 0 {
		t.Errorf("stats %+v: want batches closed by rx-frames", st)
	}
}

// An idle receiver sleeps in the kernel: a deadline ends Next, and so does
// closing the socket, at once.
func TestReceiverIdle(t *testing.T) {
	_, s := oneQueue(t)
	r, err := coalesce.NewReceiver(s, coalesce.Params{RXUsecs: 50}, coalesce.Options{IdleWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle Next with a deadline: %v", err)
	}
	if el := time.Since(start); el < 90*time.Millisecond || el > 2*time.Second {
		t.Errorf("deadline of 100ms ended Next after %v", el)
	}
	if st := r.Stats(); st.Polls == 0 || st.Polls > 3 {
		t.Errorf("%d kernel waits for 100ms idle: want one (no spinning)", st.Polls)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Next(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Errorf("Next after Close: %v, want xsk.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Next")
	}
}

func TestInvalidParams(t *testing.T) {
	if _, err := coalesce.NewReceiver(nil, coalesce.Params{}, coalesce.Options{}); !errors.Is(err, coalesce.ErrInvalidParams) {
		t.Errorf("nil socket: %v", err)
	}
	_, s := oneQueue(t)
	if _, err := coalesce.NewReceiver(s, coalesce.Params{RXUsecs: -5}, coalesce.Options{}); !errors.Is(err, coalesce.ErrInvalidParams) {
		t.Errorf("rx-usecs -5: %v", err)
	}
	if _, err := coalesce.NewTransmitter(s, coalesce.TXParams{TXFrames: -1}, coalesce.Options{}); !errors.Is(err, coalesce.ErrInvalidParams) {
		t.Errorf("tx-frames -1: %v", err)
	}
}

// tx-frames holds frames back until the batch is complete, then one kick
// sends them all; Flush sends the rest. The XDP counter on A is the oracle.
func TestTransmitterBatches(t *testing.T) {
	pair, s := oneQueue(t)
	var ctr *trafficgen.Counter
	if err := pair.A.Do(func() (err error) {
		ctr, err = trafficgen.AttachCounter(pair.A.Ifindex, trafficgen.Drop)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ctr.Close()
	frame, err := trafficgen.BuildFrame(trafficgen.FrameSpec{SrcMAC: pair.B.MAC, DstMAC: pair.A.MAC, Src: pair.B.IPv4, Dst: pair.A.IPv4, SrcPort: 1000, DstPort: 2000, Size: 60})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := coalesce.NewTransmitter(s, coalesce.TXParams{TXUsecs: coalesce.MaxUsecs, TXFrames: 8}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st0, _ := s.Stats()
	b := s.NewBatch(1)
	submit := func() {
		if tx.Alloc(b, 1) != 1 {
			t.Fatal("no free frame")
		}
		copy(b.Buffer(0), frame)
		b.SetLen(0, len(frame))
		if n, err := tx.Submit(b); n != 1 || err != nil || b.Len() != 0 {
			t.Fatalf("Submit = %d, %v (batch keeps %d)", n, err, b.Len())
		}
	}
	c0, err := ctr.Count()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7; i++ {
		submit()
	}
	// The 7 frames wait on the TX ring, unkicked: in copy mode the kernel
	// does not look at the ring until it is kicked, so none reaches A (but
	// for the odd frame B's kernel sends itself).
	time.Sleep(20 * time.Millisecond)
	st1, _ := s.Stats()
	if c1, _ := ctr.Count(); tx.Pending() != 7 || st1.Kicks != st0.Kicks || c1-c0 > 2 {
		t.Fatalf("after 7 submits: %d pending, %d kicks, %d frames reached A: want all 7 held", tx.Pending(), st1.Kicks-st0.Kicks, c1-c0)
	}
	submit()
	st2, _ := s.Stats()
	if tx.Pending() != 0 || st2.TXSubmitted-st0.TXSubmitted != 8 {
		t.Fatalf("after the 8th: %d pending, %d on the ring", tx.Pending(), st2.TXSubmitted-st0.TXSubmitted)
	}
	if k := st2.Kicks - st0.Kicks; k < 1 || k > 2 {
		t.Errorf("%d kicks for one batch of 8", k)
	}
	for i := 0; i < 3; i++ {
		submit()
	}
	if err := tx.Flush(); err != nil {
		t.Fatal(err)
	}
	var got uint64
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.Complete()
		if got, _ = ctr.Count(); got >= 11 {
			break
		}
	}
	// The counter sees every frame on A's end, including the odd one B's
	// kernel sends itself (IPv6 neighbour discovery, MLD).
	if got < 11 || got > 11+4 {
		t.Fatalf("A counted %d frames, want 11", got)
	}
	if st := tx.Stats(); st.Frames != 11 || st.FrameLimit != 1 || st.Explicit != 1 {
		t.Errorf("stats %+v: want 11 frames, one flush by tx-frames, one by Flush", st)
	}
}

// Close from another goroutine ends a Next that sleeps for more frames of
// an open batch (rx-usecs far in the future) at once, with ErrClosed and no
// batch.
func TestReceiverCloseDuringOpenBatch(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var d *xsk.Device
	cfg := xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}}
	if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, cfg); return }); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := coalesce.NewReceiver(d.Sockets()[0], coalesce.Params{RXUsecs: coalesce.MaxUsecs, RXFrames: 64}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		b, err := r.Next(context.Background())
		if b != nil {
			err = fmt.Errorf("Next returned a batch of %d frames after Close", b.Len())
		}
		done <- err
	}()
	if err := pair.A.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, 9000)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("opens a batch"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the batch is open, Next sleeps
	start := time.Now()
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("Next after Close = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatalf("Next still sleeping %v after Close (rx-usecs %v)", time.Since(start), time.Duration(coalesce.MaxUsecs)*time.Microsecond)
	}
}

// A Submit of more frames than the TX ring holds fills the ring, flushes
// (the kernel sends them), reclaims and puts the rest on the ring: every
// frame reaches A, counted by XDP there, and the full ring is counted.
func TestTransmitterRingFull(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var d *xsk.Device
	cfg := xsk.Config{Socket: xsk.SocketConfig{TXRingSize: 64, CompletionRingSize: 64, TXBudget: 64}}
	if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, cfg); return }); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := d.Sockets()[0]
	var ctr *trafficgen.Counter
	if err := pair.A.Do(func() (err error) {
		ctr, err = trafficgen.AttachCounter(pair.A.Ifindex, trafficgen.Drop)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ctr.Close()
	frame, err := trafficgen.BuildFrame(trafficgen.FrameSpec{SrcMAC: pair.B.MAC, DstMAC: pair.A.MAC, Src: pair.B.IPv4, Dst: pair.A.IPv4, SrcPort: 1000, DstPort: 2000, Size: 60})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := coalesce.NewTransmitter(s, coalesce.TXParams{TXUsecs: coalesce.MaxUsecs}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	b := s.NewBatch(n)
	if got := tx.Alloc(b, n); got != n {
		t.Fatalf("allocated %d frames, want %d", got, n)
	}
	for i := 0; i < n; i++ {
		copy(b.Buffer(i), frame)
		b.SetLen(i, len(frame))
	}
	taken, err := tx.Submit(b)
	if err != nil || taken != n || b.Len() != 0 {
		t.Fatalf("Submit of %d frames on a 64-slot ring = %d, %v (batch keeps %d)", n, taken, err, b.Len())
	}
	if err := tx.Flush(); err != nil {
		t.Fatal(err)
	}
	var got uint64
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.Complete()
		if got, _ = ctr.Count(); got >= n {
			break
		}
	}
	if got < n || got > n+4 {
		t.Fatalf("A counted %d frames, want %d", got, n)
	}
	if st := tx.Stats(); st.RingFull == 0 || st.Frames != n {
		t.Errorf("stats %+v: want %d frames and the full ring counted", st, n)
	}
}
