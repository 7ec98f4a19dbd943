package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpio/xdpio/bench/asavieplane"
	"github.com/xdpio/xdpio/bench/internal/planetest"
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// startServerWith runs our Server with data plane dp in B on port and
// returns a channel with each test's report (and error).
func startServerWith(t *testing.T, pair *netnstest.Pair, port int, dp plane.DataPlane) <-chan reportErr {
	t.Helper()
	var ln net.Listener
	if err := pair.B.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv4, uint16(port)).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ch := make(chan reportErr, 16)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{DataPlane: dp, OnReport: func(r *Report, err error) {
		select {
		case ch <- reportErr{r, err}:
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
	return ch
}

// queueCounts collects what OnClose reports.
type queueCounts struct {
	mu  sync.Mutex
	got [][]plane.QueueCount
}

func (q *queueCounts) record(qs []plane.QueueCount) {
	q.mu.Lock()
	q.got = append(q.got, qs)
	q.mu.Unlock()
}

func (q *queueCounts) take() [][]plane.QueueCount {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.got
	q.got = nil
	return g
}

// xdpAttached reports whether h's interface has an XDP program, as the
// kernel's link dump says.
func xdpAttached(t *testing.T, h *netnstest.Host) bool {
	t.Helper()
	var l netlink.Link
	if err := h.Do(func() (err error) {
		l, err = netlink.LinkByIndex(h.Ifindex)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

// TestAsavieServerFromSocketClient: our client in A on kernel sockets, the
// server in B on asavie's sockets, forward and -R. Oracles: the kernel's
// UDP counters (in B nothing of the test reaches the kernel's UDP: every
// datagram went through the AF_XDP sockets; with -R, A's kernel delivered
// what the asavie sockets sent), asavie's own RX statistics per queue (sum
// = datagrams + the 3 setup messages), and the sender's count. Afterwards
// no XDP program is left on B's interface (the kernel's link dump).
func TestAsavieServerFromSocketClient(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var qc queueCounts
	dp := &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do, OnClose: qc.record}
	reports := startServerWith(t, pair, 5201, dp)
	for _, reverse := range []bool{false, true} {
		t.Run("reverse="+strconv.FormatBool(reverse), func(t *testing.T) {
			inA, inB := udpInDatagrams(t, pair.A), udpInDatagrams(t, pair.B)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := &Client{UDP: true, Server: netip.AddrPortFrom(pair.B.IPv4, 5201), DataPlane: &kernelplane.DataPlane{Do: pair.A.Do},
				Dial: nsDial(pair.A), Streams: 3, Duration: time.Second, Bitrate: 20e6, Reverse: reverse, Length: 1000}
			rep, err := c.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var srep reportErr
			select {
			case srep = <-reports:
			case <-ctx.Done():
				t.Fatal("no server report")
			}
			if srep.err != nil {
				t.Fatalf("server: %v", srep.err)
			}
			s, r := rep.End.SumSent, rep.End.SumReceived
			t.Logf("sent %d, received %d, lost %d", s.Packets, r.Packets, r.LostPackets)
			if s.Packets < 7000 || r.Packets != s.Packets || r.LostPackets != 0 || r.Bytes != s.Bytes {
				t.Errorf("sent %+v received %+v: want about 7500 (3 × 20 Mbit/s for 1 s) datagrams, all received", s, r)
			}
			if srep.rep.End.SumSent != s || srep.rep.End.SumReceived.Packets != r.Packets {
				t.Errorf("server's totals %+v / %+v differ from client's %+v / %+v", srep.rep.End.SumSent, srep.rep.End.SumReceived, s, r)
			}
			dA, dB := udpInDatagrams(t, pair.A)-inA, udpInDatagrams(t, pair.B)-inB
			if dB != 0 {
				t.Errorf("B's kernel delivered %d UDP datagrams; all should have gone to the asavie sockets", dB)
			}
			if reverse && dA != r.Packets+3 {
				t.Errorf("A's kernel delivered %d datagrams, want the %d received + 3 setup replies", dA, r.Packets)
			}
			// The server's endpoint is closed when its report is out.
			got := qc.take()
			if len(got) != 1 || len(got[0]) != 2 {
				t.Fatalf("OnClose calls %v: want one with 2 queues", got)
			}
			var sum uint64
			for _, q := range got[0] {
				sum += q.Packets
				if q.Dropped != 0 {
					t.Errorf("queue %d: kernel dropped %d", q.Queue, q.Dropped)
				}
			}
			want := uint64(3) // setup messages
			if !reverse {
				want += uint64(r.Packets)
			}
			if sum != want {
				t.Errorf("asavie's RX statistics: %d frames over the queues %v, want %d", sum, got[0], want)
			}
			if xdpAttached(t, pair.B) {
				t.Error("an XDP program is still attached to B's interface after the test")
			}
		})
	}
}

// TestIperf3ClientAgainstAsavieServer runs Debian's iperf3 client in A
// against our Server on asavie's sockets in B. Oracle: iperf3's JSON
// report (what it sent, what our server says it received).
func TestIperf3ClientAgainstAsavieServer(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var qc queueCounts
	reports := startServerWith(t, pair, 5201, &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do, OnClose: qc.record})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"50M", nil},
		{"P4", []string{"-P", "4"}},
		{"reverse", []string{"-R", "-b", "20M"}},
		{"len64", []string{"-l", "64", "-b", "10M"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"-c", pair.B.IPv4.String(), "-u", "-b", "50M", "-t", "1", "-J"}, tc.args...)
			inA, bufErrA := udpInDatagrams(t, pair.A), udpRefused(t, pair.A)
			snapA, _ := pair.A.Counters()
			txB, rxA := linkStats(t, pair.B), linkStats(t, pair.A)
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
			case r := <-reports:
				if r.err != nil {
					t.Fatalf("server: %v", r.err)
				}
				rep = r.rep
			case <-ctx.Done():
				t.Fatal("no server report")
			}
			sent, recv := j.End.SumSent, j.End.SumReceived
			t.Logf("iperf3 %v: sent %d packets %d bytes; received %d packets %d bytes, lost %d, jitter %.4f ms; asavie's queues %+v",
				tc.args, sent.Packets, sent.Bytes, recv.Packets, recv.Bytes, recv.LostPackets, recv.JitterMS, qc.take())
			if sent.Packets == 0 {
				t.Fatal("nothing sent")
			}
			if rep.End.SumSent.Packets != sent.Packets || rep.End.SumReceived.Packets != recv.Packets {
				t.Errorf("our report: sent %d received %d; iperf3's: sent %d received %d",
					rep.End.SumSent.Packets, rep.End.SumReceived.Packets, sent.Packets, recv.Packets)
			}
			if n := int64(j.Start.TestStart.NumStreams); tc.name == "reverse" {
				// Our server sent through asavie. Oracle: A's kernel got
				// every datagram (and the setup reply); iperf3 reads one
				// per syscall and may not keep up on a loaded machine, so
				// its losses must be ones its full socket buffer refused.
				// It stops counting at TEST_END: datagrams in flight then
				// are neither received nor lost.
				// B's veth must have sent every frame asavie's TX ring
				// took; what A's veth dropped (a full backlog on a loaded
				// machine) is the kernel's, and counted.
				// The last frames may still be on their way through A's
				// backlog when the report arrives: read until the counts
				// add up or stop moving (1 s at most).
				var dIn, dBufErr, dTX, dDrop int64
				for settle := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
					dIn, dBufErr = udpInDatagrams(t, pair.A)-inA, udpRefused(t, pair.A)-bufErrA
					txB2, rxA2 := linkStats(t, pair.B), linkStats(t, pair.A)
					dTX = int64(txB2.TxPackets - txB.TxPackets)
					dDrop = int64(rxA2.RxDropped-rxA.RxDropped) + int64(txB2.TxDropped-txB.TxDropped)
					if dIn+dBufErr+dDrop >= sent.Packets+n || time.Now().After(settle) {
						break
					}
				}
				t.Logf("server's veth: sent %d frames; client's veth dropped %d; client's kernel: UDP in %d, refused (buffer full or port closed) %d", dTX, dDrop, dIn, dBufErr)
				if dTX < sent.Packets+n {
					t.Errorf("B's veth sent %d frames, want at least the %d datagrams our server sent through asavie + %d setup replies", dTX, sent.Packets, n)
				}
				// Up to 2 datagrams of the ~1700 have been seen missing
				// in about 1 run in 30 (and in full CI runs more often)
				// with no kernel counter moving on either side: A's IP
				// layer received as many packets as in runs without the
				// gap, and asavie's sockets completed every frame they
				// transmitted. Tolerated, and logged, until it is
				// explained; more than that fails.
				if got, want := dIn+dBufErr+dDrop, sent.Packets+n; got != want {
					m, _ := pair.A.Counters()
					var moved []string
					for k, v := range m {
						if d := v - snapA[k]; d != 0 && (strings.HasPrefix(k, "Ip") || strings.HasPrefix(k, "Udp")) {
							moved = append(moved, fmt.Sprintf("%s+%d", k, d))
						}
					}
					sort.Strings(moved)
					msg := fmt.Sprintf("client's kernel: %d datagrams delivered + %d refused + %d dropped by the veth, want the %d our server sent + %d setup replies; A's IP and UDP counters that moved: %v",
						dIn, dBufErr, dDrop, sent.Packets, n, moved)
					// A few datagrams that asavie's socket saw complete never
					// show in the server veth's tx_packets (seen in CI: 1742
					// frames = 1725 UDP + 16 TCP control + 1 IPv6 multicast
					// for 1727 sent), so they were lost inside the kernel
					// between the AF_XDP copy-mode TX and veth, on the peer's
					// path: tolerated up to 4, logged as a known gap.
					if got > want || want-got > 4 {
						t.Error(msg)
					} else {
						t.Log("KNOWN GAP: " + msg)
					}
				}
				if recv.LostPackets > dBufErr || recv.Packets > sent.Packets || recv.Packets-recv.LostPackets > dIn-n || recv.Packets < sent.Packets/2 {
					t.Errorf("iperf3 received %d (lost %d) of the %d packets our server sent through asavie", recv.Packets, recv.LostPackets, sent.Packets)
				}
			} else if recv.Packets != sent.Packets || recv.Bytes != sent.Bytes || recv.LostPackets != 0 {
				t.Errorf("server received %d packets/%d bytes (lost %d), iperf3 sent %d/%d", recv.Packets, recv.Bytes, recv.LostPackets, sent.Packets, sent.Bytes)
			}
			if n := j.Start.TestStart.NumStreams; len(j.End.Streams) != n {
				t.Errorf("iperf3 shows %d streams, want %d", len(j.End.Streams), n)
			}
		})
	}
	if xdpAttached(t, pair.B) {
		t.Error("an XDP program is still attached to B's interface")
	}
}

