//go:build linux

package xdpnet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
)

const port = 9400

// run runs a command in h's namespace and fails t on error.
func run(t testing.TB, h *netnstest.Host, name string, args ...string) {
	t.Helper()
	if out, err := h.Command(context.Background(), name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", name, args, h.NS, err, out)
	}
}

// txOff turns TX checksum offload off on h's veth, so the kernel's UDP
// datagrams leave with full checksums (see the package documentation).
func txOff(t testing.TB, h *netnstest.Host) { run(t, h, "ethtool", "-K", h.Link, "tx", "off") }

// listen opens an xdpnet conn on h's veth inside its namespace.
func listen(t testing.TB, h *netnstest.Host, laddr netip.AddrPort, cfg xdpnet.Config) *xdpnet.UDPConn {
	t.Helper()
	var c *xdpnet.UDPConn
	if err := h.Do(func() (err error) {
		c, err = xdpnet.ListenUDP(h.Link, laddr, cfg)
		return err
	}); err != nil {
		t.Fatalf("ListenUDP %v on %s: %v", laddr, h.Link, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// kernelUDP opens a kernel UDP socket in h's namespace.
func kernelUDP(t testing.TB, h *netnstest.Host, laddr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
		return err
	}); err != nil {
		t.Fatalf("listen %v in %s: %v", laddr, h.NS, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo serves c with ReadFrom/WriteTo until it is closed.
func echo(c *xdpnet.UDPConn) {
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
			return
		}
	}
}

// roundTrips sends count datagrams of size bytes from k to dst and
// checks each comes back unchanged from dst.
func roundTrips(t testing.TB, k *net.UDPConn, dst netip.AddrPort, count, size int) {
	t.Helper()
	msg := make([]byte, size)
	buf := make([]byte, 65536)
	for i := 0; i < count; i++ {
		for j := range msg {
			msg[j] = byte(i + j)
		}
		if size >= 8 {
			binary.BigEndian.PutUint64(msg, uint64(i))
		}
		// UDP may lose a datagram on a loaded machine (the race
		// detector's CI runs): one resend after 1.5 s, and the echo of
		// an earlier datagram that comes late is skipped. A reader that
		// never answers still fails.
		var n int
		var from netip.AddrPort
		var err error
	attempts:
		for attempt := 0; attempt < 2; attempt++ {
			if _, err := k.WriteToUDPAddrPort(msg, dst); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			k.SetReadDeadline(time.Now().Add(1500 * time.Millisecond * time.Duration(attempt+1)))
			for {
				n, from, err = k.ReadFromUDPAddrPort(buf)
				if err != nil {
					break
				}
				if size >= 8 && n >= 8 && binary.BigEndian.Uint64(buf) < uint64(i) {
					continue // a late echo of an earlier datagram
				}
				break attempts
			}
		}
		if err != nil {
			t.Fatalf("echo %d of %d-byte datagrams to %v (sent twice): %v", i, size, dst, err)
		}
		if from.Addr().Unmap() != dst.Addr() || from.Port() != dst.Port() || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo %d: %d bytes from %v, want %d from %v", i, n, from, size, dst)
		}
	}
}

// The hello world: a kernel UDP client talks to an xdpnet echo server,
// over IPv4 and IPv6, small and full-size datagrams; the server's
// counters add up.
func TestEchoAgainstKernelClient(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	txOff(t, pair.A)
	for _, tc := range []struct {
		name  string
		laddr netip.AddrPort
		dst   netip.AddrPort
		max   int
	}{
		{"ipv4", netip.AddrPortFrom(pair.B.IPv4, port), netip.AddrPortFrom(pair.B.IPv4, port), 1472},
		{"ipv6", netip.AddrPortFrom(pair.B.IPv6, port), netip.AddrPortFrom(pair.B.IPv6, port), 1452},
		{"dual-stack, to ipv4", netip.AddrPortFrom(netip.IPv6Unspecified(), port), netip.AddrPortFrom(pair.B.IPv4, port), 1472},
		{"dual-stack, to ipv6", netip.AddrPortFrom(netip.IPv6Unspecified(), port), netip.AddrPortFrom(pair.B.IPv6, port), 1452},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t, pair.B, tc.laddr, xdpnet.Config{})
			go echo(c)
			k := kernelUDP(t, pair.A, netip.AddrPortFrom(netip.IPv6Unspecified(), 0))
			for _, size := range []int{0, 1, 100, tc.max} {
				roundTrips(t, k, tc.dst, 20, size)
			}
			tot := c.Stats().Total()
			if tot.Datagrams != 80 || tot.Sent != 80 || tot.Drops.Total() != 0 {
				t.Errorf("stats: %d delivered, %d sent, drops %+v; want 80, 80, none", tot.Datagrams, tot.Sent, tot.Drops)
			}
			c.Close()
		})
	}
}

