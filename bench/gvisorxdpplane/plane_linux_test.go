//go:build linux && (amd64 || arm64)

package gvisorxdpplane

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// TestOtherQueueRedirectDropped is what the refusal of multi-queue
// interfaces rests on, asked of the kernel: an XDP program that redirects
// queue 1's frames into a socket bound to queue 0 (the socket in its
// XSKMAP under both keys, which the kernel allows) gets none of them into
// the socket. The kernel refuses each such redirect and veth drops the
// frame (its rx_queue_1_drops count them; rx_queue_1_xdp_redirect none),
// while queue 0's frames arrive; the two add up to all that was sent.
func TestOtherQueueRedirectDropped(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	const port, flows, per = 15650, 64, 4
	var dev *xsk.Device
	if err := pair.B.Do(func() (err error) {
		dev, err = xsk.Open(pair.B.Link, xsk.Config{Queues: []int{0}, Program: xsk.ProgramConfig{Expr: "udp dst port 15650"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	s := dev.Sockets()[0]
	if err := dev.Program().RegisterFD(1, s.FD()); err != nil {
		t.Fatalf("put queue 0's socket under key 1 too: %v", err)
	}
	ctx := context.Background()
	before, err := pair.B.EthtoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Many flows from A: its two TX queues are B's two RX queues (veth
	// hands a frame sent on TX queue q to the peer's RX queue q), and the
	// flows' hashes spread them over both.
	sendFlows(t, pair, port, flows, per)
	received := receiveAll(s)
	after, err := pair.B.EthtoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := func(k string) uint64 { return after[k] - before[k] }
	redirected0, dropped1, redirected1 := d("rx_queue_0_xdp_redirect"), d("rx_queue_1_drops"), d("rx_queue_1_xdp_redirect")
	t.Logf("the socket received %d; queue 0 redirected %d; queue 1 redirected %d, dropped %d", received, redirected0, redirected1, dropped1)
	if dropped1 == 0 || redirected1 != 0 || uint64(received) != redirected0 || uint64(received)+dropped1 != flows*per {
		t.Errorf("socket received %d, queue 0 redirected %d, queue 1 redirected %d and dropped %d of %d sent: want queue 1's all dropped, queue 0's all received",
			received, redirected0, redirected1, dropped1, flows*per)
	}
}

// TestPlaneRefusesMultiQueue: a Plane on an interface with two RX queues
// fails, before it opens anything, with an error that says why and how
// to give it one queue; Check says the same.
func TestPlaneRefusesMultiQueue(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	p := &Plane{Iface: pair.B.Link, Do: pair.B.Do}
	_, err := p.Listen(netip.AddrPortFrom(pair.B.IPv4, 15651), netip.AddrPortFrom(pair.A.IPv4, 40000))
	for _, err := range []error{err, p.Check()} {
		if !errors.Is(err, errs.ErrInvalidConfig) || !strings.Contains(err.Error(), "has 2 RX queues") || !strings.Contains(err.Error(), "xdpio channels set "+pair.B.Link+" --rx 1") {
			t.Errorf("2 RX queues: %v", err)
		}
	}
}

// TestPlaneReopens: a listener's stack, closed, frees its AF_XDP socket
// (the kernel lets the next bind queue 0, which it refuses while another
// socket holds it) and detaches its program, ten times in a row; a
// socket the test holds on queue 0 makes the next one fail, saying so.
func TestPlaneReopens(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	p := &Plane{Iface: pair.B.Link, Do: pair.B.Do}
	local, ctl := netip.AddrPortFrom(pair.B.IPv4, 15652), netip.AddrPortFrom(pair.A.IPv4, 40000)
	for i := range 10 {
		l, err := p.Listen(local, ctl)
		if err != nil {
			t.Fatalf("listener %d: %v", i, err)
		}
		if a, err := pair.B.Attrs(); err != nil || a.Xdp == nil || !a.Xdp.Attached {
			t.Fatalf("listener %d: no XDP program attached (%v)", i, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close listener %d: %v", i, err)
		}
		if a, err := pair.B.Attrs(); err != nil || (a.Xdp != nil && a.Xdp.Attached) {
			t.Fatalf("listener %d closed: an XDP program is still attached (%v)", i, err)
		}
	}
	var dev *xsk.Device
	if err := pair.B.Do(func() (err error) {
		dev, err = xsk.Open(pair.B.Link, xsk.Config{Queues: []int{0}, NoProgram: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Listen(local, ctl)
	dev.Close()
	if err == nil || !strings.Contains(err.Error(), "another AF_XDP socket is bound to it") {
		t.Errorf("with queue 0 taken: %v", err)
	}
	l, err := p.Listen(local, ctl)
	if err != nil {
		t.Fatalf("after the queue was freed: %v", err)
	}
	l.Close()
}

// sendFlows sends per datagrams on each of flows UDP flows from A to
// port of B (source ports 40000 on).
func sendFlows(t *testing.T, pair *netnstest.Pair, port, flows, per int) {
	t.Helper()
	if err := pair.A.Do(func() error {
		for i := range flows {
			c, err := net.DialUDP("udp4", &net.UDPAddr{IP: pair.A.IPv4.AsSlice(), Port: 40000 + i}, &net.UDPAddr{IP: pair.B.IPv4.AsSlice(), Port: port})
			if err != nil {
				return err
			}
			for range per {
				if _, err := c.Write([]byte("frame")); err != nil {
					c.Close()
					return err
				}
			}
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// receiveAll counts the frames s receives until none came for 200 ms.
func receiveAll(s *xsk.Socket) int {
	b := s.NewBatch(64)
	received := 0
	for last := time.Now(); time.Since(last) < 200*time.Millisecond; {
		if n := s.Receive(b); n > 0 {
			received += n
			s.Release(b)
			last = time.Now()
			continue
		}
		time.Sleep(time.Millisecond)
	}
	return received
}
