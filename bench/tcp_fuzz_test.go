package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/tcpplane"
)

// fakeTCPPlane carries TCP mode without a network: the sender sends
// nothing, the receiver receives nothing.
type fakeTCPPlane struct{ fakeDataPlane }

type fakeTCPSender struct{ cfg tcpplane.SenderConfig }

type fakeTCPReceiver struct{ port uint16 }

func (fakeTCPPlane) TCPMSS(netip.Addr) (int, error) { return 1460, nil }
func (fakeTCPPlane) OpenTCPSender(cfg tcpplane.SenderConfig) (tcpplane.Sender, error) {
	return &fakeTCPSender{cfg}, nil
}
func (fakeTCPPlane) OpenTCPReceiver(_ netip.AddrPort, port uint16) (tcpplane.Receiver, error) {
	return &fakeTCPReceiver{port}, nil
}

func (s *fakeTCPSender) Flows() []iperf3.TCPStreamInfo {
	var in []iperf3.TCPStreamInfo
	for i := 0; i < s.cfg.Streams; i++ {
		in = append(in, iperf3.TCPStreamInfo{ID: iperf3.StreamID(i), Src: "198.18.0.1", SrcPort: uint16(20000 + i)})
	}
	return in
}
func (s *fakeTCPSender) Start([]tcpplane.Counter, time.Time) {}
func (s *fakeTCPSender) Stop() (iperf3.TCPSenderStats, error) {
	return iperf3.TCPSenderStats{TSO: s.cfg.TSO, MSS: s.cfg.MSS, Seconds: 1}, nil
}
func (s *fakeTCPSender) Close() error { return nil }

func (r *fakeTCPReceiver) Port() uint16                                        { return r.port }
func (r *fakeTCPReceiver) MSS() int                                            { return 1460 }
func (r *fakeTCPReceiver) Register([]iperf3.TCPStreamInfo, []tcpplane.Counter) {}
func (r *fakeTCPReceiver) Start(time.Time)                                     {}
func (r *fakeTCPReceiver) Stop() iperf3.TCPReceiverStats                       { return iperf3.TCPReceiverStats{Seconds: 1} }
func (r *fakeTCPReceiver) Close() error                                        { return nil }

func jsonMsg(s string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
	return append(b, s...)
}

// tcpServerSeeds returns inputs for FuzzTCPServerControl, the
// well-formed exchange first.
func tcpServerSeeds() [][]byte {
	c := iperf3.NewCookie()
	params := append(append([]byte{}, c[:]...), jsonMsg(`{"tcp":true,"time":1,"parallel":2,"xdpio_tcp":{"version":1,"tso":true,"mss":1460}}`)...)
	streams := jsonMsg(`{"mss":1460,"streams":[{"id":1,"src":"198.18.0.1","src_port":20000,"isn":1},{"id":3,"src":"198.18.0.1","src_port":20001,"isn":2}]}`)
	ok := append(append([]byte{}, params...), streams...)
	ok = append(ok, byte(iperf3.TestEnd))
	ok = append(ok, jsonMsg(`{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":0,"retransmits":0,"jitter":0,"errors":0,"packets":0},{"id":3,"bytes":0,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}`)...)
	ok = append(ok, jsonMsg(`{"tso":true,"mss":1460,"seconds":1,"streams":[],"cpu":{"user":0,"system":0}}`)...)
	ok = append(ok, byte(iperf3.IperfDone))
	seeds := [][]byte{ok, params}
	seeds = append(seeds, append(append([]byte{}, params...), jsonMsg(`{"mss":1460,"streams":[]}`)...))
	seeds = append(seeds, append(append([]byte{}, params...), byte(iperf3.ClientTerminate)))
	return seeds
}

// FuzzTCPServerControl feeds a byte stream to the Server as if from a
// TCP-mode client: it ends with an error or a report, never a panic or a
// hang. The well-formed exchange succeeds.
func FuzzTCPServerControl(f *testing.F) {
	seeds := tcpServerSeeds()
	ok := seeds[0]
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srvConn := net.Pipe()
		defer cli.Close()
		go io.Copy(io.Discard, cli)
		go func() { cli.Write(in); time.Sleep(100 * time.Millisecond); cli.Close() }()
		s := &Server{DataPlane: fakeTCPPlane{}, SetupTimeout: 50 * time.Millisecond, Slack: 10 * time.Millisecond, Interval: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := s.ServeConn(ctx, srvConn); err != nil && bytes.Equal(in, ok) {
				t.Errorf("the well-formed exchange fails: %v", err)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server hangs")
		}
	})
}

// tcpClientSeeds returns inputs for FuzzTCPClientControl, the
// well-formed exchange first.
func tcpClientSeeds() [][]byte {
	ok := []byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams)}
	ok = append(ok, jsonMsg(`{"version":1,"data_port":5202,"mss":1440}`)...)
	ok = append(ok, byte(iperf3.TestStart), byte(iperf3.TestRunning), byte(iperf3.ExchangeResults))
	ok = append(ok, jsonMsg(`{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":0,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":0,"retransmits":-1,"jitter":0,"errors":0,"packets":0}]}`)...)
	ok = append(ok, jsonMsg(`{"seconds":1,"streams":[{"id":1,"segments":0,"bytes":0,"in_order_bytes":0,"out_of_order":0,"gap_bytes":0,"late":0,"bad_checksum":0}],"stray":0,"malformed":0,"dropped":0,"cpu":{"user":0,"system":0}}`)...)
	ok = append(ok, byte(iperf3.DisplayResults))
	seeds := [][]byte{ok}
	seeds = append(seeds, []byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams)})
	seeds = append(seeds, append([]byte{byte(iperf3.ParamExchange), byte(iperf3.CreateStreams)}, jsonMsg(`{"version":1,"data_port":0,"mss":1440}`)...))
	seeds = append(seeds, []byte{byte(iperf3.ParamExchange), 0xfe, 0, 0, 0, 13, 0, 0, 0, 0})
	return seeds
}

// FuzzTCPClientControl feeds a byte stream to a TCP-mode Client as if
// from a server.
func FuzzTCPClientControl(f *testing.F) {
	seeds := tcpClientSeeds()
	ok := seeds[0]
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cli, srv := net.Pipe()
		defer srv.Close()
		go io.Copy(io.Discard, srv)
		go func() { srv.Write(in); time.Sleep(100 * time.Millisecond); srv.Close() }()
		c := &Client{Server: netip.MustParseAddrPort("198.18.0.2:5201"), DataPlane: fakeTCPPlane{}, Mode: iperf3.ModeTCP, Duration: time.Second,
			SetupTimeout: 50 * time.Millisecond, Interval: -1,
			Dial: func(context.Context, string, string) (net.Conn, error) { return cli, nil }}
		var rep *TCPReport
		c.OnTCPReport = func(r *TCPReport) { rep = r }
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.Run(ctx); bytes.Equal(in, ok) && (err != nil || rep == nil || rep.Sender.MSS != 1440) {
				t.Errorf("the well-formed exchange: %v, report %+v", err, rep)
			}
		}()
		select {
		case <-done:
		case <-time.After(6 * time.Second):
			t.Fatal("client hangs")
		}
	})
}
