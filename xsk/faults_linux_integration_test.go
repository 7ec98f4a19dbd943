//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// ipLink runs `ip link ...` in h's namespace.
func ipLink(t *testing.T, h *netnstest.Host, args ...string) {
	t.Helper()
	out, err := h.Command(context.Background(), "ip", append([]string{"link"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link %v in %s: %v: %s", args, h.NS, err, out)
	}
}

// Frames that come back to the pool any way other than Release (here:
// Free of received frames) are lent to the kernel again by the library,
// so a receiver never runs dry: 3 fill rings' worth of datagrams arrive
// on a socket whose fill ring holds 256.
func TestFillRingFedFromPool(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{FillRingSize: 256, RXRingSize: 256},
		UMEM:    xsk.UMEMConfig{NumFrames: 512},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s := d.Sockets()[0]
	const want = 3 * 256
	done := make(chan int)
	go func() {
		b := s.NewBatch(32)
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got < want && time.Now().Before(deadline) {
			if n := s.Receive(b); n > 0 {
				got += n
				s.Free(b) // not Release: the frames go to the pool
				continue
			}
			s.Wait(10*time.Millisecond, false)
		}
		done <- got
	}()
	// Paced so that nothing is dropped for lack of room in the rings.
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 4, want, 32, 2*time.Millisecond)
	if got := <-done; got != want {
		st, _ := s.Stats()
		t.Fatalf("received %d of %d datagrams; stats %+v", got, want, st)
	}
	checkAccounting(t, s)
}

// With TXFrames, one goroutine receives and another sends on the same
// socket at once (run with -race): the two sides share no state, and the
// frame accounting still adds up.
func TestTXFramesSplitSides(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{TXFrames: 1024},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s := d.Sockets()[0]
	peer := listenUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, testPort+1))
	frame := udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(pair.B.IPv4, testPort), netip.AddrPortFrom(pair.A.IPv4, testPort+1), []byte("from the TX side"))
	const rxWant, txWant = 3000, 3000
	var wg sync.WaitGroup
	var received int
	wg.Add(2)
	go func() { // RX side
		defer wg.Done()
		b := s.NewBatch(64)
		deadline := time.Now().Add(10 * time.Second)
		for received < rxWant && time.Now().Before(deadline) {
			if n := s.Receive(b); n > 0 {
				received += n
				s.Release(b)
				continue
			}
			s.Wait(10*time.Millisecond, false)
		}
	}()
	go func() { // TX side
		defer wg.Done()
		b := s.NewBatch(64)
		sent := 0
		deadline := time.Now().Add(10 * time.Second)
		for sent < txWant && time.Now().Before(deadline) {
			n := s.Alloc(b, min(16, txWant-sent))
			for i := 0; i < n; i++ {
				b.SetLen(i, copy(b.Buffer(i), frame))
			}
			k, err := s.Transmit(b)
			if err != nil {
				t.Errorf("transmit: %v", err)
				return
			}
			sent += k
			s.Free(b)
			if k < n {
				s.Wait(time.Millisecond, true)
			}
			time.Sleep(100 * time.Microsecond) // the peer's kernel socket is read one datagram at a time
		}
		for s.TXPending() > 0 && time.Now().Before(deadline) {
			if s.Complete() == 0 {
				s.Kick()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var got [][]byte
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		got = readAll(peer, txWant, 10*time.Second)
	}()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 4, rxWant, 32, 2*time.Millisecond)
	<-readDone
	wg.Wait()
	if received != rxWant {
		t.Errorf("RX side received %d of %d", received, rxWant)
	}
	if len(got) != txWant {
		t.Errorf("peer got %d of %d datagrams from the TX side", len(got), txWant)
	}
	st := checkAccounting(t, s)
	if st.TXFrames != txWant || st.TXSubmitted != txWant {
		t.Errorf("TXFrames %d, TXSubmitted %d, want %d each", st.TXFrames, st.TXSubmitted, txWant)
	}
}