// The fast path: one goroutine per queue reads views in place and
// answers through its own queue.
func TestEchoQueuesInPlace(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	qs := c.Queues()
	if len(qs) != 5 || qs[4].ID() != xdpnet.KernelQueue {
		t.Fatalf("Queues: %d, want 4 RX queues and the kernel's", len(qs))
	}
	// The first read through a Queue decides how the conn is read.
	if _, err := qs[0].ReadView(make([]xdpnet.Message, 1), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadFromUDPAddrPort(make([]byte, 10)); !errors.Is(err, xdpnet.ErrReadConflict) {
		t.Errorf("ReadFrom after a Queue read: %v, want ErrReadConflict", err)
	}
	var wg sync.WaitGroup
	for _, q := range qs {
		wg.Add(1)
		go func(q *xdpnet.Queue) {
			defer wg.Done()
			msgs := make([]xdpnet.Message, 16)
			for {
				n, err := q.ReadView(msgs, -1)
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						t.Errorf("queue %d: %v", q.ID(), err)
					}
					return
				}
				for i := range n {
					msgs[i].Buf = msgs[i].Buf[:msgs[i].N]
				}
				if _, err := q.WriteBatch(msgs[:n]); err != nil {
					t.Errorf("queue %d write: %v", q.ID(), err)
					return
				}
			}
		}(q)
	}
	// Many flows, so that the datagrams spread over the queues.
	var ks []*net.UDPConn
	for i := 0; i < 8; i++ {
		ks = append(ks, kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, uint16(41000+i))))
	}
	for _, k := range ks {
		roundTrips(t, k, netip.AddrPortFrom(pair.B.IPv4, port), 25, 200)
	}
	st := c.Stats()
	var rxQueues int
	for _, q := range st.Queues {
		if q.Datagrams > 0 {
			rxQueues++
		}
	}
	// (The first answer to each peer leaves through the kernel socket,
	// the kernel queue's, while its next hop is resolved.)
	if tot := st.Total(); tot.Datagrams != 200 || tot.Sent != 200 {
		t.Errorf("delivered %d datagrams and answered %d, want 200 each", tot.Datagrams, tot.Sent)
	}
	t.Logf("%d of 4 queues carried datagrams", rxQueues)
	c.Close()
	wg.Wait()
}

