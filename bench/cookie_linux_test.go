package bench

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// A connection that never sends its cookie does not hold the server: a
// real client that comes after it is served at once (well within the
// cookie timeout plus a margin), and the silent connection is closed when
// its cookie timeout expires, without a report. Oracles: the client's
// report and error, the server's reports, and the silent connection's
// read ending in EOF.
func TestServerIdleConnection(t *testing.T) {
	const cookieTimeout = time.Second
	const margin = 1500 * time.Millisecond
	pair := netnstest.New(t, netnstest.Config{})
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, 5201).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	reports := make(chan reportErr, 8)
	srv := &Server{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}, CookieTimeout: cookieTimeout,
		OnReport: func(r *Report, err error) { reports <- reportErr{r, err} }}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		scancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := netip.AddrPortFrom(pair.B.IPv4, 5201)
	// idle opens a control connection that sends nothing, and returns a
	// channel that gets how long after the dial the server closed it.
	idle := func() <-chan time.Duration {
		t.Helper()
		start := time.Now()
		c, err := nsDial(pair.A)(ctx, "tcp", server.String())
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan time.Duration, 1)
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(cookieTimeout + margin))
			var b [1]byte
			n, err := c.Read(b[:])
			if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("silent connection: read %d bytes %x, %v; want the server to close it", n, b[:n], err)
			}
			closed <- time.Since(start)
		}()
		return closed
	}
	checkClosed := func(closed <-chan time.Duration) {
		t.Helper()
		if d := <-closed; d < cookieTimeout-100*time.Millisecond || d > cookieTimeout+margin {
			t.Errorf("silent connection closed %v after it connected, want about the cookie timeout %v", d, cookieTimeout)
		}
	}

	t.Run("xdpio client", func(t *testing.T) {
		closed := idle()
		time.Sleep(100 * time.Millisecond) // the server is waiting on it
		start := time.Now()
		c := &Client{UDP: true, Server: server, DataPlane: &kernelplane.DataPlane{Do: pair.A.Do}, Dial: nsDial(pair.A),
			Duration: time.Second, Bitrate: 1e6, Interval: -1}
		rep, err := c.Run(ctx)
		if err != nil {
			t.Fatalf("client after a silent connection: %v", err)
		}
		if d := time.Since(start) - c.Duration; d > cookieTimeout+margin {
			t.Errorf("the client's 1 s test took %v more, want at most the cookie timeout %v + %v", d, cookieTimeout, margin)
		}
		if rep.End.SumReceived.Packets == 0 {
			t.Errorf("the server received nothing: %+v", rep.End.SumReceived)
		}
		checkClosed(closed)
		// One report, the client's: none for the silent connection.
		select {
		case r := <-reports:
			if r.err != nil || r.rep.Start.Cookie != rep.Start.Cookie {
				t.Errorf("server report for cookie %q, %v; want the client's %q", r.rep.Start.Cookie, r.err, rep.Start.Cookie)
			}
		case <-ctx.Done():
			t.Fatal("no server report")
		}
		select {
		case r := <-reports:
			t.Errorf("a second report, %v: the silent connection is no test", r.err)
		case <-time.After(200 * time.Millisecond):
		}
	})

	t.Run("iperf3 client", func(t *testing.T) {
		netnstest.RequireTool(t, "iperf3")
		closed := []<-chan time.Duration{idle(), idle(), idle()}
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		out, err := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-u", "-b", "1M", "-t", "1", "-J").Output()
		if err != nil {
			t.Fatalf("iperf3 after three silent connections: %v\n%s", err, out)
		}
		if j := parseIperf(t, out); j.Error != "" || j.End.SumSent.Packets == 0 {
			t.Fatalf("iperf3: error %q, sent %+v", j.Error, j.End.SumSent)
		}
		if d := time.Since(start) - time.Second; d > cookieTimeout+margin {
			t.Errorf("iperf3's 1 s test took %v more, want at most the cookie timeout %v + %v", d, cookieTimeout, margin)
		}
		for _, c := range closed {
			checkClosed(c)
		}
		select {
		case r := <-reports:
			if r.err != nil {
				t.Errorf("server: %v", r.err)
			}
		case <-ctx.Done():
			t.Fatal("no server report")
		}
	})
}

// Connections beyond maxPendingCookies that wait for their cookie at once
// are refused with ACCESS_DENIED, not left to pile up; once the silent
// ones time out, clients are served again.
func TestServerManyIdleConnections(t *testing.T) {
	const cookieTimeout = 500 * time.Millisecond
	pair := netnstest.New(t, netnstest.Config{})
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, 5201).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &Server{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}, CookieTimeout: cookieTimeout}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { scancel(); <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	server := netip.AddrPortFrom(pair.B.IPv4, 5201)
	for i := 0; i < maxPendingCookies; i++ {
		c, err := nsDial(pair.A)(ctx, "tcp", server.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(100 * time.Millisecond) // all accepted and waiting
	c := Client{UDP: true, Server: server, DataPlane: &kernelplane.DataPlane{Do: pair.A.Do}, Dial: nsDial(pair.A), Duration: time.Second, Interval: -1}
	if _, err := c.Run(ctx); !errors.Is(err, iperf3.ErrAccessDenied) {
		t.Errorf("client beyond %d silent connections: %v, want ErrAccessDenied", maxPendingCookies, err)
	}
	time.Sleep(cookieTimeout + 300*time.Millisecond)
	if _, err := c.Run(ctx); err != nil {
		t.Errorf("client once the silent connections timed out: %v", err)
	}
}

// ServeConn, which takes the server before it reads, gives up on a
// connection that sends no cookie after CookieTimeout, with an error that
// says so, and frees the server.
func TestServeConnCookieTimeout(t *testing.T) {
	cli, srvConn := net.Pipe()
	defer cli.Close()
	s := &Server{DataPlane: fakeDataPlane{}, CookieTimeout: 100 * time.Millisecond}
	start := time.Now()
	rep, err := s.ServeConn(context.Background(), srvConn)
	if d := time.Since(start); d < 100*time.Millisecond || d > time.Second {
		t.Errorf("ServeConn gave up after %v, want the cookie timeout, 100ms", d)
	}
	if err == nil || !strings.Contains(err.Error(), "no cookie within 100ms") || !errors.Is(err, os.ErrDeadlineExceeded) || rep == nil || rep.Error != err.Error() {
		t.Errorf("ServeConn = %+v, %v", rep, err)
	}
	if s.busy.Load() {
		t.Error("the server is still taken")
	}
}