// A device that goes away (deleted) ends every wait and send with an
// error matching ErrNoDevice within about a second: the kernel's poll of
// an unbound AF_XDP socket never reports anything, so without a check
// the receivers would wait for ever.
func TestDeviceDeletedEndsWaits(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	socks := d.Sockets()
	type result struct {
		what string
		err  error
		took time.Duration
	}
	results := make(chan result, 3)
	var gone time.Time
	var mu sync.Mutex
	since := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Since(gone)
	}
	go func() { // one goroutine per queue, waiting without a limit
		for {
			if _, err := socks[0].Wait(-1, false); err != nil {
				results <- result{"Socket.Wait(-1)", err, since()}
				return
			}
		}
	}()
	go func() { // one goroutine for all, with a timeout in a loop
		p := xsk.NewPoller(socks[1])
		for {
			if _, err := p.WaitRX(100 * time.Millisecond); err != nil {
				results <- result{"Poller.WaitRX", err, since()}
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	gone = time.Now()
	mu.Unlock()
	ipLink(t, pair.B, "del", pair.B.Link)
	for range 2 {
		select {
		case r := <-results:
			if !errors.Is(r.err, xsk.ErrNoDevice) {
				t.Errorf("%s after the device was deleted: %v, want ErrNoDevice", r.what, r.err)
			}
			if r.took > 1500*time.Millisecond {
				t.Errorf("%s noticed after %v, want within a second", r.what, r.took)
			}
			t.Logf("%s: %v after %v", r.what, r.err, r.took)
		case <-time.After(5 * time.Second):
			t.Fatal("a wait did not end within 5 s of the device being deleted")
		}
	}
	// Sending learns it at once now.
	b := socks[0].NewBatch(1)
	if socks[0].Alloc(b, 1) == 1 {
		b.SetLen(0, 60)
	}
	if _, err := socks[0].Transmit(b); !errors.Is(err, xsk.ErrNoDevice) {
		t.Errorf("Transmit after the device was deleted: %v, want ErrNoDevice", err)
	}
	socks[0].Free(b)
	if err := socks[1].Err(); !errors.Is(err, xsk.ErrNoDevice) {
		t.Errorf("Err = %v, want ErrNoDevice", err)
	}
	if err := d.Close(); err != nil {
		t.Logf("Close after the device was deleted: %v", err)
	}
}

// A sender on a socket with no RX ring, whose sends make no progress,
// learns that the device is gone through Transmit.
func TestDeviceDeletedEndsSender(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.A, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
	s := d.Sockets()[0]
	frame := udpFrame(pair.A.MAC, pair.B.MAC, netip.AddrPortFrom(pair.A.IPv4, 40000), netip.AddrPortFrom(pair.B.IPv4, testPort), make([]byte, 18))
	errc := make(chan error, 1)
	var deleted time.Time
	var mu sync.Mutex
	go func() {
		b := s.NewBatch(64)
		defer s.Free(b)
		for {
			n := s.Alloc(b, 64-b.Len())
			for i := b.Len() - n; i < b.Len(); i++ {
				b.SetLen(i, copy(b.Buffer(i), frame))
			}
			if _, err := s.Transmit(b); err != nil && !errors.Is(err, xsk.ErrLinkDown) {
				errc <- err
				return
			}
			s.Complete()
		}
	}()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	deleted = time.Now()
	mu.Unlock()
	ipLink(t, pair.A, "del", pair.A.Link)
	select {
	case err := <-errc:
		mu.Lock()
		took := time.Since(deleted)
		mu.Unlock()
		if !errors.Is(err, xsk.ErrNoDevice) {
			t.Fatalf("Transmit after the device was deleted: %v, want ErrNoDevice", err)
		}
		if took > time.Second {
			t.Errorf("the sender noticed after %v, want within a second", took)
		}
		t.Logf("sender: %v after %v", err, took)
	case <-time.After(5 * time.Second):
		t.Fatal("the sender did not notice within 5 s that its device was deleted")
	}
}

// A link that goes down makes Transmit report ErrLinkDown at once, and
// keeps the frames; when the link comes back they leave, and the sender
// goes on. Only completed frames count as sent.
func TestLinkDownThenUpResumesSending(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.A, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
	s := d.Sockets()[0]
	peer := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, testPort))
	frame := udpFrame(pair.A.MAC, pair.B.MAC, netip.AddrPortFrom(pair.A.IPv4, 40000), netip.AddrPortFrom(pair.B.IPv4, testPort), []byte("across an outage"))

	ipLink(t, pair.A, "set", pair.A.Link, "down")
	b := s.NewBatch(16)
	n := s.Alloc(b, 16)
	for i := 0; i < n; i++ {
		b.SetLen(i, copy(b.Buffer(i), frame))
	}
	k, err := s.Transmit(b)
	if !errors.Is(err, xsk.ErrLinkDown) {
		t.Fatalf("Transmit with the link down: %d, %v; want ErrLinkDown", k, err)
	}
	if k != n {
		t.Fatalf("Transmit put %d of %d frames on the ring", k, n)
	}
	st, _ := s.Stats()
	if st.TXFrames != 0 || st.TXSubmitted != uint64(n) || st.FramesTX != n || st.LinkDown == 0 {
		t.Errorf("link down: TXFrames %d (want 0), TXSubmitted %d, FramesTX %d (want %d), LinkDown %d", st.TXFrames, st.TXSubmitted, st.FramesTX, n, st.LinkDown)
	}

	ipLink(t, pair.A, "set", pair.A.Link, "up")
	// Wait for carrier: veth's peer must see the link up too.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.Kick()
		if err == nil {
			break
		}
		if !errors.Is(err, xsk.ErrLinkDown) || time.Now().After(deadline) {
			t.Fatalf("Kick after link up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for s.TXPending() > 0 && time.Now().Before(deadline) {
		if s.Complete() == 0 {
			s.Kick()
			time.Sleep(time.Millisecond)
		}
	}
	if got := readAll(peer, n, 3*time.Second); len(got) != n {
		t.Errorf("peer got %d of the %d frames held across the outage", len(got), n)
	}
	st = checkAccounting(t, s)
	if st.TXFrames != uint64(n) || st.TXBytes != uint64(n*len(frame)) {
		t.Errorf("after link up: TXFrames %d, TXBytes %d; want %d, %d", st.TXFrames, st.TXBytes, n, n*len(frame))
	}
}

// TestTransmitRefusesDescOutsideUMEM: a descriptor the application made up
// (Batch.Append) that points outside the UMEM, or across the end of a
// frame, never reaches the TX ring: Transmit refuses it with
// ErrInvalidConfig, counts nothing as submitted, and the socket goes on
// sending good frames. In zero-copy mode the driver would otherwise read
// the device's DMA from wherever the address points.
func TestTransmitRefusesDescOutsideUMEM(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s := d.Sockets()[0]
	u := s.UMEM()
	size := uint64(u.NumFrames() * u.FrameSize())
	for _, bad := range []xsk.Desc{
		{Addr: size, Len: 64},                           // past the end
		{Addr: size - 32, Len: 64},                      // across the end
		{Addr: uint64(u.FrameSize()) - 16, Len: 64},     // across a frame boundary
		{Addr: 1 << 40, Len: 64},                        // far outside
		{Addr: uint64(u.FrameSize()) * 2, Len: 1 << 20}, // longer than a frame
	} {
		b := s.NewBatch(1)
		b.Append(bad)
		n, err := s.Transmit(b)
		if n != 0 || !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("Transmit(%+v) = %d, %v; want 0 and ErrInvalidConfig", bad, n, err)
		}
		b.Reset() // the made-up descriptor was never a frame of the socket
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TXSubmitted != 0 || st.TXInvalidDescs != 0 {
		t.Fatalf("after refused descriptors: submitted %d, kernel-invalid %d; want 0, 0", st.TXSubmitted, st.TXInvalidDescs)
	}
	// The socket still sends.
	peer := listenUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, testPort+1))
	frame := udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(pair.B.IPv4, testPort), netip.AddrPortFrom(pair.A.IPv4, testPort+1), []byte("after the refusals"))
	b := s.NewBatch(1)
	if s.Alloc(b, 1) != 1 {
		t.Fatal("no frame to send")
	}
	b.SetLen(0, copy(b.Buffer(0), frame))
	if _, err := s.Transmit(b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := peer.ReadFrom(buf); err != nil || string(buf[:n]) != "after the refusals" {
		t.Fatalf("peer read %q, %v", buf[:n], err)
	}
}
