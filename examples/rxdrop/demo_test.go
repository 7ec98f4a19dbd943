//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// Every frame the generator sent is either received by rxdrop or counted
// by the kernel as dropped on the way to the sockets, with a goroutine per
// queue and with one for all of them, through the runner and by hand.
func TestRxdropAccountsForEveryFrame(t *testing.T) {
	t.Run("runner per queue", func(t *testing.T) { testRxdropAccounts(t, loop{shape: xsk.ShapePerQueue}, xsk.SocketConfig{}) })
	t.Run("runner one", func(t *testing.T) { testRxdropAccounts(t, loop{shape: xsk.ShapeOne}, xsk.SocketConfig{}) })
	t.Run("raw per queue", func(t *testing.T) { testRxdropAccounts(t, loop{raw: true}, xsk.SocketConfig{}) })
	t.Run("raw one thread, nap", func(t *testing.T) {
		testRxdropAccounts(t, loop{raw: true, shape: xsk.ShapeOne}, xsk.SocketConfig{RXNap: 30 * time.Microsecond})
	})
}

func testRxdropAccounts(t *testing.T, l loop, sc xsk.SocketConfig) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var gen *trafficgen.Generator
	if err := pair.A.Do(func() (err error) {
		gen, err = trafficgen.New(trafficgen.Config{
			Ifindex: pair.A.Ifindex,
			Frame:   trafficgen.FrameSpec{SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC, Src: pair.A.IPv4, Dst: pair.B.IPv4, DstPort: 9, Size: 64},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lostBefore, err := pair.A.XDPXmitErrors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const packets = 500_000
	started := make(chan struct{})
	genDone := make(chan trafficgen.Result, 1)
	go func() {
		<-started
		res, err := gen.Run(context.Background(), packets, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		time.Sleep(200 * time.Millisecond) // let the receiver drain
		cancel()
		genDone <- res
	}()
	var sum summary
	err = pair.B.Do(func() (err error) {
		sum, err = rxdropStarted(ctx, pair.B.Link, xsk.Config{Socket: sc, Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9)}}}, 64, l, 0, func() { close(started) })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res := <-genDone
	if res.Packets == 0 || sum.Received == 0 {
		t.Fatalf("sent %d, received %d", res.Packets, sum.Received)
	}
	// Frames veth could not hand to B's NAPI (its ring full while the
	// receiver was slow, as under the race detector) never reach the
	// sockets: veth-a counts them.
	lostAfter, err := pair.A.XDPXmitErrors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lost := lostAfter - lostBefore
	if got := sum.Received + sum.KernelDropped + sum.RingFull + lost; got != res.Packets {
		t.Fatalf("sent %d, but received %d + kernel dropped %d + ring full %d + lost in veth %d = %d", res.Packets, sum.Received, sum.KernelDropped, sum.RingFull, lost, got)
	}
	t.Logf("sent %d, received %d, kernel dropped %d, lost in veth %d", res.Packets, sum.Received, sum.KernelDropped+sum.RingFull, lost)
}
