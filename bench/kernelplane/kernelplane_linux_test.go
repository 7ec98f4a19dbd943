package kernelplane

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// BenchmarkDataPlane sends 1448-byte datagrams from A to B through
// DataPlane, one sendmmsg of Batch datagrams per op; Batch 1 is the
// one-syscall-per-datagram peer in the same binary.
func BenchmarkDataPlane(b *testing.B) {
	pair := netnstest.New(b, netnstest.Config{})
	dst := netip.AddrPortFrom(pair.B.IPv4, 5999)
	for _, batch := range []int{1, 8, 64} {
		b.Run("batch="+itoa(batch), func(b *testing.B) {
			rx, err := (&DataPlane{Do: pair.B.Do}).Listen(dst)
			if err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			tx, err := (&DataPlane{Do: pair.A.Do}).Dial(dst)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			var received atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				msgs := make([]plane.Message, 64)
				for i := range msgs {
					msgs[i].Buf = make([]byte, 2048)
				}
				for {
					rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					n, err := rx.ReadBatch(msgs)
					received.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
			msgs := make([]plane.Message, batch)
			for i := range msgs {
				msgs[i] = plane.Message{Buf: make([]byte, 1448), N: 1448}
			}
			var sent int64
			b.SetBytes(int64(batch * 1448))
			b.ReportAllocs()
			for b.Loop() {
				n, err := tx.WriteBatch(msgs)
				if err != nil && !errors.Is(err, plane.ErrBackpressure) {
					b.Fatal(err)
				}
				sent += int64(n)
			}
			el := b.Elapsed().Seconds()
			<-done
			b.ReportMetric(float64(sent)/el, "pkts/s")
			if sent > 0 {
				b.ReportMetric(float64(received.Load())/float64(sent), "delivered")
			}
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
