package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
)

// pipeTCPConn is a TCP test's data connection over net.Pipe, for tests
// without a network.
type pipeTCPConn struct{ net.Conn }

func (pipeTCPConn) Info() (plane.TCPInfo, error) {
	return plane.TCPInfo{RTT: time.Millisecond, SndCwnd: 1 << 16}, nil
}
func (pipeTCPConn) Finish(context.Context) error { return nil }
func (pipeTCPConn) Congestion() string           { return "pipe" }

// fakeTCPPlane is a TCP plane with no network: a server's listener
// accepts connections whose peer sends cookie and then n bytes and
// closes; a client's connections go to a peer that reads and discards,
// and (reverse) sends n bytes and closes.
type fakeTCPPlane struct {
	cookie  iperf3.Cookie
	n       int
	reverse bool
}

type fakeTCPListener struct {
	p      fakeTCPPlane
	closed chan struct{}
	once   sync.Once
}

func (p fakeTCPPlane) Listen(local, ctl netip.AddrPort) (plane.TCPListener, error) {
	return &fakeTCPListener{p: p, closed: make(chan struct{})}, nil
}

func (l *fakeTCPListener) Accept() (plane.TCPConn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		go io.Copy(io.Discard, b)
		b.Write(l.p.cookie[:])
		b.Write(make([]byte, l.p.n))
	}()
	return pipeTCPConn{a}, nil
}

func (l *fakeTCPListener) Stack() plane.TCPStack { return plane.TCPStack{Name: "pipe"} }
func (l *fakeTCPListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

type fakeTCPDialer struct{ p fakeTCPPlane }

func (p fakeTCPPlane) Dialer(local, server netip.AddrPort) (plane.TCPDialer, error) {
	return fakeTCPDialer{p}, nil
}

func (d fakeTCPDialer) Dial(context.Context) (plane.TCPConn, error) {
	a, b := net.Pipe()
	go func() {
		if !d.p.reverse {
			io.Copy(io.Discard, b)
			return
		}
		defer b.Close()
		io.ReadFull(b, make([]byte, iperf3.CookieSize))
		b.Write(make([]byte, d.p.n))
	}()
	return pipeTCPConn{a}, nil
}

func (fakeTCPDialer) Stack() plane.TCPStack { return plane.TCPStack{Name: "pipe"} }
func (fakeTCPDialer) Close() error          { return nil }

// FuzzTCPServerControl feeds a byte stream to the Server as if from a
// client of a TCP test whose data connections (a fake plane's) bring the
// cookie and some bytes: it ends with an error or a report, never a panic
// or a hang.
func FuzzTCPServerControl(f *testing.F) {
	c := iperf3.NewCookie()
	params := func(s string) []byte {
		b := append([]byte{}, c[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	results := func(b []byte, bytes int) []byte {
		r := `{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":1,"congestion_used":"cubic",` +
			`"streams":[{"id":1,"bytes":` + strconv.Itoa(bytes) + `,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1}]}`
		b = append(b, byte(iperf3.TestEnd))
		b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
		return append(append(b, r...), byte(iperf3.IperfDone))
	}
	f.Add(params(`{"tcp":true,"time":1,"parallel":1,"len":1000}`))
	f.Add(results(params(`{"tcp":true,"time":1,"parallel":1,"len":1000}`), 5000))
	f.Add(results(params(`{"tcp":true,"time":1,"parallel":1,"len":100,"reverse":true}`), 0))
	f.Add(append(params(`{"tcp":true,"time":1,"parallel":2,"len":100}`), byte(iperf3.ClientTerminate)))
	f.Add(params(`{"tcp":true,"time":1,"parallel":1,"len":1048577}`))
	f.Add(params(`{"sctp":true,"time":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srvConn := net.Pipe()
		defer cli.Close()
		go io.Copy(io.Discard, cli)
		go func() { cli.Write(in) }()
		// The data connections bring the cookie the control connection
		// starts with.
		var ck iperf3.Cookie
		copy(ck[:], in)
		s := &Server{TCPPlane: fakeTCPPlane{cookie: ck, n: 5000}, SetupTimeout: 20 * time.Millisecond, Slack: 10 * time.Millisecond, Interval: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			go func() { time.Sleep(50 * time.Millisecond); cli.Close() }()
			s.ServeConn(ctx, srvConn)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server hangs")
		}
	})
}

// FuzzTCPClientControl feeds a byte stream to a TCP test's Client as if
// from a server, its data connections a fake plane's: it ends with an
// error or a report, never a panic or a hang; the well-formed exchange
// succeeds.
func FuzzTCPClientControl(f *testing.F) {
	msg := func(s string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
		return append(b, s...)
	}
	results := `{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":-1,"congestion_used":"cubic",` +
		`"streams":[{"id":1,"bytes":5000,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1}]}`
	ok := []byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams), byte(iperf3.TestStart), byte(iperf3.TestRunning), byte(iperf3.ExchangeResults)}
	ok = append(ok, msg(results)...)
	ok = append(ok, byte(iperf3.DisplayResults))
	f.Add(ok, false)
	f.Add(ok, true)
	f.Add([]byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams), 0xfe, 0, 0, 0, 204, 0, 0, 0, 0}, false)
	f.Add([]byte{byte(iperf3.ParamExchange), byte(iperf3.TestRunning)}, false)
	f.Add([]byte{byte(iperf3.CreateStreams), byte(iperf3.CreateStreams)}, true)
	f.Fuzz(func(t *testing.T, in []byte, reverse bool) {
		cli, srv := net.Pipe()
		defer srv.Close()
		go io.Copy(io.Discard, srv)
		go func() { srv.Write(in); time.Sleep(50 * time.Millisecond); srv.Close() }()
		c := &Client{Server: netip.MustParseAddrPort("198.18.0.2:5201"), TCPPlane: fakeTCPPlane{n: 5000, reverse: reverse}, Duration: time.Second,
			Reverse: reverse, SetupTimeout: 50 * time.Millisecond, Interval: -1,
			Dial: func(context.Context, string, string) (net.Conn, error) { return cli, nil }}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.Run(ctx); err != nil && bytes.Equal(in, ok) {
				t.Errorf("the well-formed exchange fails: %v", err)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("client hangs")
		}
	})
}
