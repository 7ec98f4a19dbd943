//go:build linux

package coalesce_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// twoQueues opens AF_XDP sockets on both queues of B, for UDP to itPort.
func twoQueues(t *testing.T) (*netnstest.Pair, []*xsk.Socket) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
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
	if len(d.Sockets()) != 2 {
		t.Fatalf("%d sockets, want 2", len(d.Sockets()))
	}
	return pair, d.Sockets()
}

// sendFlows sends n stamped datagrams from A to B:itPort, round robin
// over flows source ports (veth spreads flows over its queues by hash).
func sendFlows(t *testing.T, pair *netnstest.Pair, flows, n int) {
	t.Helper()
	if err := sendFlowsErr(pair, flows, n); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func sendFlowsErr(pair *netnstest.Pair, flows, n int) error {
	return pair.A.Do(func() error {
		var cs []*net.UDPConn
		defer func() {
			for _, c := range cs {
				c.Close()
			}
		}()
		for i := 0; i < flows; i++ {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 43000 + i}, &net.UDPAddr{IP: pair.B.IPv4.AsSlice(), Port: itPort})
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		p := make([]byte, 32)
		for i := 0; i < n; i++ {
			stamp(p, uint64(i), mono())
			if _, err := cs[i%flows].Write(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// One goroutine receives both queues: every datagram arrives exactly once,
// both queues deliver, a burst comes in few batches that mix the queues,
// and an unreleased batch blocks the next.
func TestGroupReceiver(t *testing.T) {
	pair, socks := twoQueues(t)
	const window = 20 * time.Millisecond
	g, err := coalesce.NewGroupReceiver(socks, coalesce.Params{RXUsecs: int(window / time.Microsecond)}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Sockets(); len(got) != 2 || got[0] != socks[0] || got[1] != socks[1] {
		t.Fatalf("Sockets() = %v, want the sockets in the order given", got)
	}
	// Send while Next already waits, so that the batch is opened by the
	// first frame and closed by rx-usecs or rx-frames.
	const n = 400
	sent := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		sent <- sendFlowsErr(pair, 32, n)
	}()
	defer func() {
		if err := <-sent; err != nil {
			t.Errorf("send: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seen := make(map[uint64]bool)
	perQueue := map[int]int{}
	batches, mixed := 0, 0
	for len(seen) < n {
		bs, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(seen), err)
		}
		if len(bs) != 2 {
			t.Fatalf("Next returned %d batches, want one per socket", len(bs))
		}
		batches++
		queues := 0
		for k, b := range bs {
			if b.Len() > 0 {
				queues++
			}
			for i := 0; i < b.Len(); i++ {
				p, ok := udpPayload(b.Frame(i), itPort)
				if !ok {
					continue
				}
				seq, _, ok := unstamp(p)
				if !ok {
					continue
				}
				if seen[seq] {
					t.Fatalf("datagram %d received twice", seq)
				}
				seen[seq] = true
				perQueue[socks[k].Queue()]++
			}
		}
		if queues == 0 {
			t.Fatal("Next returned no frame at all")
		}
		if queues == 2 {
			mixed++
		}
		if _, err := g.Next(ctx); !errors.Is(err, coalesce.ErrBatchHeld) {
			t.Fatalf("Next with the batch unreleased: %v, want ErrBatchHeld", err)
		}
		g.Release()
	}
	st := g.Stats()
	t.Logf("%d batches (%d with both queues), per queue %v, stats %+v", batches, mixed, perQueue, st)
	if len(perQueue) != 2 {
		t.Errorf("only queues %v delivered: want both", perQueue)
	}
	if st.Frames != n {
		t.Errorf("stats count %d frames, want %d", st.Frames, n)
	}
	// Allow for a sender descheduled mid-burst on a busy machine.
	if batches > 10 || mixed == 0 {
		t.Errorf("%d datagrams over two queues came in %d batches, %d holding both queues: want them coalesced across queues", n, batches, mixed)
	}
}

// Closing any one of the sockets ends a Next that sleeps with a batch open.
func TestGroupReceiverClose(t *testing.T) {
	pair, socks := twoQueues(t)
	g, err := coalesce.NewGroupReceiver(socks, coalesce.Params{RXUsecs: coalesce.MaxUsecs, RXFrames: 1 << 20}, coalesce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		bs, err := g.Next(context.Background())
		if bs != nil {
			err = errors.New("Next returned a batch after Close")
		}
		done <- err
	}()
	sendFlows(t, pair, 8, 8)
	time.Sleep(100 * time.Millisecond) // the batch is open, Next sleeps
	start := time.Now()
	socks[1].Close()
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("Next after Close = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatalf("Next still sleeping %v after one socket was closed", time.Since(start))
	}
}

func TestGroupReceiverInvalid(t *testing.T) {
	_, socks := twoQueues(t)
	for _, tc := range []struct {
		name  string
		socks []*xsk.Socket
		p     coalesce.Params
	}{
		{"no sockets", nil, coalesce.Params{}},
		{"nil socket", []*xsk.Socket{socks[0], nil}, coalesce.Params{}},
		{"socket twice", []*xsk.Socket{socks[0], socks[1], socks[0]}, coalesce.Params{}},
		{"negative rx-usecs", socks, coalesce.Params{RXUsecs: -1}},
	} {
		if _, err := coalesce.NewGroupReceiver(tc.socks, tc.p, coalesce.Options{}); !errors.Is(err, coalesce.ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", tc.name, err)
		}
	}
}
