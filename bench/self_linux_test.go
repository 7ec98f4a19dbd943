package bench

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"

	"github.com/xdpio/xdpio/internal/netnstest"
)

func nsDial(h *netnstest.Host) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = h.Do(func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// TestClientAgainstServer runs both of our ends. Oracle: the kernel's UDP
// counters in B's namespace (datagrams delivered to sockets) against what
// each end reports.
func TestClientAgainstServer(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	reports := startServer(t, pair, 5201)
	for _, reverse := range []bool{false, true} {
		rx := pair.B
		if reverse {
			rx = pair.A
		}
		before := udpInDatagrams(t, rx)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var ivs []Interval
		c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
			Dial: nsDial(pair.A), Streams: 3, Duration: 2 * time.Second, Bitrate: 20e6, Reverse: reverse, Length: 1000,
			Interval: 500 * time.Millisecond, OnInterval: func(iv Interval) { ivs = append(ivs, iv) }}
		rep, err := c.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("reverse=%v: %v", reverse, err)
		}
		srep := <-reports
		// The receiving namespace's kernel delivered the data and the 3
		// setup datagrams (or replies) to sockets.
		if got := udpInDatagrams(t, rx) - before; got != rep.End.SumReceived.Packets+3 {
			t.Errorf("reverse=%v: kernel delivered %d datagrams, report says %d received + 3 setup", reverse, got, rep.End.SumReceived.Packets)
		}
		s, r := rep.End.SumSent, rep.End.SumReceived
		if s.Packets == 0 || r.Packets != s.Packets || r.LostPackets != 0 || r.Bytes != s.Bytes || s.Bytes != uint64(s.Packets)*1000 {
			t.Errorf("reverse=%v: sent %+v received %+v", reverse, s, r)
		}
		if srep.End.SumSent != s || srep.End.SumReceived.Packets != r.Packets {
			t.Errorf("reverse=%v: server's totals %+v / %+v differ from client's %+v / %+v", reverse, srep.End.SumSent, srep.End.SumReceived, s, r)
		}
		// 20 Mbit/s per stream for 2 s: 3 × 5000 datagrams of 1000 bytes, give
		// or take the pacing's granularity.
		if s.Packets < 14000 || s.Packets > 15100 {
			t.Errorf("reverse=%v: sent %d datagrams at 3×20 Mbit/s for 2 s, want about 15000", reverse, s.Packets)
		}
		if len(ivs) < 4 || len(ivs[0].Streams) != 3 {
			t.Errorf("reverse=%v: %d intervals (want 4 or 5) of %d streams", reverse, len(ivs), len(ivs[0].Streams))
		}
		if len(rep.Start.Connected) != 3 || rep.Start.Connected[1].Socket != 7 { // stream 3, iperf3's socket 7
			t.Errorf("connected %+v: want 3 streams numbered 5, 7, 9 as iperf3 shows them", rep.Start.Connected)
		}
		// Both ends measured their CPU, and each tells the other its own
		// (client and server run in this one process, so both saw work).
		if c := rep.End.CPU; c.HostTotal <= 0 || c.RemoteTotal <= 0 || c.HostTotal < c.HostUser {
			t.Errorf("reverse=%v: CPU utilisation %+v", reverse, c)
		}
		if srep.End.CPU.HostTotal != rep.End.CPU.RemoteTotal {
			t.Errorf("reverse=%v: server's own CPU %.2f%%, client was told %.2f%%", reverse, srep.End.CPU.HostTotal, rep.End.CPU.RemoteTotal)
		}
		if h := rep.End.HostCPU; h == nil || h.DataThreadSeconds <= 0 || len(h.Cores) < 2 || h.BusySeconds <= 0 {
			t.Errorf("reverse=%v: host CPU %+v", reverse, h)
		}
	}
}

