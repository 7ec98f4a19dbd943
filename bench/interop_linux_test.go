package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// iperfJSON is the part of iperf3's -J output the tests read.
type iperfJSON struct {
	Start struct {
		TestStart struct {
			NumStreams int `json:"num_streams"`
			Blksize    int `json:"blksize"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []json.RawMessage `json:"intervals"`
	End       struct {
		Streams []struct {
			UDP Summary `json:"udp"`
		} `json:"streams"`
		Sum         Summary `json:"sum"`
		SumSent     Summary `json:"sum_sent"`
		SumReceived Summary `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

func parseIperf(t *testing.T, out []byte) iperfJSON {
	t.Helper()
	var j iperfJSON
	if i := bytes.IndexByte(out, '{'); i > 0 {
		t.Logf("iperf3 printed before its JSON: %q", out[:i])
		out = out[i:]
	}
	if err := json.Unmarshal(out, &j); err != nil {
		t.Fatalf("parse iperf3 -J output: %v\n%s", err, out)
	}
	return j
}

// startServer runs our Server in B on port, returning a channel with each
// test's report.
func startServer(t *testing.T, pair *netnstest.Pair, port int) <-chan *Report {
	t.Helper()
	var ln net.Listener
	err := pair.B.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, uint16(port)).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan *Report, 16)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}, OnReport: func(r *Report, err error) {
		if err != nil {
			t.Errorf("server: %v", err)
		}
		select {
		case reports <- r:
		default:
		}
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return reports
}

// TestIperf3ClientAgainstServer runs Debian's iperf3 client in A against
// our Server in B. Oracle: iperf3's own JSON report, which holds what it
// sent and what our server says it received.
func TestIperf3ClientAgainstServer(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	reports := startServer(t, pair, 5201)
	cases := []struct {
		name string
		args []string
	}{
		{"50M", nil},
		{"P4", []string{"-P", "4"}},
		{"reverse", []string{"-R", "-b", "20M"}}, // iperf3 reads with a default 208 KiB buffer
		{"len64", []string{"-l", "64", "-b", "10M"}},
		{"counters64", []string{"--udp-counters-64bit", "-P", "2"}},
		{"server-output", []string{"--get-server-output"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for len(reports) > 0 {
				<-reports // of an earlier failed case
			}
			args := append([]string{"-c", pair.B.IPv4.String(), "-u", "-b", "50M", "-t", "2", "-J"}, tc.args...)
			over0 := udpRcvbufErrors(t, pair.A)
			out, err := pair.A.Command(ctx, "iperf3", args...).Output()
			if err != nil {
				t.Fatalf("iperf3 %v: %v\n%s", args, err, out)
			}
			j := parseIperf(t, out)
			if j.Error != "" {
				t.Fatalf("iperf3 reports error: %s", j.Error)
			}
			var rep *Report
			select {
			case rep = <-reports:
			case <-ctx.Done():
				t.Fatal("no server report")
			}
			sent, recv := j.End.SumSent, j.End.SumReceived
			t.Logf("iperf3 %v: sum_sent packets=%d bytes=%d; sum_received packets=%d bytes=%d lost=%d jitter=%.4fms",
				tc.args, sent.Packets, sent.Bytes, recv.Packets, recv.Bytes, recv.LostPackets, recv.JitterMS)
			if sent.Packets == 0 {
				t.Fatal("iperf3 sent nothing")
			}
			reverse := len(tc.args) > 0 && tc.args[0] == "-R"
			// In reverse iperf3 receives, one datagram per call from a
			// 208 KiB buffer: a loaded machine stalls it, and the kernel
			// drops what overflows and counts it.
			var overflow int64
			if reverse {
				overflow = udpRcvbufErrors(t, pair.A) - over0
			}
			if recv.LostPackets != overflow {
				t.Errorf("lost_packets = %d, want %d (the datagrams that overflowed the receiver's socket buffer)", recv.LostPackets, overflow)
			}
			if !reverse {
				if recv.Packets != sent.Packets || recv.Bytes != sent.Bytes {
					t.Errorf("server received %d packets/%d bytes, iperf3 sent %d/%d", recv.Packets, recv.Bytes, sent.Packets, sent.Bytes)
				}
			} else {
				// iperf3 stops counting when it sends TEST_END; datagrams
				// still in flight then are neither received nor lost.
				if recv.Packets > sent.Packets || recv.Packets < sent.Packets*95/100 {
					t.Errorf("iperf3 received %d of the %d packets our server sent", recv.Packets, sent.Packets)
				}
			}
			n := j.Start.TestStart.NumStreams
			if len(rep.End.Streams) != n || len(j.End.Streams) != n {
				t.Errorf("streams: ours %d, iperf3's %d, want %d", len(rep.End.Streams), len(j.End.Streams), n)
			}
			// Our report holds the same totals as iperf3's.
			if rep.End.SumSent.Packets != sent.Packets || rep.End.SumReceived.Packets != recv.Packets {
				t.Errorf("our report: sent %d received %d; iperf3: sent %d received %d",
					rep.End.SumSent.Packets, rep.End.SumReceived.Packets, sent.Packets, recv.Packets)
			}
			var ivPackets int64
			for _, iv := range rep.Intervals {
				ivPackets += iv.Sum.Packets
			}
			want := recv.Packets
			if reverse {
				want = sent.Packets
			}
			if ivPackets != want {
				t.Errorf("our intervals add up to %d packets, want %d", ivPackets, want)
			}
			if len(rep.Intervals) < 2 {
				t.Errorf("%d intervals, want at least 2", len(rep.Intervals))
			}
			if tc.name == "server-output" {
				var so struct {
					ServerOutput *Report `json:"server_output_json"`
				}
				if err := json.Unmarshal(out[bytes.IndexByte(out, '{'):], &so); err != nil || so.ServerOutput == nil ||
					so.ServerOutput.End.SumReceived.Packets != recv.Packets {
					t.Errorf("iperf3 shows no server output with our received count %d: %v", recv.Packets, err)
				}
			}
		})
	}
}

// TestClientAgainstIperf3Server runs our Client in A against a one-off
// Debian iperf3 server in B. Oracle: the server's -J report.
func TestClientAgainstIperf3Server(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	cases := []struct {
		name string
		c    Client
	}{
		{"20M", Client{UDP: true, Bitrate: 20e6}},
		{"P4-32bit", Client{UDP: true, Bitrate: 20e6, Streams: 4, Counters32: true}},
		{"reverse", Client{UDP: true, Bitrate: 20e6, Reverse: true}},
		{"len64", Client{UDP: true, Bitrate: 2e6, Length: 64}}, // iperf3 -s reads 64-byte datagrams one by one into a 208 KiB buffer: bursts overflow it
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			port := 5301 + i
			srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
			var out bytes.Buffer
			srv.Stdout = &out
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			c := tc.c
			c.Server = netip.AddrPortFrom(pair.B.IPv4, uint16(port))
			c.Duration = 2 * time.Second
			c.DataPlane = &kernelplane.DataPlane{Do: pair.A.Do}
			c.Dial = func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
				for try := 0; try < 50; try++ { // until iperf3 listens
					err = pair.A.Do(func() error {
						conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
						return err
					})
					if err == nil {
						return conn, nil
					}
					time.Sleep(50 * time.Millisecond)
				}
				return nil, err
			}
			bufErr0 := udpRcvbufErrors(t, pair.B)
			rep, err := c.Run(ctx)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("iperf3 -s: %v\n%s", err, out.Bytes())
			}
			// iperf3 -s reads one datagram per syscall from a 208 KiB
			// buffer: when the machine stalls it, the kernel drops what
			// overflows and counts it (Udp RcvbufErrors). Such a loss is
			// the receiver's and accounted; any other is a failure.
			overflow := udpRcvbufErrors(t, pair.B) - bufErr0
			j := parseIperf(t, out.Bytes())
			if j.Error != "" {
				t.Fatalf("iperf3 server reports error: %s", j.Error)
			}
			sent, recv := j.End.SumSent, j.End.SumReceived
			t.Logf("iperf3 -s: sum_sent packets=%d bytes=%d; sum_received packets=%d bytes=%d lost=%d jitter=%.4fms; ours: sent %d received %d lost %d",
				sent.Packets, sent.Bytes, recv.Packets, recv.Bytes, recv.LostPackets, recv.JitterMS,
				rep.End.SumSent.Packets, rep.End.SumReceived.Packets, rep.End.SumReceived.LostPackets)
			// iperf3's server knows only its own side: as receiver what it
			// received, as sender (-R) what it sent.
			if !c.Reverse {
				lostB := int64(recv.LostPackets) * int64(rep.End.SumSent.Bytes/uint64(max(rep.End.SumSent.Packets, 1)))
				if recv.Packets == 0 || recv.Packets != rep.End.SumSent.Packets || int64(recv.Bytes)+lostB != int64(rep.End.SumSent.Bytes) {
					t.Errorf("iperf3 received %d packets/%d bytes (%d lost), we sent %d/%d", recv.Packets, recv.Bytes, recv.LostPackets, rep.End.SumSent.Packets, rep.End.SumSent.Bytes)
				}
				if int64(recv.LostPackets) != overflow || recv.LostPackets*100 > recv.Packets {
					t.Errorf("iperf3 lost_packets = %d, the kernel counted %d overflowing iperf3's socket buffer: want them equal and under 1%%", recv.LostPackets, overflow)
				} else if overflow > 0 {
					t.Logf("iperf3's socket buffer overflowed: %d datagrams, as many as it reports lost", overflow)
				}
			} else if sent.Packets == 0 || sent.Packets != rep.End.SumReceived.Packets || sent.Bytes != rep.End.SumReceived.Bytes {
				// We count until the server stops sending, so nothing is
				// left in flight.
				t.Errorf("we received %d packets/%d bytes, iperf3 sent %d/%d", rep.End.SumReceived.Packets, rep.End.SumReceived.Bytes, sent.Packets, sent.Bytes)
			}
			// Our report agrees with iperf3's.
			if int64(rep.End.SumReceived.LostPackets) != max(overflow, 0) && !c.Reverse || c.Reverse && rep.End.SumReceived.LostPackets != 0 || rep.End.SumReceived.Packets != rep.End.SumSent.Packets {
				t.Errorf("our report: sent %d received %d lost %d", rep.End.SumSent.Packets, rep.End.SumReceived.Packets, rep.End.SumReceived.LostPackets)
			}
			if len(j.End.Streams) != max(1, tc.c.Streams) {
				t.Errorf("iperf3 saw %d streams, want %d", len(j.End.Streams), max(1, tc.c.Streams))
			}
		})
	}
}

// TestIperf3IPv6 runs iperf3 -6 in A against our Server on B's IPv6
// address. Oracle: iperf3's JSON.
func TestIperf3IPv6(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	var ln net.Listener
	if err := pair.B.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv6, 5201).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := &Server{DataPlane: &kernelplane.DataPlane{Do: pair.B.Do}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	var out []byte
	var err error
	for try := 0; try < 20; try++ { // the address may still be tentative
		out, err = pair.A.Command(ctx, "iperf3", "-6", "-c", pair.B.IPv6.String(), "-u", "-b", "20M", "-t", "1", "-P", "2", "-J").Output()
		if err == nil && !bytes.Contains(out, []byte(`"error"`)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	j := parseIperf(t, out)
	if j.Error != "" {
		t.Fatalf("iperf3: %s", j.Error)
	}
	s, r := j.End.SumSent, j.End.SumReceived
	t.Logf("iperf3 -6: sent %d received %d lost %d", s.Packets, r.Packets, r.LostPackets)
	if s.Packets == 0 || r.Packets != s.Packets || r.LostPackets != 0 {
		t.Errorf("sent %d, server received %d lost %d", s.Packets, r.Packets, r.LostPackets)
	}
}