// TestAsavieClientAgainstIperf3Server runs our Client on asavie's sockets
// in A against a one-off Debian iperf3 server in B, forward with 2 streams
// and reverse. Oracle: the server's -J report.
func TestAsavieClientAgainstIperf3Server(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	for i, tc := range []struct {
		name string
		c    Client
	}{
		{"P2", Client{UDP: true, Bitrate: 10e6, Streams: 2}}, // iperf3 -s reads one datagram per syscall into a 208 KiB buffer: on a loaded machine faster bursts overflow it (UdpRcvbufErrors)
		{"reverse", Client{UDP: true, Bitrate: 10e6, Reverse: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			port := 5401 + i
			srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
			var out bytes.Buffer
			srv.Stdout = &out
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Process.Kill()
			var qc queueCounts
			c := tc.c
			c.Server = netip.AddrPortFrom(pair.B.IPv4, uint16(port))
			c.Duration = time.Second
			c.DataPlane = &asavieplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do, OnClose: qc.record}
			c.Dial = func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
				for try := 0; try < 50; try++ { // until iperf3 listens
					if conn, err = nsDial(pair.A)(ctx, network, addr); err == nil {
						return conn, nil
					}
					time.Sleep(50 * time.Millisecond)
				}
				return nil, err
			}
			inB, bufErrB := udpInDatagrams(t, pair.B), udpRcvbufErrors(t, pair.B)
			rep, err := c.Run(ctx)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("iperf3 -s: %v\n%s", err, out.Bytes())
			}
			j := parseIperf(t, out.Bytes())
			if j.Error != "" {
				t.Fatalf("iperf3 server reports error: %s", j.Error)
			}
			dIn, dBufErr := udpInDatagrams(t, pair.B)-inB, udpRcvbufErrors(t, pair.B)-bufErrB
			sent, recv := j.End.SumSent, j.End.SumReceived
			t.Logf("iperf3 -s: sent %d received %d lost %d; ours: sent %d received %d lost %d; server's kernel: UDP in %d, receive buffer full %d",
				sent.Packets, recv.Packets, recv.LostPackets, rep.End.SumSent.Packets, rep.End.SumReceived.Packets, rep.End.SumReceived.LostPackets, dIn, dBufErr)
			streams := int64(max(1, tc.c.Streams))
			if !c.Reverse {
				// iperf3's packets is the highest sequence number it saw,
				// lost the gaps. On a loaded machine iperf3 -s may not keep
				// up and its socket buffer overflow: every datagram we sent
				// must have reached its kernel, and iperf3 must have read
				// every one its kernel did not refuse.
				ours := rep.End.SumSent.Packets
				if dIn+dBufErr != ours+streams {
					t.Errorf("server's kernel: %d datagrams delivered + %d refused (buffer full), want our %d + %d setup", dIn, dBufErr, ours, streams)
				}
				if got := recv.Packets - recv.LostPackets; got != dIn-streams || recv.Packets > ours || recv.Packets < ours-dBufErr {
					t.Errorf("iperf3 read %d datagrams (sequence numbers up to %d), its kernel delivered %d of our %d", got, recv.Packets, dIn-streams, ours)
				}
				if bl := rep.Start.TestStart.Blksize; recv.Bytes != uint64(dIn-streams)*uint64(bl) {
					t.Errorf("iperf3 received %d bytes, want %d datagrams of %d", recv.Bytes, dIn-streams, bl)
				}
			} else if sent.Packets == 0 || sent.Packets != rep.End.SumReceived.Packets || sent.Bytes != rep.End.SumReceived.Bytes || rep.End.SumReceived.LostPackets != 0 {
				t.Errorf("we received %d packets/%d bytes (lost %d) through asavie, iperf3 sent %d/%d",
					rep.End.SumReceived.Packets, rep.End.SumReceived.Bytes, rep.End.SumReceived.LostPackets, sent.Packets, sent.Bytes)
			}
			if len(j.End.Streams) != max(1, tc.c.Streams) {
				t.Errorf("iperf3 saw %d streams, want %d", len(j.End.Streams), max(1, tc.c.Streams))
			}
			if got := qc.take(); len(got) != 1 || len(got[0]) != 2 {
				t.Errorf("OnClose calls %v: want one, when the last stream closed, with 2 queues", got)
			}
			if xdpAttached(t, pair.A) {
				t.Error("an XDP program is still attached to A's interface")
			}
		})
	}
}

