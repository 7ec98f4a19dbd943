//go:build linux

package planetest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// ReadAllThenClose reads pc through its queue readers qrs, one goroutine
// each, while 8 kernel UDP sockets in from send 300 datagrams of 100
// bytes each to to (from 8 source ports, so that they spread over the
// queues); once all arrived (or 5 s passed) it closes pc. It fails t
// unless every reader then woke with net.ErrClosed, every datagram came
// with its source and payload intact, and they came from the 8 senders
// only.
func ReadAllThenClose(t testing.TB, pc plane.PacketConn, qrs []plane.QueueReader, from *netnstest.Host, to netip.AddrPort) {
	t.Helper()
	const perFlow, flows = 300, 8
	var (
		mu   sync.Mutex
		got  = map[netip.AddrPort]int{}
		bad  int
		errs = make(chan error, len(qrs))
		wg   sync.WaitGroup
	)
	for _, q := range qrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer q.Done()
			msgs := make([]plane.Message, 16)
			for {
				n, err := q.ReadView(msgs, 2*time.Second)
				mu.Lock()
				for _, m := range msgs[:n] {
					if m.N != 100 || m.Buf[0] != byte(m.Addr.Port()) || m.Buf[99] != 0xab {
						bad++
					}
					got[m.Addr]++
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var sent []netip.AddrPort
	err := from.Do(func() error {
		for range flows {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
			if err != nil {
				return err
			}
			src := c.LocalAddr().(*net.UDPAddr).AddrPort()
			sent = append(sent, netip.AddrPortFrom(src.Addr().Unmap(), src.Port()))
			buf := make([]byte, 100)
			buf[0], buf[99] = byte(src.Port()), 0xab
			for i := range perFlow {
				if _, err := c.Write(buf); err != nil {
					c.Close()
					return err
				}
				if i%50 == 49 {
					time.Sleep(time.Millisecond) // stay well below the receivers' rate
				}
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		total := 0
		for _, n := range got {
			total += n
		}
		mu.Unlock()
		if total >= perFlow*flows {
			break
		}
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("reader after Close: %v, want net.ErrClosed", err)
		}
	}
	for _, src := range sent {
		if got[src] != perFlow {
			t.Errorf("flow from %v: %d datagrams read, %d sent", src, got[src], perFlow)
		}
	}
	if bad > 0 {
		t.Errorf("%d datagrams with a wrong length or payload", bad)
	}
	if len(got) != flows {
		t.Errorf("datagrams from %d sources, want %d: %v", len(got), flows, got)
	}
}
