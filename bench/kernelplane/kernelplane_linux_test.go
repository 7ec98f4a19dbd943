package kernelplane

import (
	"context"
	"errors"
	"net/netip"
	"regexp"
	"strconv"
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

// TestSocketBuffers: a conn reports the buffer size it asked for and the
// sizes the kernel gave its socket, as ss -m shows them (skmem's rb and
// tb): twice the size asked for, the kernel's bookkeeping share added.
func TestSocketBuffers(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	local := netip.AddrPortFrom(pair.B.IPv4, 5998)
	pc, err := (&DataPlane{Do: pair.B.Do, BufferSize: 1 << 20}).Listen(local)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	bc, ok := pc.(plane.BufferedConn)
	if !ok {
		t.Fatalf("%T is not a plane.BufferedConn", pc)
	}
	req, snd, rcv, err := bc.SocketBuffers()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := pair.B.Command(ctx, "ss", "-Huanm", "sport = :5998").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	m := regexp.MustCompile(`rb(\d+),t\d+,tb(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("ss -m shows no skmem for the socket:\n%s", out)
	}
	rb, _ := strconv.Atoi(m[1])
	tb, _ := strconv.Atoi(m[2])
	if req != 1<<20 || rcv != rb || snd != tb || rb != 2<<20 || tb != 2<<20 {
		t.Errorf("SocketBuffers = asked %d, send %d, receive %d; ss -m: rb %d tb %d; want 1 MiB asked and 2 MiB each", req, snd, rcv, rb, tb)
	}
}