// TestAsavieQueueReadersAndClose: datagrams from kernel sockets in A on 8
// source ports are all read in place by the per-queue readers with
// payload and source intact; Close while the readers wait wakes them with
// net.ErrClosed, removes the XDP program and frees the queues, so a
// second Listen binds them again.
func TestAsavieQueueReadersAndClose(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	local := netip.AddrPortFrom(pair.B.IPv4, 5301)
	dp := &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}
	pc, err := dp.Listen(local)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if !xdpAttached(t, pair.B) {
		t.Fatal("Listen attached no XDP program")
	}
	qrs := pc.(plane.MultiQueueConn).QueueReaders()
	if len(qrs) != 2 {
		t.Fatalf("%d queue readers, want 2", len(qrs))
	}
	planetest.ReadAllThenClose(t, pc, qrs, pair.A, local)
	if _, err := pc.ReadBatch(make([]plane.Message, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadBatch after Close: %v, want net.ErrClosed", err)
	}
	if xdpAttached(t, pair.B) {
		t.Error("an XDP program is still attached after Close")
	}
	// The queues are free again: the next backend can bind them.
	pc2, err := dp.Listen(local)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	if err := pc2.Close(); err != nil {
		t.Fatal(err)
	}
}

// udpRcvbufErrors reads Udp RcvbufErrors (datagrams refused because the
// socket's buffer was full) in h's namespace.
func udpRcvbufErrors(t *testing.T, h *netnstest.Host) int64 {
	t.Helper()
	return netnstest.Counter(t, h, "UdpRcvbufErrors")
}

