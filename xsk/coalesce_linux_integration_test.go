//go:build linux

package xsk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// SleepShort sleeps at least as long as asked (the kernel's monotonic
// clock is the oracle), hands a long wait to Sleep, which Close ends at
// once, and fails with ErrClosed after Close.
func TestSleepShort(t *testing.T) {
	netnstest.RequirePriv(t)
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	s := openOn(t, pair.B, xsk.Config{}).Sockets()[0]
	for _, d := range []time.Duration{0, 20 * time.Microsecond, 300 * time.Microsecond, xsk.MaxShortSleep} {
		t0 := time.Now()
		if err := s.SleepShort(d); err != nil {
			t.Fatalf("SleepShort(%v): %v", d, err)
		}
		// A signal may end the wait early (the runtime preempts a
		// goroutine every 10ms); one short sleep in a fresh test is not
		// preempted, and the kernel never ends a timeout early.
		if got := time.Since(t0); got < d {
			t.Errorf("SleepShort(%v) returned after %v", d, got)
		}
	}
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- s.SleepShort(10 * time.Second) }()
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Errorf("long SleepShort ended by Close: %v, want ErrClosed", err)
		}
		if el := time.Since(t0); el > 5*time.Second {
			t.Errorf("Close ended a long SleepShort after %v", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a long SleepShort")
	}
	if err := s.SleepShort(time.Microsecond); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("SleepShort after Close: %v, want ErrClosed", err)
	}
}
