package bench

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// TestXSKServerBackToBack: clients that start as soon as the previous
// one's test is over are all served, none turned away as "busy": the
// server is free for the next test before its AF_XDP endpoint has closed
// (which takes tens of milliseconds), and the next test's endpoint waits
// for that. Oracles: each client's report (everything sent received), and
// each test's queue counts (OnClose, before its report), which hold its
// datagrams and its setup datagram.
func TestXSKServerBackToBack(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var qc queueCounts
	reports := startServerWith(t, pair, 5201, &xskplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do, OnClose: qc.record})
	const tests = 3
	var received []int64
	for i := 0; i < tests; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
			Dial: nsDial(pair.A), Duration: time.Second, Bitrate: 10e6, Length: 1000, Interval: -1}
		start := time.Now()
		rep, err := c.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("client %d, started as soon as the previous one returned: %v", i+1, err)
		}
		s, r := rep.End.SumSent, rep.End.SumReceived
		t.Logf("client %d: %v, sent %d, received %d", i+1, time.Since(start).Round(time.Millisecond), s.Packets, r.Packets)
		if s.Packets == 0 || r.Packets != s.Packets || r.LostPackets != 0 {
			t.Errorf("client %d: sent %+v received %+v", i+1, s, r)
		}
		received = append(received, r.Packets)
	}
	for i := 0; i < tests; i++ {
		select {
		case r := <-reports:
			if r.err != nil {
				t.Errorf("server, test %d: %v", i+1, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("server reported %d of %d tests", i, tests)
		}
	}
	got := qc.take()
	if len(got) != tests {
		t.Fatalf("OnClose calls %v: want one per test", got)
	}
	for i, qs := range got {
		var sum uint64
		for _, q := range qs {
			sum += q.Packets
		}
		if sum != uint64(received[i])+1 {
			t.Errorf("test %d: queues %+v took %d frames, want the %d datagrams received + 1 setup", i+1, qs, sum, received[i])
		}
	}
}

// TestXSKServerDeviceDeleted: the server's device is deleted mid-test.
// The server ends the test at once, not when its control connection
// times out, and reports the cause: the data plane's reads failed with
// xsk.ErrNoDevice. Then it serves on.
func TestXSKServerDeviceDeleted(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	reports := startServerWith(t, pair, 5201, &xskplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
		Dial: nsDial(pair.A), Duration: 10 * time.Second, Bitrate: 10e6, Length: 1000, Interval: -1}
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx)
		done <- err
	}()
	time.Sleep(time.Second)
	del := time.Now()
	if err := pair.B.Do(func() error {
		l, err := netlink.LinkByName(pair.B.Link)
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reports:
		took := time.Since(del)
		t.Logf("server reported %v after the deletion: %v", took.Round(time.Millisecond), r.err)
		if !errors.Is(r.err, xsk.ErrNoDevice) || !strings.Contains(r.err.Error(), "data plane") {
			t.Errorf("server: %v, want a data plane error matching xsk.ErrNoDevice", r.err)
		}
		if took > 2*time.Second {
			t.Errorf("the test ended %v after the device went away", took)
		}
		if r.rep == nil || r.rep.Error == "" {
			t.Errorf("report %+v: want the error in it", r.rep)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("no server report 8 s after the device was deleted")
	}
	// The control connection went with the veth: only cancelling ends
	// the client.
	cancel()
	<-done
}

// slowClosePlane is a data plane whose endpoints take delay to close, as
// AF_XDP ones take tens of milliseconds, and which logs when they open
// and when they are closed.
type slowClosePlane struct {
	plane.DataPlane
	delay  time.Duration
	mu     sync.Mutex
	events []string
}

func (p *slowClosePlane) log(ev string) {
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
}

func (p *slowClosePlane) Listen(local netip.AddrPort) (plane.PacketConn, error) {
	p.log("listen")
	pc, err := p.DataPlane.Listen(local)
	if err != nil {
		return nil, err
	}
	return &slowCloseConn{PacketConn: pc, p: p}, nil
}

type slowCloseConn struct {
	plane.PacketConn
	p    *slowClosePlane
	once sync.Once
	err  error
}

func (c *slowCloseConn) Close() error {
	c.once.Do(func() {
		time.Sleep(c.p.delay)
		c.err = c.PacketConn.Close()
		c.p.log("closed")
	})
	return c.err
}

// firstReadConn records when its first byte arrived.
type firstReadConn struct {
	net.Conn
	once sync.Once
	at   time.Time
}

func (c *firstReadConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(func() { c.at = time.Now() })
	}
	return n, err
}

// TestServerFreeBeforeEndpointCloses: once a test is over the server is
// free, while its data plane endpoint is still closing: the next client
// gets PARAM_EXCHANGE at once, not after the close, and its test's
// endpoint opens only once the previous one is closed.
func TestServerFreeBeforeEndpointCloses(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	const delay = 500 * time.Millisecond
	dp := &slowClosePlane{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}, delay: delay}
	reports := startServerWith(t, pair, 5201, dp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ctl *firstReadConn
	for i, name := range []string{"first", "second"} {
		c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
			Duration: time.Second, Bitrate: 1e6, Length: 1000, Interval: -1,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := nsDial(pair.A)(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				ctl = &firstReadConn{Conn: conn}
				return ctl, nil
			}}
		start := time.Now()
		if _, err := c.Run(ctx); err != nil {
			t.Fatalf("%s client: %v", name, err)
		}
		if i == 1 {
			took := ctl.at.Sub(start)
			t.Logf("PARAM_EXCHANGE %v after the first client returned (its endpoint takes %v to close)", took.Round(time.Millisecond), delay)
			if took > delay/2 {
				t.Errorf("the second client waited %v for PARAM_EXCHANGE: the server was held by the closing endpoint", took)
			}
		}
	}
	for i := 0; i < 2; i++ {
		select {
		case r := <-reports:
			if r.err != nil {
				t.Errorf("server: %v", r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 2 reports", i)
		}
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if got := strings.Join(dp.events, " "); got != "listen closed listen closed" {
		t.Errorf("endpoints: %s; want the second opened after the first closed", got)
	}
}
