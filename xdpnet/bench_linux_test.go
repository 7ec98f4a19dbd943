//go:build linux

package xdpnet_test

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// batchPair is an xdpnet conn on each end of a veth pair, A sending to B.
type batchPair struct {
	a, b *xdpnet.UDPConn
	to   netip.AddrPort
	out  []xdpnet.Message
	in   []xdpnet.Message
}

func newBatchPair(tb testing.TB, payload int) *batchPair {
	pair := netnstest.New(tb, netnstest.Config{Queues: 1})
	// The first datagram to a new peer leaves through the kernel socket
	// while the next hop is resolved: with full checksums, please.
	txOff(tb, pair.A)
	p := &batchPair{
		a:  listen(tb, pair.A, netip.AddrPortFrom(pair.A.IPv4, port), xdpnet.Config{}),
		b:  listen(tb, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{}),
		to: netip.AddrPortFrom(pair.B.IPv4, port),
	}
	for i := 0; i < 64; i++ {
		p.out = append(p.out, xdpnet.Message{Buf: make([]byte, payload), N: payload, Addr: p.to})
		p.in = append(p.in, xdpnet.Message{Buf: make([]byte, 2048)})
	}
	// The first datagram starts resolving the next hop; the rest find it
	// cached and leave through AF_XDP.
	p.round(tb, 1)
	for i := 0; i < 100 && p.a.Stats().Queues[0].Sent == 0; i++ {
		time.Sleep(5 * time.Millisecond)
		p.round(tb, 1)
	}
	return p
}

// round sends n datagrams from A and reads them all on B.
func (p *batchPair) round(tb testing.TB, n int) {
	if _, err := p.a.WriteBatch(p.out[:n]); err != nil {
		tb.Fatalf("WriteBatch: %v", err)
	}
	got := 0
	for got < n {
		p.b.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := p.b.ReadBatch(p.in)
		if err != nil {
			tb.Fatalf("ReadBatch after %d of %d: %v", got, n, err)
		}
		got += k
	}
}

// WriteBatch and ReadBatch allocate nothing per datagram, nor per call.
func TestBatchesDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are the race detector's own under -race")
	}
	p := newBatchPair(t, 64)
	if a := testing.AllocsPerRun(50, func() { p.round(t, 64) }); a != 0 {
		t.Errorf("a round of 64 datagrams (WriteBatch + ReadBatch) allocates %.1f times", a)
	}
}

// Neither do the per-queue readers and their writes.
func TestQueueReadersDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are the race detector's own under -race")
	}
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	a := listen(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port), xdpnet.Config{})
	b := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	to := netip.AddrPortFrom(pair.B.IPv4, port)
	qa, qb := a.Queues()[0], b.Queues()[0]
	out := make([]xdpnet.Message, 64)
	for i := range out {
		out[i] = xdpnet.Message{Buf: make([]byte, 64), N: 64, Addr: to}
	}
	in := make([]xdpnet.Message, 64)
	round := func() {
		if _, err := qa.WriteBatch(out); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := qb.ReadView(in, 2*time.Second)
			if err != nil || n == 0 {
				t.Fatalf("ReadView: %d, %v", n, err)
			}
			got += n
		}
		qb.Release()
	}
	round()
	for i := 0; i < 100 && qa.Stats().Sent == 0; i++ {
		time.Sleep(5 * time.Millisecond) // the next hop is being resolved
		round()
	}
	if n := testing.AllocsPerRun(50, round); n != 0 {
		t.Errorf("a round of 64 datagrams (Queue.WriteBatch + ReadView) allocates %.1f times", n)
	}
}

// BenchmarkBatchRoundTrip is one datagram sent with WriteBatch on A and
// read with ReadBatch on B, 64 per batch, over veth.
func BenchmarkBatchRoundTrip(b *testing.B) {
	for _, size := range []int{64, 1472} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			p := newBatchPair(b, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 64 {
				p.round(b, min(64, b.N-i))
			}
		})
	}
}

