//go:build linux

package faults

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// EnvFDCycles names the environment variable that sets the number of
// cycles of TestOpenCloseKeepsFDs and lifts its time budget.
const EnvFDCycles = "XDPIO_FAULTS_FD_CYCLES"

// A long-lived process that opens and closes a device's sockets over and
// over (a server that binds per test, as the bench server does) keeps no
// file descriptor and no XDP program of any cycle: up to 500 cycles of
// Open and Close of all 4 queues of a veth leave the fd count where it
// was.
//
// With the default UMEM a cycle costs about 105 ms on a 2-CPU VM (Linux
// 6.18), most of it zeroing and pinning four 16 MiB UMEMs, so the cycles
// use 256-frame UMEMs: the descriptors, mappings and links a cycle opens
// are the same. The time budget (60 s) only guards CI;
// XDPIO_FAULTS_FD_CYCLES sets the number of cycles and lifts it.
func TestOpenCloseKeepsFDs(t *testing.T) {
	// The kernel's part of a cycle is mostly waiting (RCU grace periods at
	// socket close and XDP detach): workers on pairs of their own overlap
	// the waits.
	const workers = 4
	var pairs [workers]*netnstest.Pair
	for i := range pairs {
		pairs[i] = netnstest.New(t, netnstest.Config{Queues: 4})
	}
	cycles, limit := 500, 60*time.Second
	if v := os.Getenv(EnvFDCycles); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of cycles", EnvFDCycles, v)
		}
		cycles, limit = n, 10*time.Minute
	}
	cycle := func(h *netnstest.Host, i int) error {
		d, err := xsk.Open(h.Link, xsk.Config{UMEM: xsk.UMEMConfig{NumFrames: 256}})
		if err != nil {
			return fmt.Errorf("cycle %d: open: %w", i, err)
		}
		if n := len(d.Sockets()); n != 4 {
			d.Close()
			return fmt.Errorf("cycle %d: %d sockets, want 4", i, n)
		}
		if err := d.Close(); err != nil {
			return fmt.Errorf("cycle %d: close: %w", i, err)
		}
		return nil
	}
	first := openFDs(t)
	// One cycle first on each pair: whatever the runtime or a library
	// opens once per process (the netpoller's epoll, cached netlink
	// sockets) is then open in both counts.
	for _, p := range pairs {
		if err := p.B.Do(func() error { return cycle(p.B, -1) }); err != nil {
			t.Fatal(err)
		}
	}
	before := openFDs(t)
	start := time.Now()
	var done atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.B.Do(func() error {
				for i := w; i < cycles; i += workers {
					if time.Since(start) > limit {
						return nil
					}
					if err := cycle(p.B, i); err != nil {
						return err
					}
					done.Add(1)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	after := openFDs(t)
	t.Logf("%d Open+Close cycles of 4 queues (%d workers) in %v; open fds: %d at the start, %d after a warm-up cycle per pair, %d after the cycles",
		done.Load(), workers, took.Round(time.Millisecond), first, before, after)
	if int(done.Load()) < cycles {
		t.Errorf("stopped after %d of %d cycles: the time budget of %v ran out (%s=%d lifts it)", done.Load(), cycles, limit, EnvFDCycles, cycles)
	}
	if after != before {
		t.Errorf("open fds: %d before the cycles, %d after: %+d", before, after, after-before)
	}
	if first != before {
		t.Logf("(the warm-up cycle left %+d fds open: opened once per process)", before-first)
	}
	for _, p := range pairs {
		if id, _, err := xdpState(p.B); err != nil || id != 0 {
			t.Errorf("after the cycles: XDP program %d attached to %s (%v), want none", id, p.B.NS, err)
		}
	}
}