// udpRefused is what A's kernel took in but could deliver to no socket:
// refused for a full receive buffer, or for no socket on the port (iperf3
// closes its socket when the test ends, and datagrams still in flight
// then arrive to nobody).
func udpRefused(t *testing.T, h *netnstest.Host) int64 {
	t.Helper()
	return netnstest.Counter(t, h, "UdpRcvbufErrors") + netnstest.Counter(t, h, "UdpNoPorts")
}

// TestBackendsInTurn opens and closes xsk and asavie endpoints on one
// interface alternately, as `xdpio bench demo` does. Oracles: the kernel
// binds each backend's sockets to queues the previous one just left
// (asavie's leaked rings would make that EBUSY), delivers a datagram to
// each, and its link dump shows no XDP program at the end.
func TestBackendsInTurn(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	local := netip.AddrPortFrom(pair.B.IPv4, 5311)
	var uc *net.UDPConn
	if err := pair.A.Do(func() (err error) {
		uc, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(local))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	for round := 0; round < 2; round++ {
		for _, dp := range []plane.DataPlane{
			&xskplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do},
			&asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do},
		} {
			pc, err := dp.Listen(local)
			if err != nil {
				t.Fatalf("round %d, %T: %v", round, dp, err)
			}
			msg := fmt.Sprintf("round %d %T", round, dp)
			if _, err := uc.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			msgs := []plane.Message{{Buf: make([]byte, 2048)}}
			pc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := pc.ReadBatch(msgs)
			if err != nil || n != 1 || string(msgs[0].Buf[:msgs[0].N]) != msg || msgs[0].Addr != uc.LocalAddr().(*net.UDPAddr).AddrPort() {
				t.Errorf("%s: read %d %v %q from %v", msg, n, err, msgs[0].Buf[:msgs[0].N], msgs[0].Addr)
			}
			if err := pc.Close(); err != nil {
				t.Fatalf("%s: close: %v", msg, err)
			}
		}
	}
	if xdpAttached(t, pair.B) {
		t.Error("an XDP program is still attached")
	}
}

