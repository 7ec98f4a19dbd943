//go:build linux

package wireguard_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/xdpio/xdpio/contrib/wireguard"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// tunnel builds two wireguard-go devices on userspace netstacks in the
// two namespaces of a fresh pair, both on AF_XDP or both on
// wireguard-go's StdNetBind, each at its best: the AF_XDP binds with TX
// checksumming off (their first datagrams, sent through the kernel
// socket while a next hop is resolved, then carry full checksums), the
// kernel binds with TX checksumming and GRO on (UDP GSO needs the
// former, UDP GRO the latter).
func tunnel(tb testing.TB, overXDP bool) (a, b *peer) {
	pair := netnstest.New(tb, netnstest.Config{Queues: 2})
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		args := []string{"-K", h.Link, "tx", "on", "gro", "on"}
		if overXDP {
			args = []string{"-K", h.Link, "tx", "off"}
		}
		if out, err := h.Command(context.Background(), "ethtool", args...).CombinedOutput(); err != nil {
			tb.Fatalf("ethtool %v: %v %s", args, err, out)
		}
	}
	ka, kb := newKey(tb), newKey(tb)
	var ba, bb conn.Bind = conn.NewStdNetBind(), conn.NewStdNetBind()
	if overXDP {
		ba = wireguard.NewBind(pair.A.Link, wireguard.Options{Do: pair.A.Do})
		bb = wireguard.NewBind(pair.B.Link, wireguard.Options{Do: pair.B.Do})
	}
	a = newPeer(tb, pair.A, ba, innerA, portA, ka, kb, innerB, netip.AddrPortFrom(pair.B.IPv4, portB))
	b = newPeer(tb, pair.B, bb, innerB, portB, kb, ka, innerA, netip.AddrPortFrom(pair.A.IPv4, portA))
	return a, b
}