// BenchmarkEchoLatency measures the round trip of a kernel UDP client in
// A through an echo server on B at about 10,000 requests per second: the
// server on xdpnet (ReadFrom/WriteTo, or a Queue reader) against one on
// net.UDPConn, and raw AF_XDP sockets turning frames around in place (the
// floor of any AF_XDP server on this link), in interleaved rounds of the
// same run. It reports the medians over the rounds of each server's p50
// and p99.
func BenchmarkEchoLatency(b *testing.B) {
	pair := netnstest.New(b, netnstest.Config{Queues: 2})
	txOff(b, pair.A)
	servers := []string{"net.UDPConn", "xdpnet", "xdpnet-queue", "xsk-raw"}
	const rounds, perRound = 5, 5000
	p50 := map[string][]time.Duration{}
	p99 := map[string][]time.Duration{}
	k := kernelUDP(b, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	for r := 0; r < rounds; r++ {
		for i := range servers {
			s := servers[(i+r)%len(servers)]
			stop := startEcho(b, pair, s)
			rtts := measureRTT(b, k, netip.AddrPortFrom(pair.B.IPv4, port), perRound, 100*time.Microsecond)
			stop()
			slices.Sort(rtts)
			p50[s] = append(p50[s], rtts[len(rtts)/2])
			p99[s] = append(p99[s], rtts[len(rtts)*99/100])
		}
	}
	for _, s := range servers {
		slices.Sort(p50[s])
		slices.Sort(p99[s])
		b.ReportMetric(float64(p50[s][rounds/2].Microseconds()), s+"-p50-µs")
		b.ReportMetric(float64(p99[s][rounds/2].Microseconds()), s+"-p99-µs")
		b.Logf("%s: p50 %v (rounds %v), p99 %v (rounds %v)", s, p50[s][rounds/2], p50[s], p99[s][rounds/2], p99[s])
	}
}

// startEcho starts an echo server of the kind named on B's port and
// returns its stop.
func startEcho(tb testing.TB, pair *netnstest.Pair, kind string) func() {
	laddr := netip.AddrPortFrom(pair.B.IPv4, port)
	switch kind {
	case "net.UDPConn":
		var c *net.UDPConn
		if err := pair.B.Do(func() (err error) {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
			return err
		}); err != nil {
			tb.Fatal(err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
		return func() { c.Close() }
	case "xdpnet":
		c := listen(tb, pair.B, laddr, xdpnet.Config{})
		go echo(c)
		return func() { c.Close() }
	case "xsk-raw":
		// The floor: raw AF_XDP sockets turning each frame around in
		// place (MACs, addresses and ports swapped; the checksums are
		// unchanged by a swap), no parsing, no next-hop lookup.
		var dev *xsk.Device
		if err := pair.B.Do(func() (err error) {
			dev, err = xsk.Open(pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
			return err
		}); err != nil {
			tb.Fatal(err)
		}
		for _, s := range dev.Sockets() {
			go func(s *xsk.Socket) {
				b := s.NewBatch(16)
				for {
					s.Complete()
					if s.Receive(b) == 0 {
						if _, err := s.Wait(-1, false); err != nil {
							return
						}
						continue
					}
					for i := 0; i < b.Len(); i++ {
						turnAround(b.Frame(i))
					}
					if _, err := s.Transmit(b); err != nil {
						return
					}
					s.Free(b)
				}
			}(s)
		}
		return func() { dev.Close() }
	}
	c := listen(tb, pair.B, laddr, xdpnet.Config{})
	done := make(chan struct{})
	qs := c.Queues()
	for _, q := range qs {
		go func(q *xdpnet.Queue) {
			msgs := make([]xdpnet.Message, 16)
			for {
				n, err := q.ReadView(msgs, -1)
				if err != nil {
					done <- struct{}{}
					return
				}
				for i := range msgs[:n] {
					msgs[i].Buf = msgs[i].Buf[:msgs[i].N]
				}
				q.WriteBatch(msgs[:n])
			}
		}(q)
	}
	return func() {
		c.Close()
		for range qs {
			<-done
		}
	}
}

// measureRTT sends count requests from k to dst, one every gap, and
// returns each round trip.
func measureRTT(tb testing.TB, k *net.UDPConn, dst netip.AddrPort, count int, gap time.Duration) []time.Duration {
	var rtts []time.Duration
	buf := make([]byte, 2048)
	msg := make([]byte, 64)
	next := time.Now()
	for i := 0; i < count; i++ {
		// Sleep, not spin, to the next request: a spinning client takes a
		// CPU from the kernel's softirq work on a 2-CPU machine.
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(gap)
		start := time.Now()
		if _, err := k.WriteToUDPAddrPort(msg, dst); err != nil {
			tb.Fatal(err)
		}
		k.SetReadDeadline(start.Add(time.Second))
		if _, _, err := k.ReadFromUDPAddrPort(buf); err != nil {
			tb.Fatalf("request %d: %v", i, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return rtts
}

// turnAround swaps an Ethernet/IPv4/UDP frame's MACs, addresses and
// ports in place.
func turnAround(f []byte) {
	for i := 0; i < 6; i++ {
		f[i], f[6+i] = f[6+i], f[i]
	}
	ip := f[14:]
	for i := 0; i < 4; i++ {
		ip[12+i], ip[16+i] = ip[16+i], ip[12+i]
	}
	udp := ip[int(ip[0]&0xf)*4:]
	udp[0], udp[1], udp[2], udp[3] = udp[2], udp[3], udp[0], udp[1]
}