// TestIperf3IPv6AgainstAsavieServer: iperf3 -6 with 2 streams against our
// server on asavie's sockets, on B's IPv6 address. Oracle: iperf3's JSON.
func TestIperf3IPv6AgainstAsavieServer(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.B.IPv6, 5201).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := &Server{DataPlane: &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}}
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
	if s.Packets == 0 || r.Packets != s.Packets || r.LostPackets != 0 || r.Bytes != s.Bytes {
		t.Errorf("sent %d, server received %d lost %d", s.Packets, r.Packets, r.LostPackets)
	}
}

// TestAsavieResolvesMissingNeighbours: with the peers' neighbour entries
// deleted, the asavie client (Dial) and server (a reply) have the kernel
// resolve them, and their datagrams arrive at kernel sockets; a dial to an
// address without a route says so and leaves no XDP program attached
// (the kernel's link dump).
func TestAsavieResolvesMissingNeighbours(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	forgetNeighbours(t, pair.A, pair.B.IPv4)
	forgetNeighbours(t, pair.B, pair.A.IPv4)

	server := netip.AddrPortFrom(pair.B.IPv4, 5501)
	rx := listenUDPIn(t, pair.B, server)
	dp := &asavieplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do}
	c, err := dp.Dial(server)
	if err != nil {
		t.Fatalf("dial %v without a neighbour entry: %v", server, err)
	}
	if n, err := c.WriteBatch([]plane.Message{{Buf: []byte("hello"), N: 5}}); n != 1 {
		t.Fatalf("write: %d, %v", n, err)
	}
	expectRead(t, rx, "hello")
	c.Close()

	pc, err := (&asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}).Listen(netip.AddrPortFrom(pair.B.IPv4, 5502))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	client := netip.AddrPortFrom(pair.A.IPv4, 5503)
	rx = listenUDPIn(t, pair.A, client)
	if n, err := pc.WriteBatch([]plane.Message{{Buf: []byte("reply"), N: 5, Addr: client}}); n != 1 {
		t.Fatalf("server write: %d, %v", n, err)
	}
	expectRead(t, rx, "reply")

	// Nothing routes TEST-NET-3 (no default route in the namespace).
	if c, err := dp.Dial(netip.AddrPortFrom(netip.MustParseAddr("203.0.113.1"), 5201)); err == nil {
		c.Close()
		t.Error("dial 203.0.113.1: no error")
	} else if !strings.Contains(err.Error(), "no route to 203.0.113.1") {
		t.Errorf("dial 203.0.113.1: %v; want it to say there is no route", err)
	}
	if xdpAttached(t, pair.A) {
		t.Error("an XDP program is still attached after the failed dial")
	}
}