// bulk sends size bytes over one TCP connection through the tunnel from
// A to B and returns how long it took, the process's CPU time (user and
// system) meanwhile, and the whole machine's busy CPU time (which also
// holds the softirq work of the veth pair, wherever it ran).
func bulk(tb testing.TB, a, b *peer, size int) (took, cpu, machine time.Duration) {
	ln, err := b.tnet.ListenTCPAddrPort(netip.AddrPortFrom(innerB, 5002))
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var c interface {
		io.WriteCloser
		CloseWrite() error
	}
	for try := 0; ; try++ {
		tc, err := a.tnet.DialContextTCPAddrPort(ctx, netip.AddrPortFrom(innerB, 5002))
		if err == nil {
			c = tc
			break
		}
		if try == 10 {
			tb.Fatalf("dial through the tunnel: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	data := make([]byte, 1<<20)
	rand.Read(data)
	cpu0, m0 := processCPU(), machineCPU(tb)
	start := time.Now()
	for sent := 0; sent < size; sent += len(data) {
		if _, err := c.Write(data); err != nil {
			tb.Fatal(err)
		}
	}
	c.CloseWrite()
	if n := <-got; n != int64(size) {
		tb.Fatalf("B received %d of %d bytes", n, size)
	}
	took, cpu, machine = time.Since(start), processCPU()-cpu0, machineCPU(tb)-m0
	c.Close()
	return took, cpu, machine
}

// machineCPU is the busy time of all CPUs so far, from /proc/stat: all
// but idle and iowait.
func machineCPU(tb testing.TB) time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: %q", line)
	}
	var busy int64
	for i, v := range f[1:8] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("/proc/stat: %q", line)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sample is one round's measurement: bytes moved, the time it took,
// and the CPU time meanwhile of this process and of the whole machine.
type sample struct {
	bytes              int64
	took, cpu, machine time.Duration
}

// compare runs round(kind) for each kind in turn, rounds times, the
// order rotating each round, and reports each kind's median Mbit/s and
// CPU ns per byte (this process's and the machine's) and the ratios of
// "xdp" to each other kind, as the metrics of a last sub-benchmark "median" (a
// benchmark with sub-benchmarks reports none of its own).
func compare(b *testing.B, rounds int, kinds []string, round func(b *testing.B, kind string) sample) {
	mbit := map[string][]float64{}
	cpuB := map[string][]float64{}
	machB := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for i := range kinds {
			k := kinds[(i+r)%len(kinds)]
			b.Run(k, func(b *testing.B) {
				for range b.N {
					s := round(b, k)
					mbit[k] = append(mbit[k], float64(s.bytes)*8/s.took.Seconds()/1e6)
					cpuB[k] = append(cpuB[k], float64(s.cpu.Nanoseconds())/float64(s.bytes))
					machB[k] = append(machB[k], float64(s.machine.Nanoseconds())/float64(s.bytes))
				}
			})
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 { // a -bench pattern left this setup out
			return 0
		}
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.Run("median", func(b *testing.B) {
		for _, k := range kinds {
			b.ReportMetric(med(mbit[k]), k+"-Mbit/s")
			b.ReportMetric(med(cpuB[k]), k+"-cpu-ns/B")
			b.ReportMetric(med(machB[k]), k+"-machine-ns/B")
			b.Logf("%s: Mbit/s %.0f, process CPU ns/byte %.2f, machine CPU ns/byte %.2f", k, mbit[k], cpuB[k], machB[k])
		}
		for _, k := range kinds {
			if k == "xdp" || med(mbit[k]) == 0 {
				continue
			}
			b.ReportMetric(med(mbit["xdp"])/med(mbit[k]), "throughput-ratio-to-"+k)
			b.ReportMetric(med(cpuB["xdp"])/med(cpuB[k]), "cpu-per-byte-ratio-to-"+k)
			b.ReportMetric(med(machB["xdp"])/med(machB[k]), "machine-per-byte-ratio-to-"+k)
		}
	})
}

// BenchmarkTunnel is the TCP throughput through a WireGuard tunnel
// between two userspace netstacks (wireguard-go devices on netstack
// TUNs, which hand over one packet at a time: batches of one), and the
// CPU time per byte, with both ends on AF_XDP and both on wireguard-go's
// StdNetBind, in interleaved rounds of one run. Run it with -benchtime 1x.
func BenchmarkTunnel(b *testing.B) {
	compare(b, 5, []string{"stdnet", "xdp"}, func(b *testing.B, kind string) sample {
		const size = 64 << 20
		a, p := tunnel(b, kind == "xdp")
		took, cpu, mach := bulk(b, a, p, size)
		return sample{size, took, cpu, mach}
	})
}

// BenchmarkTunnelTUN is WireGuard as it is deployed: wireguard-go on a
// kernel TUN in each namespace (with its GSO/GRO offloads, so batches of
// up to 128 packets), iperf3's TCP between the tunnel addresses for 3 s,
// both ends on AF_XDP or both on StdNetBind. Throughput is iperf3's
// receiver's; the CPU time per byte is the machine's (iperf3, the kernel
// and both devices) and this process's. Run it with -benchtime 1x.
//
// StdNetBind runs twice: on veth as it is ("stdnet"), which hands UDP GSO
// packets to the other end whole, so no layer ever handles a 1420-byte
// packet, and with the veths' UDP segmentation off ("stdnet-seg"), where
// the kernel segments each GSO packet in software at the device and the
// receiver's GRO merges the frames again: the path of a NIC without UDP
// segmentation offload. AF_XDP handles every frame as on any NIC.
func BenchmarkTunnelTUN(b *testing.B) {
	netnstest.RequireTool(b, "iperf3")
	compare(b, 5, []string{"stdnet", "stdnet-seg", "xdp"}, func(b *testing.B, kind string) sample {
		pair := tunnelTUN(b, kind)
		return iperf3Through(b, pair)
	})
}

// tunnelTUN builds a tunnel between kernel TUNs "wg0" in the two
// namespaces of a fresh pair, at innerA and innerB, on AF_XDP binds
// (kind "xdp") or StdNetBinds ("stdnet", and "stdnet-seg" with the veths'
// UDP segmentation off), set up as in tunnel.
func tunnelTUN(tb testing.TB, kind string) *netnstest.Pair {
	overXDP := kind == "xdp"
	pair := netnstest.New(tb, netnstest.Config{Queues: 2})
	ka, kb := newKey(tb), newKey(tb)
	for i, h := range []*netnstest.Host{pair.A, pair.B} {
		args := []string{"-K", h.Link, "tx", "on", "gro", "on"}
		switch kind {
		case "xdp":
			args = []string{"-K", h.Link, "tx", "off"}
		case "stdnet-seg":
			args = append(args, "tx-udp-segmentation", "off")
		}
		if out, err := h.Command(context.Background(), "ethtool", args...).CombinedOutput(); err != nil {
			tb.Fatalf("ethtool %v: %v %s", args, err, out)
		}
		var bind conn.Bind = conn.NewStdNetBind()
		if overXDP {
			bind = wireguard.NewBind(h.Link, wireguard.Options{Do: h.Do})
		}
		self, other, inner, otherInner, port, otherEP := ka, kb, innerA, innerB, portA, netip.AddrPortFrom(pair.B.IPv4, portB)
		if i == 1 {
			self, other, inner, otherInner, port, otherEP = kb, ka, innerB, innerA, portB, netip.AddrPortFrom(pair.A.IPv4, portA)
		}
		var dev tun.Device
		if err := h.Do(func() (err error) {
			dev, err = tun.CreateTUN("wg0", 1420)
			return err
		}); err != nil {
			tb.Fatalf("TUN in %s: %v", h.NS, err)
		}
		log := &deviceLog{}
		wg := device.NewDevice(dev, nsBind{bind, h}, &device.Logger{Verbosef: log.printf, Errorf: log.printf})
		tb.Cleanup(func() {
			if tb.Failed() {
				tb.Logf("the device at %v said:\n%s", inner, log)
			}
		})
		tb.Cleanup(wg.Close)
		if err := wg.IpcSet(fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nallowed_ip=%v/32\nendpoint=%v\npersistent_keepalive_interval=1\n",
			hex.EncodeToString(self.priv[:]), port, hex.EncodeToString(other.pub[:]), otherInner, otherEP)); err != nil {
			tb.Fatal(err)
		}
		if err := wg.Up(); err != nil {
			tb.Fatal(err)
		}
		for _, args := range [][]string{
			{"addr", "add", inner.String() + "/24", "dev", "wg0"},
			{"link", "set", "wg0", "up"},
		} {
			if out, err := h.Command(context.Background(), "ip", args...).CombinedOutput(); err != nil {
				tb.Fatalf("ip %v in %s: %v %s", args, h.NS, err, out)
			}
		}
	}
	return pair
}

// iperf3Through runs iperf3's server in B's namespace and its client in
// A's, 3 s of TCP from A to B through the tunnel, and returns the bytes
// B received and the CPU time meanwhile.
func iperf3Through(tb testing.TB, pair *netnstest.Pair) sample {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-B", innerB.String(), "-p", "5201")
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	// The handshake and the server's listen, both within a second.
	var out []byte
	var err error
	var cpu0, m0 time.Duration
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		cpu0, m0 = processCPU(), machineCPU(tb)
		out, err = pair.A.Command(ctx, "iperf3", "-c", innerB.String(), "-p", "5201", "-t", "3", "-J").Output()
		if err == nil {
			break
		}
	}
	cpu, mach := processCPU()-cpu0, machineCPU(tb)-m0
	if err != nil {
		tb.Fatalf("iperf3 through the tunnel: %v\n%s\nserver: %s", err, out, srvOut.String())
	}
	var res struct {
		End struct {
			SumReceived struct {
				Bytes   int64   `json:"bytes"`
				Seconds float64 `json:"seconds"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.End.SumReceived.Bytes == 0 {
		tb.Fatalf("iperf3's report: %v\n%s", err, out)
	}
	r := res.End.SumReceived
	took := time.Duration(r.Seconds * float64(time.Second))
	// The CPU time covers the client's whole run, its connection setup
	// and teardown too (a few per cent of 3 s, alike for both binds).
	return sample{bytes: r.Bytes, took: took, cpu: cpu, machine: mach}
}
