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
)

// FuzzReadMessage: any byte string read as a control message is a value or
// an error, never a panic; accepted parameters survive a round trip.
func FuzzReadMessage(f *testing.F) {
	frame := func(s string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
		return append(b, s...)
	}
	f.Add(frame(`{"udp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":4,"len":1448,"bandwidth":52428800,"udp_counters_64bit":1,"client_version":"3.12"}`))
	f.Add(frame(resultsFromIperf3))
	f.Add(frame(`{"streams":[{}]}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Params
		if err := ReadMessage(bytes.NewReader(b), &p); err == nil {
			var buf bytes.Buffer
			if err := WriteMessage(&buf, &p); err != nil {
				t.Fatal(err)
			}
			var q Params
			if err := ReadMessage(&buf, &q); err != nil {
				t.Fatalf("re-read %+v: %v", p, err)
			}
			if (q.ServerAffinity == nil) != (p.ServerAffinity == nil) {
				t.Fatalf("round trip %+v != %+v", q, p)
			}
			q.ServerAffinity, p.ServerAffinity = nil, nil
			if q != p {
				t.Fatalf("round trip %+v != %+v", q, p)
			}
		}
		var r Results
		if err := ReadMessage(bytes.NewReader(b), &r); err == nil {
			for _, s := range r.Streams {
				if s.Packets < 0 || s.Errors < 0 {
					t.Fatalf("accepted negative counts %+v", s)
				}
			}
		}
	})
}

// FuzzParseUDPHeader: any datagram parses or errs; a parsed header writes
// back to the same bytes.
func FuzzParseUDPHeader(f *testing.F) {
	f.Add([]byte{0x65, 0x0, 0x0, 0x1, 0x0, 0x0, 0x3, 0xe8, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add([]byte{1, 2, 3})
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c64 := range []bool{false, true} {
			h, err := ParseUDPHeader(b, c64)
			if err != nil {
				continue
			}
			n := HeaderLen(c64)
			out := make([]byte, n)
			h.Put(out, c64)
			if !bytes.Equal(out, b[:n]) {
				t.Fatalf("%x parsed as %+v writes back %x", b[:n], h, out)
			}
			var s RecvStats
			s.Add(len(b), h, time.Now())
			if s.Datagrams != 1 || s.Packets != int64(h.Seq) && h.Seq <= 1<<62 {
				t.Fatalf("stats %+v for %+v", s, h)
			}
		}
	})
}

// fakeDataPlane is a data plane with no network: setup datagrams are
// answered, reads otherwise find nothing.
type fakeDataPlane struct{}

type fakeConn struct {
	mu      sync.Mutex
	pending []Message
	closed  bool
}

func (fakeDataPlane) Listen(local netip.AddrPort) (PacketConn, error) { return &fakeConn{}, nil }
func (fakeDataPlane) Dial(remote netip.AddrPort) (PacketConn, error)  { return &fakeConn{}, nil }

func (c *fakeConn) ReadBatch(msgs []Message) (int, error) {
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

func (c *fakeConn) WriteBatch(msgs []Message) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		if IsConnectMsg(m.Buf[:m.N]) {
			c.pending = append(c.pending, Message{Buf: connectBytes(UDPConnectReply), N: 4})
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
	c := NewCookie()
	params := func(s string) []byte {
		b := append([]byte{}, c[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	f.Add(params(`{"udp":true,"time":1,"parallel":1,"len":100}`))
	f.Add(append(params(`{"udp":true,"time":1,"parallel":1,"len":100}`), byte(TestEnd)))
	f.Add(append(params(`{"udp":true,"time":1,"parallel":1,"len":100}`), byte(ClientTerminate)))
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

// FuzzClientControl feeds a byte stream to the Client as if from a server.
func FuzzClientControl(f *testing.F) {
	msg := func(s string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
		return append(b, s...)
	}
	ok := []byte{byte(ParamExchange), byte(CreateStreams), byte(TestStart), byte(TestRunning), byte(ExchangeResults)}
	ok = append(ok, msg(resultsFromIperf3)...)
	ok = append(ok, byte(DisplayResults))
	f.Add(ok)
	f.Add([]byte{0xff})
	f.Add([]byte{0xfe, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{byte(ParamExchange), byte(ExchangeResults), 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srv := net.Pipe()
		defer srv.Close()
		go io.Copy(io.Discard, srv)
		go func() { srv.Write(in); time.Sleep(50 * time.Millisecond); srv.Close() }()
		c := &Client{Server: netip.MustParseAddrPort("198.18.0.2:5201"), DataPlane: fakeDataPlane{}, Duration: time.Second,
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