// A second client while a test runs gets ACCESS_DENIED; an iperf3 SCTP
// test (--sctp) gets SERVER_ERROR "unable to start stream listener" (202)
// with errno EPROTONOSUPPORT, which iperf3's client prints as "Protocol
// not supported", and the server's error says it runs TCP and UDP tests.
func TestServerRefuses(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	reports := startServerQuiet(t, pair, 5201)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do}, Dial: nsDial(pair.A), Duration: 2 * time.Second}
	first := base
	done := make(chan error, 1)
	go func() { _, err := first.Run(ctx); done <- err }()
	time.Sleep(500 * time.Millisecond)
	second := base
	if _, err := second.Run(ctx); !errors.Is(err, iperf3.ErrAccessDenied) {
		t.Errorf("second client: %v, want ErrAccessDenied", err)
	}
	if err := <-done; err != nil {
		t.Errorf("first client: %v", err)
	}
	<-reports

	// A real client asking for SCTP.
	conn, err := nsDial(pair.A)(ctx, "tcp", base.Server.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ck := iperf3.NewCookie()
	conn.Write(ck[:])
	if st, err := iperf3.ReadState(conn); st != iperf3.ParamExchange || err != nil {
		t.Fatalf("got %v %v, want PARAM_EXCHANGE", st, err)
	}
	iperf3.WriteMessage(conn, &iperf3.Params{SCTP: true, Time: 1, Parallel: 1})
	st, err := iperf3.ReadState(conn)
	var se *iperf3.ServerError
	if st != iperf3.ServerErrorCode || err != nil || !errors.As(iperf3.ReadServerError(conn), &se) || se.Code != iperf3.IEStreamListen || se.Errno != iperf3.LinuxEPROTONOSUPPORT {
		t.Errorf("SCTP test: %v %v %+v, want SERVER_ERROR 202 with errno 93", st, err, se)
	}
	if r := <-reports; !errors.Is(r.err, ErrNotSupported) || !strings.Contains(r.err.Error(), "runs TCP and UDP tests") {
		t.Errorf("server: %v, want ErrNotSupported saying it runs TCP and UDP tests", r.err)
	}
}

type reportErr struct {
	rep *Report
	err error
}

func startServerQuiet(t *testing.T, pair *netnstest.Pair, port int) <-chan reportErr {
	var ln net.Listener
	if err := pair.B.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, uint16(port)).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ch := make(chan reportErr, 8)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}, OnReport: func(r *Report, err error) { ch <- reportErr{r, err} }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

// udpInDatagrams reads Udp InDatagrams in h's namespace.
func udpInDatagrams(t *testing.T, h *netnstest.Host) int64 {
	t.Helper()
	m, err := h.Counters()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["UdpInDatagrams"]
	if !ok {
		t.Fatal("no Udp InDatagrams in the kernel's SNMP counters")
	}
	return v
}

// Cancelling the client's context mid-test sends CLIENT_TERMINATE: the
// client returns what it measured, the server ends with
// ErrClientTerminated.
func TestClientCancel(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	reports := startServerQuiet(t, pair, 5201)
	ctx, cancel := context.WithCancel(context.Background())
	var ivs int
	c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
		Dial: nsDial(pair.A), Duration: 10 * time.Second, Bitrate: 10e6, Interval: 200 * time.Millisecond,
		OnInterval: func(Interval) {
			if ivs++; ivs == 3 {
				cancel()
			}
		}}
	start := time.Now()
	rep, err := c.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Run took %v after cancel at ~0.6 s", el)
	}
	if len(rep.Intervals) < 3 || rep.Error == "" {
		t.Errorf("partial report: %d intervals, error %q", len(rep.Intervals), rep.Error)
	}
	select {
	case r := <-reports:
		if !errors.Is(r.err, iperf3.ErrClientTerminated) {
			t.Errorf("server: %v, want ErrClientTerminated", r.err)
		}
		var got int64
		for _, iv := range r.rep.Intervals {
			got += iv.Sum.Packets
		}
		if got == 0 {
			t.Error("server's partial report counted nothing")
		}
	case <-time.After(5 * time.Second):
		t.Error("server did not end")
	}
}
