package tcpplane

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/xskplane"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// testCounter is a Counter that sums what it is told.
type testCounter struct {
	mu       sync.Mutex
	bytes    uint64
	segments int64
	recv     iperf3.TCPReceiverStream
}

func (c *testCounter) AddSent(bytes uint64, segments int64) {
	c.mu.Lock()
	c.bytes += bytes
	c.segments += segments
	c.mu.Unlock()
}

func (c *testCounter) SetReceived(in iperf3.TCPReceiverStream) {
	c.mu.Lock()
	c.recv = in
	c.mu.Unlock()
}

// TestTCPSenderOnTheWire sends the stream from A with no receiver in B, so
// that B's kernel takes it: tcpdump captures it on B's veth and tshark,
// with checksum validation on, reads it back; B's kernel TCP checks every
// checksum too (TcpInCsumErrors). Oracles: tshark's TCP and IPv4 checksum
// status, its sequence numbers and lengths, and the kernel's counters.
// The writes are 10 full segments and a short one, so the segment sizes
// and the PSH pattern show how each write was cut. A fifth run corrupts
// one segment, which both oracles must flag.
func TestTCPSenderOnTheWire(t *testing.T) {
	netnstest.RequireTool(t, "tcpdump")
	netnstest.RequireTool(t, "tshark")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	pcap := filepath.Join(t.TempDir(), "tcp.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One capture for the four runs (one data port each), read by one
	// tshark run.
	const port0 = 5990
	stop := capture(t, ctx, pair.B, pcap, fmt.Sprintf("tcp dst portrange %d-%d", port0, port0+4))
	type run struct {
		name string
		v6   bool
		mss  int
		isn  uint32
		sent iperf3.TCPSenderStream
	}
	var runs []run
	csumB, segsB := netnstest.Counter(t, pair.B, "TcpInCsumErrors"), netnstest.Counter(t, pair.B, "TcpInSegs")
	// The fifth run corrupts one segment after its checksums were filled:
	// the oracles must see it.
	for k, v := range []struct{ v6, tso, corrupt bool }{{false, false, false}, {false, true, false}, {true, false, false}, {true, true, false}, {false, true, true}} {
		v6, tso := v.v6, v.tso
		var corrupt func(int, int64, []byte)
		if v.corrupt {
			corrupt = func(_ int, seg int64, f []byte) {
				if seg == 5 {
					f[len(f)-1] ^= 1
				}
			}
		}
		r := run{name: fmt.Sprintf("%d: v6=%v/tso=%v/corrupt=%v", k, v6, tso, v.corrupt), v6: v6}
		dst := pair.B.IPv4
		if v6 {
			dst = pair.B.IPv6
		}
		dp := &xskplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do}
		var err error
		if r.mss, err = LocalMSS(dp, dst); err != nil {
			t.Fatal(err)
		}
		snd, err := OpenSender(dp, SenderConfig{Server: netip.AddrPortFrom(dst, uint16(port0+len(runs))), Streams: 1, MSS: r.mss, TSO: tso,
			Write: 10*r.mss + 123, Rate: 20e6, Corrupt: corrupt})
		if err != nil {
			t.Fatal(err)
		}
		var ctr testCounter
		snd.Start([]Counter{&ctr}, time.Now())
		time.Sleep(300 * time.Millisecond)
		stats, err := snd.Stop()
		snd.Close()
		if err != nil {
			t.Fatal(err)
		}
		r.isn, r.sent = snd.Flows()[0].ISN, stats.Streams[0]
		if ctr.bytes != r.sent.Bytes || ctr.segments != r.sent.Segments {
			t.Errorf("%s: counted %d bytes in %d segments, the sender's figures %+v", r.name, ctr.bytes, ctr.segments, r.sent)
		}
		if r.sent.Segments < 100 {
			t.Fatalf("%s: sent only %d segments", r.name, r.sent.Segments)
		}
		runs = append(runs, r)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	var total int64
	for _, r := range runs {
		total += r.sent.Segments
	}
	if d := netnstest.Counter(t, pair.B, "TcpInCsumErrors") - csumB; d != 1 {
		t.Errorf("B's kernel counted %d TCP checksum errors, want 1 (the corrupted segment)", d)
	}
	if d := netnstest.Counter(t, pair.B, "TcpInSegs") - segsB; d < total {
		t.Errorf("B's kernel received %d TCP segments, the senders sent %d", d, total)
	}
	rows := tsharkRows(t, pcap)
	for i, r := range runs {
		got := rows[port0+i]
		if int64(len(got)) != r.sent.Segments {
			t.Errorf("%s: tshark sees %d segments, the sender sent %d", r.name, len(got), r.sent.Segments)
		}
		// Each write is 10 full segments and a 123-byte one with PSH.
		seq := r.isn
		var bytes uint64
		for j, x := range got {
			last := j%11 == 10
			want := r.mss
			if last {
				want = 123
			}
			status := "1" // good
			if i == 4 && j == 5 {
				status = "0" // bad
			}
			if x.seq != seq || x.len != want || x.psh != last || x.tcpStatus != status || (!r.v6 && x.ipStatus != "1") {
				t.Errorf("%s: segment %d: tshark %+v; want seq %d len %d psh %v, TCP checksum status %s", r.name, j, x, seq, want, last, status)
				break
			}
			seq += uint32(x.len)
			bytes += uint64(x.len)
		}
		if bytes != r.sent.Bytes {
			t.Errorf("%s: tshark counts %d payload bytes, the sender %d", r.name, bytes, r.sent.Bytes)
		}
	}
}

// capture runs tcpdump in h on its veth until the returned stop is called.
// Immediate mode makes libpcap use fixed-size ring slots as large as the
// snapshot length: a small one (the frames are at most 1514 bytes) gives
// the ring thousands of slots, so a capture that the scheduler keeps
// waiting loses nothing.
func capture(t *testing.T, ctx context.Context, h *netnstest.Host, file, filter string) (stop func()) {
	t.Helper()
	cmd := h.Command(ctx, "tcpdump", "-i", h.Link, "-n", "-U", "--immediate-mode", "-s", "2048", "-B", "8192", "-w", file, filter)
	errp, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errp)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "listening on") {
				once = true
				close(ready)
			}
		}
		if !once {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("tcpdump did not start")
	}
	return func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
}

