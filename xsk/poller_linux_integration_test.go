//go:build linux

package xsk_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// A Poller waits on the RX rings of several sockets at once: it times out
// when none has frames, wakes when traffic arrives on any, and Close of
// any one socket ends a wait or a sleep with ErrClosed.
func TestPoller(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	socks := d.Sockets()
	p := xsk.NewPoller(socks...)

	start := time.Now()
	ready, err := p.WaitRX(50 * time.Millisecond)
	if err != nil || ready {
		t.Fatalf("WaitRX on idle sockets = %v, %v; want false, nil", ready, err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("WaitRX(50ms) on idle sockets returned after %v", el)
	}

	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 16, 64, 64, 0)
	if ready, err := p.WaitRX(time.Second); err != nil || !ready {
		t.Fatalf("WaitRX with traffic sent = %v, %v; want true, nil", ready, err)
	}
	got := 0
	for deadline := time.Now().Add(2 * time.Second); got < 64 && time.Now().Before(deadline); {
		for _, s := range socks {
			b := s.NewBatch(64)
			got += s.Receive(b)
			s.Release(b)
		}
		if got < 64 {
			if _, err := p.WaitRX(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != 64 {
		t.Fatalf("received %d of 64 datagrams", got)
	}
	var polls uint64
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		polls += st.Polls
	}
	if polls == 0 {
		t.Error("the sockets counted no polls")
	}
	if err := p.SleepShort(100 * time.Microsecond); err != nil {
		t.Fatalf("SleepShort: %v", err)
	}

	waited := make(chan error, 1)
	go func() {
		_, err := p.WaitRX(-1)
		waited <- err
	}()
	time.Sleep(50 * time.Millisecond)
	socks[1].Close()
	select {
	case err := <-waited:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("WaitRX after Close of one socket = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("WaitRX still blocked 1s after one of its sockets was closed")
	}
	if _, err := p.WaitRX(0); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("WaitRX after Close = %v, want ErrClosed", err)
	}
	if err := p.Sleep(time.Hour); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("Sleep after Close = %v, want ErrClosed", err)
	}
}

// Closing a socket ends a long Sleep of a Poller at once.
func TestPollerSleepClose(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{})
	p := xsk.NewPoller(d.Sockets()...)
	slept := make(chan error, 1)
	go func() { slept <- p.Sleep(time.Minute) }()
	time.Sleep(50 * time.Millisecond)
	d.Sockets()[0].Close()
	select {
	case err := <-slept:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("Sleep after Close = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Sleep still running 1s after Close")
	}
}

// With RXNap, a Poller naps on a timer while packets flow, like
// Socket.Wait, and every datagram still arrives.
func TestPollerRXNap(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{RXNap: 200 * time.Microsecond},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	socks := d.Sockets()
	p := xsk.NewPoller(socks...)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 16, 200, 64, 0)
	got := 0
	for deadline := time.Now().Add(2 * time.Second); got < 200 && time.Now().Before(deadline); {
		for _, s := range socks {
			b := s.NewBatch(64)
			got += s.Receive(b)
			s.Release(b)
		}
		if got < 200 {
			if _, err := p.WaitRX(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != 200 {
		t.Fatalf("received %d of 200 datagrams", got)
	}
	// The rings are empty and packets were flowing: the wait naps first.
	if ready, err := p.WaitRX(20 * time.Millisecond); err != nil || ready {
		t.Fatalf("WaitRX on drained rings = %v, %v; want false, nil", ready, err)
	}
	var naps uint64
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		naps += st.Naps
	}
	if naps == 0 {
		t.Error("no socket counted a nap: WaitRX ignored RXNap")
	}
}

// A Poller without sockets, or with a nil one, says so instead of waiting
// for ever or panicking.
func TestPollerInvalid(t *testing.T) {
	for _, p := range []*xsk.Poller{xsk.NewPoller(), xsk.NewPoller(nil)} {
		if _, err := p.WaitRX(-1); !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("WaitRX: %v, want ErrInvalidConfig", err)
		}
		if err := p.Sleep(time.Hour); !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("Sleep: %v, want ErrInvalidConfig", err)
		}
		if err := p.SleepShort(time.Millisecond); !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("SleepShort: %v, want ErrInvalidConfig", err)
		}
	}
}