// Batches: ReadBatch copies, WriteBatch sends in order; GSO cuts one
// buffer into datagrams, GRO hands them back as one.
func TestBatchesGSOAndGRO(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	txOff(t, pair.B)
	b := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{GRO: true})
	a := listen(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port), xdpnet.Config{})
	to := netip.AddrPortFrom(pair.B.IPv4, port)
	// GSO: 10 datagrams of 1000 bytes and one of 500 from one message.
	big := make([]byte, 10500)
	for i := range big {
		big[i] = byte(i / 1000)
	}
	if n, err := a.WriteBatch([]xdpnet.Message{{Buf: big, N: len(big), Addr: to, SegSize: 1000}}); n != 1 || err != nil {
		t.Fatalf("GSO write: %d, %v", n, err)
	}
	if st := a.Stats().Total(); st.Sent != 11 {
		t.Errorf("GSO write sent %d datagrams, want 11", st.Sent)
	}
	// GRO: they come back as few messages as the buffers allow, each
	// a run of 1000-byte segments.
	msgs := make([]xdpnet.Message, 4)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 65536)
	}
	var got []byte
	deadline := time.Now().Add(3 * time.Second)
	segs := 0
	for len(got) < len(big) && time.Now().Before(deadline) {
		b.SetReadDeadline(time.Now().Add(time.Second))
		n, err := b.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("ReadBatch: %v", err)
		}
		for _, m := range msgs[:n] {
			if m.Addr != netip.AddrPortFrom(pair.A.IPv4, port) {
				t.Errorf("from %v", m.Addr)
			}
			if m.SegSize != 0 && m.SegSize != 1000 {
				t.Errorf("SegSize %d, want 1000", m.SegSize)
			}
			if m.SegSize == 1000 {
				segs += (m.N + 999) / 1000
			}
			got = append(got, m.Buf[:m.N]...)
		}
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("GRO read %d bytes, want the %d written, in order", len(got), len(big))
	}
	if segs < 2 {
		t.Errorf("GRO merged no datagrams (%d segments in merged messages)", segs)
	}
	// Plain batches in order.
	var out []xdpnet.Message
	for i := 0; i < 20; i++ {
		out = append(out, xdpnet.Message{Buf: []byte(fmt.Sprintf("message %02d", i)), N: 10, Addr: to})
	}
	if n, err := a.WriteBatch(out); n != 20 || err != nil {
		t.Fatalf("WriteBatch: %d, %v", n, err)
	}
	var seen []string
	for len(seen) < 20 {
		b.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := b.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("ReadBatch after %d: %v", len(seen), err)
		}
		for _, m := range msgs[:n] {
			p := m.Buf[:m.N]
			for len(p) > 0 {
				k := len(p)
				if m.SegSize > 0 {
					k = min(k, m.SegSize)
				}
				seen = append(seen, string(p[:k]))
				p = p[k:]
			}
		}
	}
	for i, s := range seen {
		if want := fmt.Sprintf("message %02d", i)[:10]; s != want {
			t.Fatalf("datagram %d = %q, want %q", i, s, want)
		}
	}
}

// Deadlines and Close behave as net.UDPConn's.
func TestDeadlinesAndClose(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	buf := make([]byte, 100)
	c.SetReadDeadline(time.Now().Add(-time.Second))
	_, _, err := c.ReadFrom(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("ReadFrom past its deadline: %v, want a timeout matching os.ErrDeadlineExceeded", err)
	}
	// A deadline set while a read is blocked ends it.
	c.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(buf)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	c.SetReadDeadline(time.Now())
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("blocked ReadFrom after SetReadDeadline(now): %v", err)
		}
		if d := time.Since(start); d > 300*time.Millisecond {
			t.Errorf("it took %v to notice the deadline", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a blocked ReadFrom ignored a new deadline")
	}
	// Close from another goroutine ends a blocked read, and a Queue reader.
	c.SetReadDeadline(time.Time{})
	go func() {
		_, _, err := c.ReadFrom(buf)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked ReadFrom after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end a blocked ReadFrom")
	}
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(pair.A.IPv4, port)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteTo after Close: %v, want net.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	a, err := pair.B.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	if a.Xdp != nil && a.Xdp.Attached {
		t.Errorf("an XDP program is still attached after Close")
	}
}

// A Queue reader blocked without a limit is ended by Close; views held
// over Close stay readable until Release.
func TestCloseEndsQueueReaders(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	qs := c.Queues()
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	if _, err := k.WriteToUDPAddrPort([]byte("held across Close"), netip.AddrPortFrom(pair.B.IPv4, port)); err != nil {
		t.Fatal(err)
	}
	msgs := make([]xdpnet.Message, 4)
	n, err := qs[0].ReadView(msgs, 2*time.Second)
	if n != 1 || err != nil {
		t.Fatalf("ReadView: %d, %v", n, err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := qs[1].ReadView(make([]xdpnet.Message, 4), -1) // the kernel queue
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if string(msgs[0].Buf[:msgs[0].N]) != "held across Close" {
		t.Errorf("view after Close: %q", msgs[0].Buf[:msgs[0].N])
	}
	qs[0].Release()
	if _, err := qs[0].ReadView(msgs, time.Second); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadView after Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked kernel-queue ReadView after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end a blocked ReadView")
	}
}