type tsharkRow struct {
	seq                 uint32
	len                 int
	psh                 bool
	tcpStatus, ipStatus string
}

// tsharkRows reads a capture with tshark, TCP and IPv4 checksum
// validation on, and returns its TCP segments by destination port.
func tsharkRows(t *testing.T, file string) map[int][]tsharkRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"-r", file, "-n", "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE", "-o", "tcp.relative_sequence_numbers:FALSE",
		"-T", "fields", "-E", "separator=,", "-e", "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.len", "-e", "tcp.flags.push", "-e", "tcp.checksum.status", "-e", "ip.checksum.status"}
	out, err := exec.CommandContext(ctx, "tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	rows := map[int][]tsharkRow{}
	for _, ln := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ln == "" {
			continue
		}
		f := strings.Split(ln, ",")
		if len(f) < 6 {
			t.Fatalf("tshark line %q", ln)
		}
		port, err0 := strconv.Atoi(f[0])
		seq, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.Atoi(f[2])
		if err0 != nil || err1 != nil || err2 != nil {
			t.Fatalf("tshark line %q", ln)
		}
		rows[port] = append(rows[port], tsharkRow{seq: uint32(seq), len: n, psh: f[3] == "1" || f[3] == "True", tcpStatus: f[4], ipStatus: f[5]})
	}
	return rows
}

// The sender finds the next hop's MAC in the neighbour table and, when
// the kernel has no entry, makes it resolve one (ARP, neighbour
// discovery). Oracle: the kernel's table before and after.
func TestTCPSenderResolvesNeighbour(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if out, err := pair.A.Command(ctx, "ip", "neigh", "del", dst.String(), "dev", pair.A.Link).CombinedOutput(); err != nil {
			t.Fatalf("ip neigh del: %v %s", err, out)
		}
		out, _ := pair.A.Command(ctx, "ip", "neigh", "show", dst.String(), "dev", pair.A.Link).Output()
		cancel()
		if strings.Contains(string(out), pair.B.MAC.String()) {
			t.Fatalf("%v still in the table: %s", dst, out)
		}
		dp := &xskplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do}
		snd, err := OpenSender(dp, SenderConfig{Server: netip.AddrPortFrom(dst, 5999), Streams: 1, MSS: 1400, Write: 1400})
		if err != nil {
			t.Fatalf("%v: %v", dst, err)
		}
		f := snd.(*xskTCPSender).flows[0]
		if got := net.HardwareAddr(f.hdr[:6]); got.String() != pair.B.MAC.String() {
			t.Errorf("%v: destination MAC %v, want %v", dst, got, pair.B.MAC)
		}
		snd.Close()
	}
}
