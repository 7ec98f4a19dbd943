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
	"syscall"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
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

// The port is reserved with a kernel socket: taken ports fail like
// net.ListenUDP, and the kernel does not hand the port to anyone else.
func TestPortReservation(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	kernelUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port))
	err := pair.B.Do(func() error {
		c, err := xdpnet.ListenUDP(pair.B.Link, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("ListenUDP on a taken port: %v, want EADDRINUSE", err)
	}
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port+1), xdpnet.Config{})
	err = pair.B.Do(func() error {
		k, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, port+1)))
		if err == nil {
			k.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("net.ListenUDP on an xdpnet port: %v, want EADDRINUSE", err)
	}
	// The interface's queues are the conn's: a second conn on them is
	// refused, and says why.
	err = pair.B.Do(func() error {
		c2, err := xdpnet.ListenUDP(pair.B.Link, netip.AddrPortFrom(pair.B.IPv4, port+2), xdpnet.Config{})
		if err == nil {
			c2.Close()
		}
		return err
	})
	if !errors.Is(err, xsk.ErrBusy) {
		t.Errorf("a second conn on the same queues: %v, want xsk.ErrBusy", err)
	}
	c.Close()
	// Port 0 picks one.
	z := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, 0), xdpnet.Config{})
	if z.LocalAddrPort().Port() == 0 {
		t.Errorf("LocalAddrPort after port 0: %v", z.LocalAddrPort())
	}
	z.Close()
}

// Writes that cannot be sent fail with the error net.UDPConn gives, and
// send nothing.
func TestWriteErrors(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{ResolveTimeout: 300 * time.Millisecond})
	peer := netip.AddrPortFrom(pair.A.IPv4, port)
	if _, err := c.WriteToUDPAddrPort(make([]byte, 1473), peer); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("1473 bytes over a 1500-byte MTU: %v, want EMSGSIZE", err)
	}
	if _, err := c.WriteToUDPAddrPort(make([]byte, 1472), peer); err != nil {
		t.Errorf("1472 bytes: %v", err)
	}
	// That one may leave through the AF_XDP queue (the peer's hop is a
	// static neighbour, cached or not yet): count from here.
	st0 := c.Stats().Queues[0]
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("198.19.200.1:9")); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("no route: %v, want ENETUNREACH", err)
	}
	// Nobody answers: the first datagram goes to the kernel, which queues
	// it while it resolves (and drops it when nobody answers); once the
	// resolution failed, writes fail at once, naming the address.
	nobody := netip.AddrFrom4([4]byte(append(pair.B.IPv4.AsSlice()[:3:3], 250)))
	start := time.Now()
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(nobody, 9)); err != nil {
		t.Errorf("the first write to an unresolved neighbour: %v, want it handed to the kernel", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the first write to an unresolved neighbour blocked %v", d)
	}
	var err error
	for time.Since(start) < 2*time.Second {
		if _, err = c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(nobody, 9)); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Errorf("nobody answers: %v, want EHOSTUNREACH", err)
	}
	if err != nil && !bytes.Contains([]byte(err.Error()), []byte(nobody.String())) {
		t.Errorf("the error does not name %v: %v", nobody, err)
	}
	t.Logf("unanswered resolution failed after %v: %v", time.Since(start), err)
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(pair.A.IPv6, 9)); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Errorf("IPv6 from an IPv4 conn: %v, want EAFNOSUPPORT", err)
	}
	if st := c.Stats().Queues[0]; st.Sent != st0.Sent || st.Socket.TXSubmitted != st0.Socket.TXSubmitted {
		t.Errorf("the AF_XDP queue sent %d datagrams after the first: the refused ones must not go, and the others went to the kernel while their hops were resolved", st.Sent-st0.Sent)
	}
}

// What arrives damaged is never delivered, and is counted by cause.
func TestDamagedFramesCounted(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	// With A's TX checksum offload on, the kernel leaves the checksum to
	// veth, which never computes it: partial checksums.
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	for i := 0; i < 10; i++ {
		k.WriteToUDPAddrPort([]byte("partial checksum"), netip.AddrPortFrom(pair.B.IPv4, port))
	}
	// A raw frame with a wrong checksum and a truncated one, from AF_XDP.
	var tx *xsk.Device
	if err := pair.A.Do(func() (err error) {
		tx, err = xsk.Open(pair.A.Link, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	good := rawUDP(pair, []byte("a good datagram"))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	short := append([]byte(nil), good[:14+20+4]...)
	sendRaw(t, tx.Sockets()[0], good, bad, short, bad)
	buf := make([]byte, 100)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "a good datagram" {
		t.Fatalf("ReadFrom: %q, %v; want only the good datagram", buf[:n], err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := c.ReadFromUDPAddrPort(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a damaged datagram was delivered: %q, %v", buf[:n], err)
	}
	tot := c.Stats().Total()
	d := tot.Drops
	if d.PartialChecksum != 10 || d.BadChecksum != 2 || d.Malformed != 1 {
		t.Errorf("drops %+v, want 10 partial checksums, 2 bad checksums, 1 malformed", d)
	}
	// A dropped datagram is a drop only: the copying read sums the
	// checksum while it copies, and once counted it twice.
	if tot.Datagrams != 1 || tot.Bytes != uint64(len("a good datagram")) {
		t.Errorf("%d datagrams, %d bytes counted; want the one good datagram", tot.Datagrams, tot.Bytes)
	}
	if tot.Socket.RXFrames != tot.Datagrams+d.Total() {
		t.Errorf("the socket took %d frames; %d datagrams + %d drops", tot.Socket.RXFrames, tot.Datagrams, d.Total())
	}
	// Accepted where asked for: the kernel's own datagrams over veth.
	c.Close()
	c2 := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{RXChecksum: xdpnet.RXChecksumAcceptPartial})
	k.WriteToUDPAddrPort([]byte("partial, accepted"), netip.AddrPortFrom(pair.B.IPv4, port))
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _, err := c2.ReadFromUDPAddrPort(buf); err != nil || string(buf[:n]) != "partial, accepted" {
		t.Errorf("RXChecksumAcceptPartial: %q, %v", buf[:n], err)
	}
}

// rawUDP is a datagram from A to B's conn, with checksums computed by the
// kernel-independent code of the test (gopacket in frame_test.go covers
// the package's own builder).
func rawUDP(pair *netnstest.Pair, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:], pair.B.MAC)
	copy(f[6:], pair.A.MAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], pair.A.IPv4.AsSlice())
	copy(ip[16:], pair.B.IPv4.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], ^fold(ip[:20], 0))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(udp[8:], payload)
	ph := append(append(append([]byte{}, ip[12:20]...), 0, 17), byte((8+len(payload))>>8), byte(8+len(payload)))
	binary.BigEndian.PutUint16(udp[6:], ^fold(udp, fold(ph, 0)))
	return f
}

