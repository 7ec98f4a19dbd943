//go:build linux

package xsk_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

const testPort = 9000

func TestReceiveAllQueues(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	if got := len(d.Sockets()); got != 4 {
		t.Fatalf("Open bound %d sockets, want 4", got)
	}
	for i, s := range d.Sockets() {
		if s.Queue() != i {
			t.Fatalf("socket %d is on queue %d: want queue order", i, s.Queue())
		}
	}
	const count, size = 4000, 200
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), testPort, count, 20*time.Second) }()
	sent := sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 32, count, size, 200*time.Microsecond)
	c := <-done
	t.Logf("received %v (mode %v)", c, d.Program().Mode())
	if c.frames != count || c.bytes != sent {
		t.Fatalf("received %d frames / %d bytes, sent %d / %d", c.frames, c.bytes, count, sent)
	}
	for i := uint64(0); i < count; i++ {
		p, ok := c.payloads[i]
		if !ok {
			t.Fatalf("datagram %d missing", i)
		}
		for j := 8; j < len(p); j++ {
			if p[j] != byte(int(i)+j) {
				t.Fatalf("datagram %d byte %d = %d, want %d", i, j, p[j], byte(int(i)+j))
			}
		}
	}
	if len(c.perQueue) < 2 {
		t.Errorf("only queues %v received: want traffic spread over more than one queue", c.perQueue)
	}
}

// A socket with more frames lends the kernel more of them up front: its
// fill ring defaults to half its frames.
func TestFillRingGrowsWithFrames(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	for _, c := range []struct{ frames, fill int }{{4096, 2048}, {16384, 8192}} {
		d := openOn(t, pair.B, xsk.Config{UMEM: xsk.UMEMConfig{NumFrames: c.frames}})
		st, err := d.Sockets()[0].Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.FramesFill != c.fill {
			t.Errorf("%d frames: %d lent in the fill ring after Open, want %d", c.frames, st.FramesFill, c.fill)
		}
		d.Close()
	}
}
