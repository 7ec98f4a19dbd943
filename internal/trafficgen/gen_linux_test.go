//go:build linux

package trafficgen_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"golang.org/x/sys/unix"
)

// newGen creates a generator sending from A's veth to B's.
func newGen(t *testing.T, pair *netnstest.Pair, size, flows int) *trafficgen.Generator {
	t.Helper()
	var g *trafficgen.Generator
	err := pair.A.Do(func() (err error) {
		g, err = trafficgen.New(trafficgen.Config{
			Ifindex: pair.A.Ifindex,
			Frame: trafficgen.FrameSpec{
				SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC,
				Src: pair.A.IPv4, Dst: pair.B.IPv4,
				SrcPort: 40000, DstPort: 7777, Size: size,
			},
			Flows: flows,
		})
		return err
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestExactCountArrives checks, with an XDP counter on the receiving veth
// as the oracle, that a packet-bounded run sends exactly that many frames
// and that they all arrive.
func TestExactCountArrives(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var c *trafficgen.Counter
	if err := pair.B.Do(func() (err error) {
		c, err = trafficgen.AttachCounter(pair.B.Ifindex, trafficgen.Drop)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, size := range []int{64, 1514} {
		g := newGen(t, pair, size, 64)
		before, _ := c.Count()
		errBefore := xmitErrors(t, ctx, pair.A)
		const want = 200_000
		res, err := g.Run(context.Background(), want, 20*time.Second)
		if err != nil {
			t.Fatalf("size %d: Run: %v", size, err)
		}
		if res.Packets != want {
			t.Errorf("size %d: sent %d, want exactly %d (per CPU %v)", size, res.Packets, want, res.PerCPU)
		}
		// Frames are flushed to the peer's NAPI per batch; give the last
		// ones a moment.
		var got uint64
		for range 50 {
			n, err := c.Count()
			if err != nil {
				t.Fatal(err)
			}
			if got = n - before; got+xmitErrors(t, ctx, pair.A)-errBefore >= want {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Frames veth could not queue to its peer (its 256-entry ring
		// full while the peer's NAPI was held off, as on a loaded
		// machine) are counted by veth-a as xdp_xmit_errors.
		lost := xmitErrors(t, ctx, pair.A) - errBefore
		// The counter also sees the few IPv6 neighbour-discovery and MLD
		// frames the namespaces send when their links come up.
		if got+lost < want || got+lost > want+32 {
			t.Errorf("size %d: receiver counted %d frames and veth lost %d, want %d in all (plus at most 32 background frames)", size, got, lost, want)
		}
		t.Logf("size %d: %d frames in %v (%.2f Mpps)", size, res.Packets, res.Elapsed, res.PPS()/1e6)
	}
}

// TestRunStopsAtDeadline checks that a run without a packet limit stops by
// itself after its duration.
func TestRunStopsAtDeadline(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var c *trafficgen.Counter
	if err := pair.B.Do(func() (err error) {
		c, err = trafficgen.AttachCounter(pair.B.Ifindex, trafficgen.Drop)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := newGen(t, pair, 64, 8)
	start := time.Now()
	res, err := g.Run(context.Background(), 0, 300*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Generous bounds: a loaded 2-CPU machine can keep a pinned thread
	// off its CPU for a while; what matters is that the run ends by
	// itself, long before the minute-long run below would.
	if took > 5*time.Second || res.Elapsed < 300*time.Millisecond {
		t.Errorf("run of 300ms took %v (elapsed %v)", took, res.Elapsed)
	}
	if res.Packets == 0 {
		t.Error("sent nothing")
	}
	n, _ := c.Count()
	if n == 0 || n > res.Packets+32 {
		t.Errorf("receiver counted %d, generator sent %d", n, res.Packets)
	}

	// Cancellation stops it early too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := g.Run(ctx, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancelled run took %v", took)
	}
}

// TestKernelAcceptsFlows delivers generated frames to a kernel UDP socket
// (the kernel verifies IPv4 and UDP checksums: a bad frame would be
// dropped and counted in InCsumErrors) and checks that several flows
// arrive.
func TestKernelAcceptsFlows(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// veth hands XDP frames from its peer only to a NAPI-enabled queue:
	// GRO on enables NAPI without an XDP program.
	if out, err := pair.B.Command(ctx, "ethtool", "-K", pair.B.Link, "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K gro on: %v\n%s", err, out)
	}
	var fd int
	if err := pair.B.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(500 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet4{Port: 7777, Addr: pair.B.IPv4.As4()})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	csumBefore := udpCsumErrors(t, pair.B)

	g := newGen(t, pair, 100, 16)
	const want = 2000
	res, err := g.Run(ctx, want, 10*time.Second)
	if err != nil || res.Packets != want {
		t.Fatalf("Run: sent %d, err %v", res.Packets, err)
	}
	ports := map[int]int{}
	buf := make([]byte, 2048)
	got := 0
	for got < want {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			break
		}
		if n != 100-42 {
			t.Fatalf("datagram of %d bytes, want %d", n, 100-42)
		}
		if binary.BigEndian.Uint16(buf) < 0x4000-15 {
			t.Fatalf("payload word %#x out of range", binary.BigEndian.Uint16(buf))
		}
		ports[from.(*unix.SockaddrInet4).Port]++
		got++
	}
	if got != want {
		t.Errorf("kernel socket received %d datagrams, want %d", got, want)
	}
	if len(ports) < 8 {
		t.Errorf("only %d source ports seen, want most of 16: %v", len(ports), ports)
	}
	for p := range ports {
		if p < 40000 || p >= 40016 {
			t.Errorf("source port %d outside 40000..40015", p)
		}
	}
	if d := udpCsumErrors(t, pair.B) - csumBefore; d != 0 {
		t.Errorf("kernel counted %d UDP checksum errors", d)
	}
}

// udpCsumErrors reads Udp InCsumErrors in h's namespace.
func udpCsumErrors(t *testing.T, h *netnstest.Host) int {
	t.Helper()
	m, err := h.Counters()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["UdpInCsumErrors"]
	if !ok {
		t.Fatal("no Udp InCsumErrors in the kernel's SNMP counters")
	}
	return int(v)
}

// xmitErrors is h.XDPXmitErrors, failing t on error.
func xmitErrors(t *testing.T, ctx context.Context, h *netnstest.Host) uint64 {
	t.Helper()
	n, err := h.XDPXmitErrors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