func fold(b []byte, init uint16) uint16 {
	s := uint32(init)
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func sendRaw(t *testing.T, s *xsk.Socket, frames ...[]byte) {
	t.Helper()
	b := s.NewBatch(len(frames))
	if s.Alloc(b, len(frames)) != len(frames) {
		t.Fatal("no TX frames")
	}
	for i, f := range frames {
		b.SetLen(i, copy(b.Buffer(i), f))
	}
	if _, err := s.Transmit(b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for s.TXPending() > 0 && time.Now().Before(deadline) {
		if s.Complete() == 0 {
			s.Kick()
			time.Sleep(time.Millisecond)
		}
	}
}

// IPv4 fragments reach the kernel, which reassembles them, and the conn
// reads the datagram from its kernel socket.
func TestFragmentedDatagramsThroughTheKernel(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	big := bytes.Repeat([]byte("fragment "), 400) // 3600 bytes: three fragments
	if _, err := k.WriteToUDPAddrPort(big, netip.AddrPortFrom(pair.B.IPv4, port)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("fragmented datagram: %d bytes, %v", n, err)
	}
	if from.Addr() != pair.A.IPv4 {
		t.Errorf("from %v", from)
	}
	st := c.Stats().Queues
	if kq := st[len(st)-1]; kq.Queue != xdpnet.KernelQueue || kq.Datagrams != 1 {
		t.Errorf("the kernel queue delivered %d datagrams, want 1", kq.Datagrams)
	}
}

// A connected conn exchanges datagrams with its peer only.
func TestDialUDP(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	peer := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port))
	other := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, port+1))
	var c *xdpnet.UDPConn
	if err := pair.B.Do(func() (err error) {
		c, err = xdpnet.DialUDP(pair.B.Link, netip.AddrPort{}, netip.AddrPortFrom(pair.A.IPv4, port), xdpnet.Config{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddrPort()
	if local.Addr() != pair.B.IPv4 || local.Port() == 0 {
		t.Fatalf("LocalAddr %v: want %v and a chosen port", local, pair.B.IPv4)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	peer.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := peer.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "hello" || from.Addr().Unmap() != local.Addr() || from.Port() != local.Port() {
		t.Fatalf("peer got %q from %v (%v), want hello from %v", buf[:n], from, err, local)
	}
	other.WriteToUDPAddrPort([]byte("not from the peer"), local)
	peer.WriteToUDPAddrPort([]byte("from the peer"), local)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err = c.Read(buf)
	if err != nil || string(buf[:n]) != "from the peer" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}
	if d := c.Stats().Total().Drops; d.OtherPeer != 1 {
		t.Errorf("drops %+v, want one from another peer", d)
	}
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(pair.A.IPv4, port)); !errors.Is(err, syscall.EISCONN) {
		t.Errorf("WriteTo on a connected conn: %v, want EISCONN", err)
	}
}

// The next hop through a gateway comes from the kernel's route.
func TestSendThroughGateway(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	// 198.19.5.7 lives on A's loopback; B reaches it through A.
	run(t, pair.A, "ip", "addr", "add", "198.19.5.7/32", "dev", "lo")
	run(t, pair.B, "ip", "route", "add", "198.19.5.0/24", "via", pair.A.IPv4.String())
	far := kernelUDP(t, pair.A, netip.MustParseAddrPort("198.19.5.7:9500"))
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	if _, err := c.WriteToUDPAddrPort([]byte("through the gateway"), netip.MustParseAddrPort("198.19.5.7:9500")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	far.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := far.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "through the gateway" || from.Addr().Unmap() != pair.B.IPv4 {
		t.Fatalf("far end got %q from %v: %v", buf[:n], from, err)
	}
}

// A device that goes away ends a blocked read with ErrNoDevice.
func TestDeviceGoneEndsReads(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(make([]byte, 100))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	run(t, pair.B, "ip", "link", "del", pair.B.Link)
	select {
	case err := <-errc:
		if !errors.Is(err, xsk.ErrNoDevice) {
			t.Errorf("read after the device went away: %v, want ErrNoDevice", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("noticed after %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a blocked read did not notice its device went away")
	}
}
