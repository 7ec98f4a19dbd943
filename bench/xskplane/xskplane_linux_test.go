package xskplane

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/internal/planetest"
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

	planetest.ReadAllThenClose(t, pc, qrs, pair.A, local)
	if _, err := qrs[0].ReadView(make([]plane.Message, 1), time.Millisecond); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadView after Close: %v, want net.ErrClosed", err)
	}
}
