package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
)

// fakeDataPlane is a data plane with no network: setup datagrams are
// answered, reads otherwise find nothing.
type fakeDataPlane struct{}

type fakeConn struct {
	mu      sync.Mutex
	pending []plane.Message
	closed  bool
}

func (fakeDataPlane) Listen(local netip.AddrPort) (plane.PacketConn, error) { return &fakeConn{}, nil }
func (fakeDataPlane) Dial(remote netip.AddrPort) (plane.PacketConn, error)  { return &fakeConn{}, nil }

func (c *fakeConn) ReadBatch(msgs []plane.Message) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.pending) == 0 {
		time.Sleep(time.Millisecond)
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(msgs, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *fakeConn) WriteBatch(msgs []plane.Message) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		if iperf3.IsConnectMsg(m.Buf[:m.N]) {
			c.pending = append(c.pending, plane.Message{Buf: iperf3.ConnectBytes(iperf3.UDPConnectReply), N: 4})
		}
	}
	return len(msgs), nil
}

func (c *fakeConn) SetReadDeadline(time.Time) error { return nil }
func (c *fakeConn) LocalAddr() netip.AddrPort       { return netip.MustParseAddrPort("198.18.0.1:5201") }
func (c *fakeConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// FuzzServerControl feeds a byte stream to the Server as if from a client:
// it ends with an error or a report, never a panic or a hang.
func FuzzServerControl(f *testing.F) {
	c := iperf3.NewCookie()
	params := func(s string) []byte {
		b := append([]byte{}, c[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	f.Add(params(`{"udp":true,"time":1,"parallel":1,"len":100}`))
	f.Add(append(params(`{"udp":true,"time":1,"parallel":1,"len":100}`), byte(iperf3.TestEnd)))
	f.Add(append(params(`{"udp":true,"time":1,"parallel":1,"len":100}`), byte(iperf3.ClientTerminate)))
	f.Add(params(`{"tcp":true,"time":1}`))
	f.Add(c[:20])
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srvConn := net.Pipe()
		defer cli.Close()
		go io.Copy(io.Discard, cli)
		go func() { cli.Write(in) }()
		s := &Server{DataPlane: fakeDataPlane{}, SetupTimeout: 20 * time.Millisecond, Slack: 10 * time.Millisecond, Interval: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Ends by error (EOF once in is used up) or ctx.
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

// resultsFromIperf3 is what iperf3 3.12 sends after EXCHANGE_RESULTS
// (the same text package iperf3's tests decode).
const resultsFromIperf3 = `{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1,"sender_has_retransmits":18446744073709551615,` +
	`"streams":[{"id":1,"bytes":12496240,"retransmits":18446744073709551615,"jitter":1.5e-05,"errors":0,"packets":8630,"start_time":0,"end_time":2.000113}]}`

// FuzzClientControl feeds a byte stream to the Client as if from a server.
func FuzzClientControl(f *testing.F) {
	msg := func(s string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
		return append(b, s...)
	}
	ok := []byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams), byte(iperf3.TestStart), byte(iperf3.TestRunning), byte(iperf3.ExchangeResults)}
	ok = append(ok, msg(resultsFromIperf3)...)
	ok = append(ok, byte(iperf3.DisplayResults))
	f.Add(ok)
	f.Add([]byte{0xff})
	f.Add([]byte{0xfe, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{byte(iperf3.ParamExchange), byte(iperf3.ExchangeResults), 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srv := net.Pipe()
		defer srv.Close()
		go io.Copy(io.Discard, srv)
		go func() { srv.Write(in); time.Sleep(50 * time.Millisecond); srv.Close() }()
		c := &Client{UDP: true, Server: netip.MustParseAddrPort("198.18.0.2:5201"), DataPlane: fakeDataPlane{}, Duration: time.Second,
			SetupTimeout: 50 * time.Millisecond, Interval: -1,
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
