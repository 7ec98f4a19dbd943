package main

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/gvisorxdpplane"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// waitFreed fails t unless, within 2 s, h's veth has no XDP program and
// its queue 0 no AF_XDP socket: the kernel lets a new socket bind the
// queue, which it refuses (EBUSY) while another holds it (xsk's bind
// retries that for a second).
func waitFreed(t *testing.T, h *netnstest.Host, when string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); xdpAttached(t, h); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: an XDP program is still attached in %s", when, h.NS)
		}
	}
	var dev *xsk.Device
	if err := h.Do(func() (err error) {
		dev, err = xsk.Open(h.Link, xsk.Config{Queues: []int{0}, NoProgram: true})
		return err
	}); err != nil {
		t.Fatalf("%s: queue 0 of %s is not free: %v", when, h.Link, err)
	}
	dev.Close()
}

// checkGvisorStack checks a report's stack: gVisor's on its AF_XDP
// endpoint, queue 0, no TSO, RX checksum offload csum, qdisc, and
// counters that show frames both ways.
func checkGvisorStack(t *testing.T, who string, r tcpReport, iface string, csum bool, qdisc string) {
	t.Helper()
	s, c := r.Start.TCPStack, r.End.Counters
	if s == nil || c == nil {
		t.Fatalf("%s: no stack or counters in the report", who)
	}
	if s.Name != gvisorxdpplane.Name || s.Interface != iface || len(s.Queues) != 1 || s.Queues[0] != 0 || s.TSO || s.RXChecksumOffload != csum || s.RXCoalesce != nil || s.TXCoalesce != nil || s.QDisc != qdisc {
		t.Errorf("%s: stack %+v, want gvisor-xdp on %s queue 0, no TSO, RX checksum offload %v, qdisc %s", who, *s, iface, csum, qdisc)
	}
	// Every packet the stack wrote goes out as a frame of its own or is
	// dropped, counted (the report may be taken while a sending end still
	// has packets queued: a receiving iperf3 client ends the test at
	// TEST_END), and every frame received reached the stack.
	if c.RXFrames == 0 || c.TXFrames == 0 || c.TXSegmented != 0 || c.OutSegs == 0 || c.InSegs == 0 ||
		c.TXPackets < c.TXFrames+c.TXDropped || c.RXFrames < c.InSegs {
		t.Errorf("%s: counters %+v: want frames and segments both ways, one frame a packet", who, *c)
	}
}

// TestBenchGvisorXDPServerWithIperf3: a real iperf3 client runs TCP tests
// against `xdpio bench server --backend gvisor-xdp` on a 1-queue veth,
// iperf3 sending, then (-R) receiving, then sending over IPv6, one server
// serving all three: each
// test opens gVisor's AF_XDP endpoint on queue 0 and frees it, so the
// next binds the queue again. The bytes agree exactly with iperf3's own
// counts at both ends; the server's report names gVisor's stack. When the
// server stops, no XDP program is left (netlink) and queue 0 is free (the
// kernel binds a new socket to it), and a new server serves another test.
func TestBenchGvisorXDPServerWithIperf3(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const port = 15601
	ps := strconv.Itoa(port)
	srvCtx, stop := context.WithCancel(ctx)
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(srvCtx, &globals{stdout: &out, stderr: &errOut},
			[]string{"bench", "server", "--netns", pair.B.NS, "--backend", "gvisor-xdp", "-i", pair.B.Link, "--port", ps, "--json"})
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	waitListening(ctx, t, pair.B, port)
	dec := json.NewDecoder(&blockingReader{ctx: ctx, b: &out})
	for i, reverse := range []bool{false, true, false} {
		server := pair.B.IPv4.String()
		if i == 2 {
			server = pair.B.IPv6.String() // and over IPv6
		}
		args := []string{"-c", server, "-p", ps, "-t", "1", "-J"}
		if reverse {
			args = append(args, "-R")
		}
		res, err := pair.A.Command(ctx, "iperf3", args...).Output()
		if err != nil {
			t.Fatalf("iperf3 %v: %v\n%s\nserver: %s%s", args, err, res, out.String(), errOut.String())
		}
		th := parseTCPReport(t, "iperf3", res)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("the server's report: %v\n%s%s", err, out.String(), errOut.String())
		}
		o := parseTCPReport(t, "xdpio", raw)
		t.Logf("%s reverse %v: iperf3 sent %d received %d; xdpio sent %d received %d; stack %+v counters %+v", server,
			reverse, th.End.SumSent.Bytes, th.End.SumReceived.Bytes, o.End.SumSent.Bytes, o.End.SumReceived.Bytes, *o.Start.TCPStack, *o.End.Counters)
		// Both reports hold both ends' counts; a receiving iperf3 client
		// stops counting at TEST_END, so in reverse it may count fewer
		// than were sent, and says so to the server.
		if th.End.SumSent.Bytes != o.End.SumSent.Bytes || th.End.SumReceived.Bytes != o.End.SumReceived.Bytes || o.End.SumSent.Bytes == 0 ||
			(!reverse && o.End.SumReceived.Bytes != o.End.SumSent.Bytes) || o.End.SumReceived.Bytes > o.End.SumSent.Bytes || o.End.SumReceived.Bytes == 0 {
			t.Errorf("reverse %v: bytes: iperf3 says sent %d received %d, xdpio says sent %d received %d", reverse,
				th.End.SumSent.Bytes, th.End.SumReceived.Bytes, o.End.SumSent.Bytes, o.End.SumReceived.Bytes)
		}
		checkGvisorStack(t, "server", o, pair.B.Link, true, "fifo")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("server: %v\n%s", err, errOut.String())
	}
	done <- nil // for the cleanup
	if e := errOut.String(); e != "" {
		t.Errorf("server's stderr %q: want nothing", e)
	}
	waitFreed(t, pair.B, "after the server stopped")

	// A new server (text this time) on the same interface and port.
	srv, cli := serveOnceText(t, pair, port, []string{"--backend", "gvisor-xdp", "-i", pair.B.Link}, []string{"--backend", "socket"})
	if !strings.Contains(srv, "TCP stack: gVisor's on gVisor's AF_XDP endpoint (gvisor-xdp) on "+pair.B.Link+", queue 0: no TSO (GSO), RX checksum offload on, qdisc fifo, no coalescing") ||
		!strings.Contains(srv, "Server listening on") || !strings.Contains(srv, "(TCP tests, gvisor-xdp backend)") || !strings.Contains(cli, "receiver") {
		t.Errorf("second server:\n%s\nclient:\n%s", srv, cli)
	}
	waitFreed(t, pair.B, "after the second server")
}

