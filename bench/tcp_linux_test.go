package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/netstackplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// iperfTCP is the part of iperf3's -J output of a TCP test the tests
// read.
type iperfTCP struct {
	Start struct {
		Connected []Connected `json:"connected"`
		TestStart struct {
			NumStreams int `json:"num_streams"`
			Blksize    int `json:"blksize"`
			Reverse    int `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Sum struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		Streams []struct {
			Sender struct {
				Socket      int    `json:"socket"`
				Bytes       uint64 `json:"bytes"`
				Retransmits *int64 `json:"retransmits"`
			} `json:"sender"`
			Receiver struct {
				Bytes uint64 `json:"bytes"`
			} `json:"receiver"`
		} `json:"streams"`
		SumSent struct {
			Bytes       uint64 `json:"bytes"`
			Retransmits *int64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum_received"`
		SenderCongestion   string `json:"sender_tcp_congestion"`
		ReceiverCongestion string `json:"receiver_tcp_congestion"`
	} `json:"end"`
	Error string `json:"error"`
}

func parseIperfTCP(t *testing.T, who string, out []byte) iperfTCP {
	t.Helper()
	var j iperfTCP
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal(out, &j); err != nil {
		t.Fatalf("%s's -J: %v\n%s", who, err, out)
	}
	if j.Error != "" {
		t.Fatalf("%s reports an error: %s", who, j.Error)
	}
	return j
}

// tcpPlanes are the stacks a TCP test's data connections run on at our
// end: the kernel's (nil) and netstack on h's veth.
func tcpPlanes(h *netnstest.Host) map[string]plane.TCPPlane {
	return map[string]plane.TCPPlane{"kernel": nil, "netstack": &netstackplane.Plane{Iface: h.Link, Do: h.Do}}
}

// serveTCP runs our Server in B on port with tp for TCP tests, until
// the test ends; each test's report and error go to the channel.
func serveTCP(t *testing.T, pair *netnstest.Pair, port int, tp plane.TCPPlane) <-chan reportErr {
	t.Helper()
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, uint16(port)).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ch := make(chan reportErr, 8)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{TCPPlane: tp, OnReport: func(r *Report, err error) { ch <- reportErr{r, err} }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ch
}

// Debian's iperf3 client, TCP (its default), against our Server whose
// data connections run on the kernel's TCP or on netstack: forward, -R
// and -P 4. Oracle: iperf3's -J. What our server received is what iperf3
// says it sent, to the byte, stream by stream; in reverse iperf3 counts
// what it read until it sent TEST_END, as against an iperf3 server, so
// it received at most what we sent.
func TestTCPIperf3ClientAgainstServer(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	port := 15801
	for name, tp := range tcpPlanes(pair.B) {
		for _, args := range [][]string{nil, {"-R"}, {"-P", "4"}} {
			t.Run(strings.Join(append([]string{name}, args...), " "), func(t *testing.T) {
				port++
				reports := serveTCP(t, pair, port, tp)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				all := append([]string{"-c", pair.B.IPv4.String(), "-p", strconv.Itoa(port), "-t", "2", "-J"}, args...)
				out, err := pair.A.Command(ctx, "iperf3", all...).Output()
				if err != nil {
					t.Fatalf("iperf3 %v: %v\n%s", all, err, out)
				}
				j := parseIperfTCP(t, "iperf3", out)
				var r reportErr
				select {
				case r = <-reports:
				case <-ctx.Done():
					t.Fatal("no server report")
				}
				if r.err != nil {
					t.Fatalf("server: %v", r.err)
				}
				checkTCPAgainstIperf3(t, j, r.rep, len(args) > 0 && args[0] == "-R", true)
			})
		}
	}
}

// checkTCPAgainstIperf3 compares our report of a TCP test with iperf3's
// own of the same test. iperfClient tells that iperf3 was the client.
func checkTCPAgainstIperf3(t *testing.T, j iperfTCP, rep *Report, reverse, iperfClient bool) {
	t.Helper()
	n := j.Start.TestStart.NumStreams
	sent, recv := j.End.SumSent.Bytes, j.End.SumReceived.Bytes
	t.Logf("iperf3: %d streams, sent %d, received %d bytes, retransmits %d; ours: sent %d received %d retransmits %d (%s, %s)",
		n, sent, recv, deref(j.End.SumSent.Retransmits), rep.End.SumSent.Bytes, rep.End.SumReceived.Bytes, rep.End.SumSent.Retransmits,
		rep.End.SenderCongestion, rep.End.ReceiverCongestion)
	if len(rep.End.Streams) != n || len(j.End.Streams) != n || len(rep.Start.Connected) != n {
		t.Fatalf("streams: ours %d (%d connected), iperf3's %d, want %d", len(rep.End.Streams), len(rep.Start.Connected), len(j.End.Streams), n)
	}
	if sent == 0 || recv == 0 {
		t.Fatalf("iperf3 sent %d and received %d bytes", sent, recv)
	}
	// Both reports hold both ends' totals.
	if rep.End.SumSent.Bytes != sent || rep.End.SumReceived.Bytes != recv {
		t.Errorf("our report: sent %d received %d; iperf3's: sent %d received %d", rep.End.SumSent.Bytes, rep.End.SumReceived.Bytes, sent, recv)
	}
	if reverse && iperfClient {
		// iperf3's client stops counting at TEST_END, ours sends until
		// then: what was in flight is in neither count of iperf3's.
		if recv > sent {
			t.Errorf("iperf3 received %d bytes, more than the %d we sent", recv, sent)
		}
	} else {
		for i, s := range j.End.Streams {
			if s.Sender.Bytes != s.Receiver.Bytes {
				t.Errorf("stream %d: sent %d bytes, received %d", i, s.Sender.Bytes, s.Receiver.Bytes)
			}
		}
		if recv != sent {
			t.Errorf("received %d bytes, %d were sent", recv, sent)
		}
	}
	if j.End.SumSent.Retransmits == nil || rep.End.SumSent.Retransmits != *j.End.SumSent.Retransmits || !rep.End.SumSent.HasRetransmits {
		t.Errorf("retransmits: ours %d, iperf3's %v", rep.End.SumSent.Retransmits, j.End.SumSent.Retransmits)
	}
	if j.End.SenderCongestion == "" || j.End.ReceiverCongestion == "" || rep.End.SenderCongestion != j.End.SenderCongestion || rep.End.ReceiverCongestion != j.End.ReceiverCongestion {
		t.Errorf("congestion control: ours %q/%q, iperf3's %q/%q", rep.End.SenderCongestion, rep.End.ReceiverCongestion, j.End.SenderCongestion, j.End.ReceiverCongestion)
	}
	// Our intervals add up to our totals.
	var ivBytes uint64
	for _, iv := range rep.Intervals {
		ivBytes += iv.Sum.Bytes
	}
	local := rep.End.SumReceived.Bytes
	if rep.End.SumSent.Sender {
		local = rep.End.SumSent.Bytes
	}
	if ivBytes != local || len(rep.Intervals) < 2 {
		t.Errorf("our %d intervals add up to %d bytes, our total is %d", len(rep.Intervals), ivBytes, local)
	}
}

// Our Client, on the kernel's TCP or on netstack in A, against a one-off
// Debian iperf3 server in B: forward, -R and -P 4. Oracle: the server's
// -J, which knows only its own side: as receiver it received what we
// sent, to the byte; as sender (-R) we received what it sent.
func TestTCPClientAgainstIperf3Server(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	port := 15831
	for name, tp := range tcpPlanes(pair.A) {
		for _, c := range []Client{{}, {Reverse: true}, {Streams: 4}} {
			t.Run(fmt.Sprintf("%s R=%v P=%d", name, c.Reverse, c.Streams), func(t *testing.T) {
				port++
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
				var out bytes.Buffer
				srv.Stdout = &out
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
				c.Server = netip.AddrPortFrom(pair.B.IPv4, uint16(port))
				c.Duration = 2 * time.Second
				c.TCPPlane = tp
				c.Dial = retryDial(pair.A)
				rep, err := c.Run(ctx)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if err := srv.Wait(); err != nil {
					t.Fatalf("iperf3 -s: %v\n%s", err, out.Bytes())
				}
				j := parseIperfTCP(t, "iperf3 -s", out.Bytes())
				// iperf3's server reports its own side only.
				theirs, ours := j.End.SumReceived.Bytes, rep.End.SumSent.Bytes
				if c.Reverse {
					theirs, ours = j.End.SumSent.Bytes, rep.End.SumReceived.Bytes
				}
				t.Logf("iperf3 -s: %d bytes; ours: sent %d, received %d, retransmits %d; stack %+v %+v", theirs,
					rep.End.SumSent.Bytes, rep.End.SumReceived.Bytes, rep.End.SumSent.Retransmits, rep.Start.TCPStack, rep.End.TCPStackCounters)
				if theirs == 0 || theirs != ours || rep.End.SumSent.Bytes != rep.End.SumReceived.Bytes {
					t.Errorf("iperf3 -s counted %d bytes, we %d; our report: sent %d received %d", theirs, ours, rep.End.SumSent.Bytes, rep.End.SumReceived.Bytes)
				}
				if n := max(c.Streams, 1); len(j.End.Streams) != n || len(rep.End.Streams) != n {
					t.Errorf("streams: iperf3 -s %d, ours %d, want %d", len(j.End.Streams), len(rep.End.Streams), n)
				}
			})
		}
	}
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// retryDial dials from h's namespace, retrying a refused connection for
// up to 2.5 s (until a server just started listens).
func retryDial(h *netnstest.Host) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		for try := 0; try < 50; try++ {
			err = h.Do(func() error {
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
}

// Debian's iperf3 client over IPv6 against our Server on netstack: the
// stack shares B's IPv6 address and takes the data connections, the
// control connection stays the kernel's. Oracle: iperf3's -J.
func TestTCPIPv6(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv6, 15861).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reports := make(chan reportErr, 4)
	srv := &Server{TCPPlane: &netstackplane.Plane{Iface: pair.B.Link, Do: pair.B.Do}, OnReport: func(r *Report, err error) { reports <- reportErr{r, err} }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	var out []byte
	var err error
	for try := 0; try < 20; try++ { // the address may still be tentative
		out, err = pair.A.Command(ctx, "iperf3", "-6", "-c", pair.B.IPv6.String(), "-p", "15861", "-t", "1", "-P", "2", "-J").Output()
		if err == nil && !bytes.Contains(out, []byte(`"error"`)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 -6: %v\n%s", err, out)
	}
	j := parseIperfTCP(t, "iperf3 -6", out)
	var r reportErr
	for r.rep == nil || r.err != nil {
		select {
		case r = <-reports:
			if r.err != nil {
				t.Logf("server: %v", r.err) // a try while the address was tentative
			}
		case <-ctx.Done():
			t.Fatal("no server report")
		}
	}
	if r.err != nil || r.rep.Start.TCPStack == nil || r.rep.Start.TCPStack.Name != "netstack" {
		t.Fatalf("server: %v, stack %+v", r.err, r.rep.Start.TCPStack)
	}
	if c := r.rep.Start.Connected; len(c) != 2 || c[0].LocalHost != pair.B.IPv6.String() {
		t.Errorf("connected %+v: want 2 streams to %v", c, pair.B.IPv6)
	}
	checkTCPAgainstIperf3(t, j, r.rep, false, true)
}
