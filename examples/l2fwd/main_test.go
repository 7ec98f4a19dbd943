package main

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// The forwarded frames come back to A with the MACs swapped; A's kernel
// counts them on its interface (and drops them: the IP is not its own).
func TestL2Fwd(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- pair.B.Do(func() error {
			return l2fwd(ctx, pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}}, 64, 0)
		})
	}()
	time.Sleep(500 * time.Millisecond) // let it attach
	rxBefore := rxPackets(t, pair.A)
	const count = 1000
	if err := pair.A.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, 9000)))
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < count; i++ {
			if _, err := c.Write([]byte("frame to forward")); err != nil {
				return err
			}
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for rxPackets(t, pair.A)-rxBefore < count && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := rxPackets(t, pair.A) - rxBefore; got < count {
		t.Errorf("A received %d frames back, want %d", got, count)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func rxPackets(t *testing.T, h *netnstest.Host) uint64 {
	t.Helper()
	a, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	return a.Statistics.RxPackets
}

func TestSwapMAC(t *testing.T) {
	f := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0}
	SwapMAC(f)
	want := []byte{7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 0x08, 0}
	if string(f) != string(want) {
		t.Fatalf("SwapMAC = %v, want %v", f, want)
	}
	SwapMAC(f[:5]) // too short: no change, no panic
}
