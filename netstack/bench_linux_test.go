//go:build linux

package netstack_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/netstack"
)

// chunk is what one benchmark operation writes or reads: one 64 KiB
// segment of the stack's, which the endpoint cuts with TSO.
const chunk = 64 << 10

// BenchmarkTCPSend sends over one connection from the stack to the peer's
// kernel, which discards: an operation is a 64 KiB write. allocs/frame
// are the process's allocations (the stack's, the endpoint's and the
// kernel sink's reads, which allocate nothing) over the frames the
// endpoint sent, ACK-less data frames being nearly all of them.
func BenchmarkTCPSend(b *testing.B) {
	for _, tso := range []bool{true, false} {
		name := "TSO"
		if !tso {
			name = "noTSO"
		}
		b.Run(name, func(b *testing.B) {
			pair := netnstest.New(b, netnstest.Config{Queues: 1})
			peer(b, pair)
			st := open(b, pair, netstack.Config{Addrs: []netip.Prefix{stack4}, NoTSO: !tso})
			var l net.Listener
			if err := pair.A.Do(func() (err error) { l, err = net.Listen("tcp4", "198.18.0.1:0"); return err }); err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := st.DialTCP(ctx, netip.MustParseAddrPort(l.Addr().String()))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, chunk)
			measure(b, st, func() {
				for range b.N {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
			}, func(s netstack.Stats) uint64 { return s.TXFrames })
		})
	}
}

// BenchmarkTCPReceive receives over one connection from the peer's
// kernel, which sends as fast as it can: an operation is a 64 KiB read.
// allocs/frame are the process's allocations over the frames the
// endpoint received.
func BenchmarkTCPReceive(b *testing.B) {
	pair := netnstest.New(b, netnstest.Config{Queues: 1})
	peer(b, pair)
	st := open(b, pair, netstack.Config{Addrs: []netip.Prefix{stack4}})
	l, err := st.ListenTCP(7)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var sender net.Conn
	if err := pair.A.Do(func() (err error) {
		sender, err = net.DialTimeout("tcp4", "198.18.0.3:7", 5*time.Second)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer sender.Close()
	go func() {
		buf := make([]byte, chunk)
		for {
			if _, err := sender.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, chunk)
	measure(b, st, func() {
		for range b.N {
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	}, func(s netstack.Stats) uint64 { return s.RXFrames })
}

// measure runs loop as the benchmark and reports the allocations per
// frame that frames counts in the endpoint's Stats.
func measure(b *testing.B, st *netstack.Stack, loop func(), frames func(netstack.Stats) uint64) {
	b.SetBytes(chunk)
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f0 := frames(st.Endpoint().Stats())
	b.ResetTimer()
	loop()
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	if n := frames(st.Endpoint().Stats()) - f0; n > 0 {
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/frame")
		b.ReportMetric(float64(n)/float64(b.N), "frames/op")
	}
}