// TestAsavieCheck: Check opens and closes everything (no XDP program
// left, per the kernel's link dump); a missing interface is
// xsk.ErrNoDevice; queues an xsk socket holds are xsk.ErrBusy, as the
// kernel's bind refuses them, and the failed open leaves nothing attached
// beyond xsk's own program.
func TestAsavieCheck(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	dp := &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}
	if err := dp.Check(); err != nil {
		t.Fatal(err)
	}
	if xdpAttached(t, pair.B) {
		t.Error("Check left an XDP program attached")
	}
	if err := (&asavieplane.DataPlane{Iface: "nonexistent0", Do: pair.B.Do}).Check(); !errors.Is(err, xsk.ErrNoDevice) {
		t.Errorf("Check of a missing interface: %v, want xsk.ErrNoDevice", err)
	}
	var dev *xsk.Device
	if err := pair.B.Do(func() (err error) {
		dev, err = xsk.Open(pair.B.Link, xsk.Config{Queues: []int{1}, NoProgram: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	err := dp.Check()
	if !errors.Is(err, xsk.ErrBusy) {
		t.Errorf("Check with queue 1 bound by another socket: %v, want xsk.ErrBusy", err)
	}
	t.Logf("%v", err)
	if xdpAttached(t, pair.B) {
		t.Error("the failed Check left an XDP program attached")
	}
}

// TestAsavieCheckUnprivileged runs Check in B as nobody with no
// capabilities (through setpriv): the kernel refuses the AF_XDP socket,
// and the error is xsk.ErrPermission, which says to run as root.
func TestAsavieCheckUnprivileged(t *testing.T) {
	setpriv := netnstest.RequireTool(t, "setpriv")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := pair.B.Command(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", os.Args[0], "-test.run=^TestHelperAsavieCheck$")
	cmd.Env = append(os.Environ(), "XDPIO_HELPER_ASAVIE_IFACE="+pair.B.Link)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "result: permission: ") || !strings.Contains(string(out), "run as root") {
		t.Errorf("unprivileged Check: %v\n%s", err, out)
	}
	if xdpAttached(t, pair.B) {
		t.Error("an XDP program is attached after the refused Check")
	}
}

// TestHelperAsavieCheck runs in TestAsavieCheckUnprivileged's child
// process, without privileges.
func TestHelperAsavieCheck(t *testing.T) {
	iface := os.Getenv("XDPIO_HELPER_ASAVIE_IFACE")
	if iface == "" {
		t.Skip("helper of TestAsavieCheckUnprivileged")
	}
	err := (&asavieplane.DataPlane{Iface: iface}).Check()
	if errors.Is(err, xsk.ErrPermission) {
		fmt.Printf("result: permission: %v\n", err)
	} else {
		fmt.Printf("result: unexpected: %v\n", err)
	}
}

// recvRate keeps BenchmarkReceive's packets/s per frame size and backend
// (every run, with -count), for the ratios of the later backends to the
// median of the earlier ones.
var recvRate = map[string][]float64{}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkReceive compares the receive paths of the three data planes
// in one binary: kernel UDP sockets (recvmmsg, copying, as the server
// reads them), xdpio's AF_XDP sockets and asavie/xdp's (per-queue
// readers, in place, as the server reads them). A one-queue veth pair;
// the same XDP live-frames generator (internal/trafficgen) floods B's
// port from A faster than any receiver keeps up. One op is one datagram
// taken from the backend and its first payload byte read; pkts/s is what
// the receiver sustained, delivered the share of the offered frames it
// got, x-socket and x-xsk the ratios to the median of the earlier
// backends' runs in the same binary (go test runs each sub-benchmark
// -count times before the next).
//
//	go test -run '^$' -bench BenchmarkReceive -benchtime 2s ./bench
func BenchmarkReceive(b *testing.B) {
	netnstest.RequireTool(b, "ethtool")
	pair := netnstest.New(b, netnstest.Config{})
	// Without an XDP program on B, frames sent by A's XDP program reach
	// the kernel socket only when B's veth runs NAPI, which GRO turns on.
	if out, err := pair.B.Command(context.Background(), "ethtool", "-K", pair.B.Link, "gro", "on").CombinedOutput(); err != nil {
		b.Fatalf("ethtool -K gro on: %v: %s", err, out)
	}
	const port = 7777
	local := netip.AddrPortFrom(pair.B.IPv4, port)
	for _, size := range []int{64, 1500} {
		var gen *trafficgen.Generator
		if err := pair.A.Do(func() (err error) {
			gen, err = trafficgen.New(trafficgen.Config{Ifindex: pair.A.Ifindex, Flows: 64, Frame: trafficgen.FrameSpec{
				SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC, Src: pair.A.IPv4, Dst: pair.B.IPv4,
				SrcPort: 40000, DstPort: port, Size: size,
			}})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		defer gen.Close()
		payload := size - 14 - 20 - 8
		for _, be := range []struct {
			name string
			dp   plane.DataPlane
		}{
			{"socket", &kernelplane.DataPlane{Do: pair.B.Do}},
			{"xsk", &xskplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}},
			{"asavie", &asavieplane.DataPlane{Iface: pair.B.Link, Do: pair.B.Do}},
		} {
			b.Run(fmt.Sprintf("size=%d/backend=%s", size, be.name), func(b *testing.B) {
				pc, err := be.dp.Listen(local)
				if err != nil {
					b.Fatal(err)
				}
				defer pc.Close()
				msgs := make([]plane.Message, plane.BatchSize)
				for i := range msgs {
					msgs[i].Buf = make([]byte, 2048)
				}
				read := func() (int, error) {
					return pc.ReadBatch(msgs)
				}
				if mq, ok := pc.(plane.MultiQueueConn); ok {
					q := mq.QueueReaders()[0]
					defer q.Done()
					read = func() (int, error) { return q.ReadView(msgs, time.Second) }
				}
				pc.SetReadDeadline(time.Now().Add(time.Minute))

				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := gen.Run(ctx, 0, time.Minute)
					done <- err
				}()
				defer func() {
					cancel()
					if err := <-done; err != nil {
						b.Error(err)
					}
				}()
				// Warm up: until the flood arrives and for 200 ms more.
				for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
					if _, err := read(); err != nil {
						b.Fatal(err)
					}
				}
				sent0, _ := gen.Sent()
				have, next, sum := 0, 0, 0
				b.SetBytes(int64(payload))
				b.ReportAllocs()
				for b.Loop() {
					for next == have {
						if have, err = read(); err != nil {
							b.Fatal(err)
						}
						next = 0
					}
					if msgs[next].N != payload {
						b.Fatalf("datagram of %d bytes, want %d", msgs[next].N, payload)
					}
					sum += int(msgs[next].Buf[0])
					next++
				}
				el := b.Elapsed().Seconds()
				sent1, _ := gen.Sent()
				pps := float64(b.N) / el
				b.ReportMetric(pps, "pkts/s")
				b.ReportMetric(float64(b.N)/float64(sent1-sent0), "delivered")
				for _, ref := range []string{"socket", "xsk"} {
					if r := median(recvRate[fmt.Sprint(size, ref)]); r > 0 && ref != be.name {
						b.ReportMetric(pps/r, "x-"+ref)
					}
				}
				key := fmt.Sprint(size, be.name)
				recvRate[key] = append(recvRate[key], pps)
				_ = sum
			})
		}
	}
}

// linkStats reads the kernel's counters of h's interface.
func linkStats(t *testing.T, h *netnstest.Host) netlink.LinkStatistics {
	t.Helper()
	var l netlink.Link
	if err := h.Do(func() (err error) {
		l, err = netlink.LinkByIndex(h.Ifindex)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Statistics == nil {
		t.Fatal("no link statistics")
	}
	return *l.Attrs().Statistics
}