// blockingReader reads what a running command printed so far into b,
// waiting for more (until ctx ends) instead of returning io.EOF.
type blockingReader struct {
	ctx context.Context
	b   *syncBuffer
	off int
}

func (r *blockingReader) Read(p []byte) (int, error) {
	for {
		s := r.b.String()
		if r.off < len(s) {
			n := copy(p, s[r.off:])
			r.off += n
			return n, nil
		}
		select {
		case <-r.ctx.Done():
			return 0, io.ErrUnexpectedEOF
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestBenchGvisorXDPClientWithIperf3: `xdpio bench client --backend
// gvisor-xdp` runs TCP tests against a real iperf3 server, sending and
// (-R) receiving, with the bytes agreeing exactly with iperf3's own
// counts. The receiving run has the endpoint's RX checksum offload off
// and no queueing discipline (--rx-csum off --qdisc none): the stack
// checks every checksum itself, so iperf3's veth sends complete ones
// (its TX checksum offload off), and the report says so.
func TestBenchGvisorXDPClientWithIperf3(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	for i, tc := range []struct {
		name    string
		reverse bool
		args    []string
	}{
		{"client sends", false, nil},
		{"client receives", true, []string{"-R", "--rx-csum", "off", "--qdisc", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if tc.reverse {
				runIn(t, pair.B, "ethtool", "-K", pair.B.Link, "tx", "off")
				defer runIn(t, pair.B, "ethtool", "-K", pair.B.Link, "tx", "on")
			}
			ps := strconv.Itoa(15611 + i)
			srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", ps)
			var srvOut syncBuffer
			srv.Stdout = &srvOut
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			waitListening(ctx, t, pair.B, 15611+i)
			args := append([]string{"bench", "client", "--netns", pair.A.NS, "--backend", "gvisor-xdp", "-i", pair.A.Link,
				"-c", pair.B.IPv4.String(), "--port", ps, "-t", "1", "--json"}, tc.args...)
			var out, errOut syncBuffer
			if err := runWith(ctx, &globals{stdout: &out, stderr: &errOut}, args); err != nil {
				srv.Process.Kill()
				t.Fatalf("bench client: %v\n%s%s", err, out.String(), errOut.String())
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("iperf3 -s: %v\n%s", err, srvOut.String())
			}
			o, th := parseTCPReport(t, "xdpio", []byte(out.String())), parseTCPReport(t, "iperf3", []byte(srvOut.String()))
			t.Logf("xdpio sent %d received %d; iperf3 -s sent %d received %d; stack %+v counters %+v",
				o.End.SumSent.Bytes, o.End.SumReceived.Bytes, th.End.SumSent.Bytes, th.End.SumReceived.Bytes, *o.Start.TCPStack, *o.End.Counters)
			// iperf3 -s -J counts its own side: what it received, or sent.
			theirs := th.End.SumReceived.Bytes
			if tc.reverse {
				theirs = th.End.SumSent.Bytes
			}
			if theirs == 0 || o.End.SumSent.Bytes != theirs || o.End.SumReceived.Bytes != theirs {
				t.Errorf("bytes: xdpio says %d sent and %d received, iperf3 -s %d: want all equal", o.End.SumSent.Bytes, o.End.SumReceived.Bytes, theirs)
			}
			qdisc := "fifo"
			if tc.reverse {
				qdisc = "none"
			}
			checkGvisorStack(t, "client", o, pair.A.Link, !tc.reverse, qdisc)
			if c := o.End.Counters; c.ActiveOpens == 0 || c.InErrs != 0 {
				t.Errorf("client: counters %+v: want its connections dialled, no bad segment", *c)
			}
			waitFreed(t, pair.A, "after the client")
		})
	}
}

// TestBenchGvisorXDPRefusals: the gvisor-xdp backend refuses what it
// cannot run, saying why, and leaves nothing on the interface. A server
// asked for a UDP test by a real iperf3 client refuses it (TCP only), as
// iperf3's server refuses a stream it cannot listen for. On a veth with
// two RX queues, where flows on queue 1 would never reach the stack,
// server and client refuse to start (exit 1) and say how to give it one
// queue; done as said, with its peer sending on one TX queue too, a TCP
// test runs.
func TestBenchGvisorXDPRefusals(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	t.Run("udp test", func(t *testing.T) {
		pair := netnstest.New(t, netnstest.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var out syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- runWith(ctx, &globals{stdout: &out, stderr: &out},
				[]string{"bench", "server", "--netns", pair.B.NS, "--backend", "gvisor-xdp", "-i", pair.B.Link, "--port", "15621", "-1"})
		}()
		waitListening(ctx, t, pair.B, 15621)
		res, _ := pair.A.Command(ctx, "iperf3", "-u", "-c", pair.B.IPv4.String(), "-p", "15621", "-t", "1", "-J").Output()
		var j iperf3JSON
		if err := json.Unmarshal(res, &j); err != nil || !strings.Contains(j.Error, "unable to start stream listener") {
			t.Errorf("iperf3 -u against a gvisor-xdp server: %v, %q: want the server's refusal", err, j.Error)
		}
		err := <-done
		if exitStatus(err) != 1 || !strings.Contains(err.Error(), "the gvisor-xdp backend runs TCP tests only") {
			t.Errorf("server: %v (status %d)\n%s", err, exitStatus(err), out.String())
		}
		waitFreed(t, pair.B, "after the refused UDP test")
	})
	t.Run("two queues", func(t *testing.T) {
		pair := netnstest.New(t, netnstest.Config{Queues: 2})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for _, args := range [][]string{
			{"bench", "server", "--netns", pair.B.NS, "--backend", "gvisor-xdp", "-i", pair.B.Link, "--port", "15622", "-1"},
			{"bench", "client", "--netns", pair.B.NS, "--backend", "gvisor-xdp", "-i", pair.B.Link, "-c", pair.A.IPv4.String(), "--port", "15622", "-t", "1"},
		} {
			var out syncBuffer
			err := runWith(ctx, &globals{stdout: &out, stderr: &out}, args)
			if exitStatus(err) != 1 || !strings.Contains(err.Error(), pair.B.Link+" has 2 RX queues") ||
				!strings.Contains(err.Error(), "xdpio channels set "+pair.B.Link+" --rx 1") {
				t.Errorf("bench %s on 2 RX queues: %v (status %d), want status 1 and why", args[1], err, exitStatus(err))
			}
		}
		if xdpAttached(t, pair.B) {
			t.Error("an XDP program left after the refusals")
		}
		for _, set := range [][]string{
			{"--netns", pair.B.NS, "channels", "set", pair.B.Link, "--rx", "1"},
			{"--netns", pair.A.NS, "channels", "set", pair.A.Link, "--tx", "1"},
		} {
			var out syncBuffer
			if err := runWith(ctx, &globals{stdout: &out, stderr: &out}, set); err != nil {
				t.Fatalf("%q: %v\n%s", set, err, out.String())
			}
		}
		srv, cli := serveOnceText(t, pair, 15623, []string{"--backend", "gvisor-xdp", "-i", pair.B.Link}, []string{"--backend", "socket", "-P", "2"})
		if !strings.Contains(srv, "(gvisor-xdp) on "+pair.B.Link) || !strings.Contains(cli, "[SUM]") {
			t.Errorf("one RX queue: server\n%s\nclient\n%s", srv, cli)
		}
	})
}
