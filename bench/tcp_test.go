package bench

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"
)

func TestTCPReportText(t *testing.T) {
	r := newTCPReport(iperf3.TCPSenderStats{TSO: true, MSS: 1460, Seconds: 2, CPU: iperf3.CPUTime{User: 0.5, System: 0.5},
		Streams: []iperf3.TCPSenderStream{{ID: 1, Bytes: 250e6, Segments: 171234}}},
		iperf3.TCPReceiverStats{Seconds: 2, Streams: []iperf3.TCPReceiverStream{{ID: 1, Segments: 171234, Bytes: 250e6, InOrderBytes: 250e6}}})
	if r.Sum.SenderBitsPerSec != 1e9 || r.Sum.SenderCPUNsPerByte != 4 || r.Sum.SenderCPUPercent != 50 {
		t.Errorf("sum %+v", r.Sum)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	for _, s := range []string{"software TSO on", "1.00 Gbits/sec", "sender", "receiver (in order)", "4.000 ns/byte", "0 bad checksums"} {
		if !bytes.Contains(b.Bytes(), []byte(s)) {
			t.Errorf("text lacks %q:\n%s", s, b.String())
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]iperf3.Mode{"udp": iperf3.ModeUDP, "TCP": iperf3.ModeTCP, "": iperf3.ModeUDP} {
		if m, err := iperf3.ParseMode(in); err != nil || m != want {
			t.Errorf("%q: %v %v", in, m, err)
		}
	}
	if _, err := iperf3.ParseMode("sctp"); err == nil {
		t.Error("sctp accepted")
	}
}

// TCP mode refuses, before any connection, what it cannot do: another data
// plane than AF_XDP, reverse tests.
func TestTCPModeRefuses(t *testing.T) {
	srv := netip.MustParseAddrPort("198.18.0.2:5201")
	for name, c := range map[string]*Client{
		"socket data plane": {Server: srv, Mode: iperf3.ModeTCP, Duration: time.Second, DataPlane: &kernelplane.DataPlane{}},
		"nil data plane":    {Server: srv, Mode: iperf3.ModeTCP, Duration: time.Second},
		"reverse":           {Server: srv, Mode: iperf3.ModeTCP, Duration: time.Second, Reverse: true},
	} {
		c.Dial = func(context.Context, string, string) (net.Conn, error) {
			t.Errorf("%s: dialled the server", name)
			return nil, errors.New("no")
		}
		rep, err := c.Run(context.Background())
		if !errors.Is(err, ErrNotSupported) || rep.Error == "" {
			t.Errorf("%s: %v, want ErrNotSupported", name, err)
		}
	}
	if _, err := (&Client{Server: srv, Mode: "sctp"}).Run(context.Background()); err == nil {
		t.Error("mode sctp accepted")
	}
}

// A server whose data plane is not AF_XDP answers a TCP-mode request with
// SERVER_ERROR "not implemented" and says why.
func TestTCPModeServerWithoutXSK(t *testing.T) {
	cli, srv := net.Pipe()
	defer cli.Close()
	s := &Server{DataPlane: fakeDataPlane{}, SetupTimeout: 2 * time.Second}
	done := make(chan error, 1)
	go func() { _, err := s.ServeConn(context.Background(), srv); done <- err }()
	ck := iperf3.NewCookie()
	cli.Write(ck[:])
	if st, err := iperf3.ReadState(cli); st != iperf3.ParamExchange || err != nil {
		t.Fatalf("%v %v, want PARAM_EXCHANGE", st, err)
	}
	iperf3.WriteMessage(cli, &iperf3.TCPParamsMsg{Params: iperf3.Params{TCP: true, Time: 1, Parallel: 1}, TCP: &iperf3.TCPParams{Version: 1, MSS: 1460}})
	st, err := iperf3.ReadState(cli)
	var se *iperf3.ServerError
	if st != iperf3.ServerErrorCode || err != nil || !errors.As(iperf3.ReadServerError(cli), &se) || se.Code != iperf3.IEUnimp {
		t.Errorf("got %v %v %v, want SERVER_ERROR 13", st, err, se)
	}
	if err := <-done; !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "AF_XDP") {
		t.Errorf("server: %v", err)
	}
}
