package xskplane

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestXSKQueueReaders: datagrams from kernel UDP sockets in the peer
// namespace, sent from several source ports so they spread over the
// queues, are all read in place by the per-queue readers (one per queue,
// and one of the kernel socket xdpnet holds on the address) with their
// payload and source intact; a Close while readers run wakes them with
// net.ErrClosed.
func TestXSKQueueReaders(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	local := netip.AddrPortFrom(pair.B.IPv4, 5301)
	dp := &DataPlane{Iface: pair.B.Link, Do: pair.B.Do}
	pc, err := dp.Listen(local)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	mq, ok := pc.(plane.MultiQueueConn)
	if !ok {
		t.Fatal("the AF_XDP conn does not offer per-queue readers")
	}
	qrs := mq.QueueReaders()
	if len(qrs) != 3 || qrs[0].Queue() != 0 || qrs[1].Queue() != 1 || qrs[2].Queue() != plane.KernelSocketQueue {
		var ids []int
		for _, q := range qrs {
			ids = append(ids, q.Queue())
		}
		t.Fatalf("queue readers of queues %v, want 0, 1 and the kernel socket's (%d)", ids, plane.KernelSocketQueue)
	}

	const perFlow, flows = 300, 8
	var (
		mu   sync.Mutex
		got  = map[netip.AddrPort]int{}
		bad  atomic.Int64
		errs = make(chan error, len(qrs))
		wg   sync.WaitGroup
	)
	for _, q := range qrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer q.Done()
			msgs := make([]plane.Message, 16)
			for {
				n, err := q.ReadView(msgs, 2*time.Second)
				for _, m := range msgs[:n] {
					if m.N != 100 || m.Buf[0] != byte(m.Addr.Port()) || m.Buf[99] != 0xab {
						bad.Add(1)
					}
					mu.Lock()
					got[m.Addr]++
					mu.Unlock()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	var sent []netip.AddrPort
	err = pair.A.Do(func() error {
		for f := 0; f < flows; f++ {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(local))
			if err != nil {
				return err
			}
			src := c.LocalAddr().(*net.UDPAddr).AddrPort()
			sent = append(sent, netip.AddrPortFrom(src.Addr().Unmap(), src.Port()))
			buf := make([]byte, 100)
			buf[0], buf[99] = byte(src.Port()), 0xab
			for i := 0; i < perFlow; i++ {
				if _, err := c.Write(buf); err != nil {
					c.Close()
					return err
				}
				if i%50 == 49 {
					time.Sleep(time.Millisecond) // stay well below the receivers' rate
				}
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		total := 0
		for _, n := range got {
			total += n
		}
		mu.Unlock()
		if total >= perFlow*flows || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("reader after Close: %v, want net.ErrClosed", err)
		}
	}
	for _, src := range sent {
		if got[src] != perFlow {
			t.Errorf("flow from %v: %d datagrams read, %d sent", src, got[src], perFlow)
		}
	}
	if n := bad.Load(); n > 0 {
		t.Errorf("%d datagrams with a wrong length or payload", n)
	}
	if len(got) != flows {
		t.Errorf("datagrams from %d sources, want %d: %v", len(got), flows, got)
	}
	if _, err := qrs[0].ReadView(make([]plane.Message, 1), time.Millisecond); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadView after Close: %v, want net.ErrClosed", err)
	}
}
