//go:build linux

package xdpquic_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// BenchmarkBulk moves 64 MiB one way over one quic-go stream per
// iteration, between two namespaces joined by a 2-queue veth: with both
// endpoints on AF_XDP (xdpnet); with both on kernel UDP sockets (with
// quic-go's GSO, GRO and ECN, which it enables on a *net.UDPConn); and
// with kernel sockets on a veth whose GSO is off (kernel-seg). Kernel to
// kernel, veth hands a GSO packet to its peer whole, so 64 KiB of
// datagrams cross it as one: no NIC does that, which kernel-seg shows, as
// the kernel cuts every train into datagrams before the device, as it
// must for a NIC without UDP segmentation offload. It reports MB/s
// (b.SetBytes) and the process's CPU per MiB moved (both endpoints live in
// this process). Run them in one go and interleave the rounds with -count:
//
//	go test -run NONE -bench Bulk -count 5 ./contrib/quic
func BenchmarkBulk(b *testing.B) {
	for _, tc := range []struct {
		name     string
		xdp, seg bool
	}{{"xdp", true, false}, {"kernel", false, false}, {"kernel-seg", false, true}} {
		b.Run(tc.name, func(b *testing.B) { benchBulk(b, tc.xdp, tc.seg) })
	}
}

const bulkSize = 64 << 20

func benchBulk(b *testing.B, overXDP, seg bool) {
	pair := netnstest.New(b, netnstest.Config{Queues: 2})
	if !overXDP {
		// Kernel to kernel on veth: checksums would be left to an
		// offload both ends trust; keep them real, as on a wire.
		args := []string{"tx", "off"}
		if seg {
			args = append(args, "gso", "off", "tx-udp-segmentation", "off")
		}
		for _, h := range []*netnstest.Host{pair.A, pair.B} {
			if out, err := h.Command(context.Background(), "ethtool", append([]string{"-K", h.Link}, args...)...).CombinedOutput(); err != nil {
				b.Fatalf("ethtool: %v %s", err, out)
			}
		}
	}
	srvAddr, cliAddr := netip.AddrPortFrom(pair.B.IPv4, port), netip.AddrPortFrom(pair.A.IPv4, port+1)
	stls, ctls := tlsConfigs(b)
	srv := &quic.Transport{Conn: endpoint(b, pair.B, srvAddr, overXDP)}
	defer srv.Close()
	ln, err := srv.Listen(stls, &quic.Config{})
	if err != nil {
		b.Fatal(err)
	}
	// The server drains every stream and reports how much it read.
	got := make(chan int64, 1)
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(context.Background())
					if err != nil {
						return
					}
					n, _ := io.Copy(io.Discard, s)
					got <- n
				}
			}()
		}
	}()
	cli := &quic.Transport{Conn: endpoint(b, pair.A, cliAddr, overXDP)}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cli.Dial(ctx, net.UDPAddrFromAddrPort(srvAddr), ctls, &quic.Config{})
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer c.CloseWithError(0, "")
	buf := make([]byte, 1<<20)
	b.SetBytes(bulkSize)
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for sent := 0; sent < bulkSize; sent += len(buf) {
			if _, err := s.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
		select {
		case n := <-got:
			if n != bulkSize {
				b.Fatalf("the server read %d bytes of %d", n, bulkSize)
			}
		case <-ctx.Done():
			b.Fatal("the server did not finish reading")
		}
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*bulkSize>>20), "cpu-µs/MiB")
}

// processCPU is the user and system time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
