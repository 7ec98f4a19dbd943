//go:build linux

package xsk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// Device.Receive, in each shape, hands the handler every datagram the
// kernel's UDP stack sent exactly once, gives the frames back (the
// accounting of every socket adds up), and returns nil promptly when its
// context ends.
func TestReceiveRunner(t *testing.T) {
	cfgs := map[string]xsk.RunConfig{}
	for _, shape := range []xsk.Shape{xsk.ShapePerQueue, xsk.ShapeOne, xsk.ShapeAuto} {
		cfgs[shape.String()] = xsk.RunConfig{Shape: shape}
	}
	// Epoll busy polling: on veth it only spins (no NAPI ID on its AF_XDP
	// queues), but every datagram must still arrive once, and a stop
	// must still wake the epoll wait.
	cfgs["busy-poll"] = xsk.RunConfig{Shape: xsk.ShapePerQueue, BusyPoll: xsk.BusyPoll{Timeout: 20 * time.Microsecond}}
	for name, rc := range cfgs {
		t.Run(name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
			const want = 3000
			var mu sync.Mutex
			seen := map[uint64]int{}
			perQueue := map[int]int{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- d.Receive(ctx, rc, func(s *xsk.Socket, b *xsk.Batch) {
					mu.Lock()
					defer mu.Unlock()
					for i := range b.Len() {
						p, ok := udpPayload(b.Frame(i), testPort)
						if !ok || len(p) < 8 {
							continue
						}
						seen[binary.BigEndian.Uint64(p)]++
						perQueue[s.Queue()]++
					}
					if len(seen) >= want {
						cancel()
					}
				})
			}()
			sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 16, want, 64, 200*time.Microsecond)
			var err error
			select {
			case err = <-done:
			case <-time.After(25 * time.Second):
				t.Fatal("Receive did not return after its context ended")
			}
			if err != nil {
				t.Fatalf("Receive = %v, want nil after the context ended", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != want {
				t.Fatalf("handler saw %d distinct datagrams of %d", len(seen), want)
			}
			for seq, n := range seen {
				if n != 1 {
					t.Fatalf("datagram %d seen %d times", seq, n)
				}
			}
			if len(perQueue) != 2 {
				t.Errorf("datagrams per queue %v: want both queues used", perQueue)
			}
			for _, s := range d.Sockets() {
				st := checkAccounting(t, s)
				if st.FramesApp != 0 {
					t.Errorf("queue %d: the application still holds %d frames after Receive returned", s.Queue(), st.FramesApp)
				}
			}
			// The sockets are usable again by hand once Receive returned:
			// the stop does not leave a wake-up behind.
			s := d.Sockets()[0]
			start := time.Now()
			if ready, err := s.Wait(30*time.Millisecond, false); err != nil || ready {
				t.Fatalf("Wait after Receive = %v, %v; want a timeout", ready, err)
			}
			if el := time.Since(start); el < 25*time.Millisecond {
				t.Fatalf("Wait(30ms) after Receive returned after %v: a stale wake-up", el)
			}
		})
	}
}

// A context that is already done, or ends while Receive waits on idle
// sockets, makes Receive return nil at once.
func TestReceiveRunnerStops(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	h := func(*xsk.Socket, *xsk.Batch) {}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Receive(ctx, xsk.RunConfig{}, h); err != nil {
		t.Fatalf("Receive with a done context = %v", err)
	}
	for _, rc := range []xsk.RunConfig{{Shape: xsk.ShapePerQueue}, {Shape: xsk.ShapeOne}, {BusyPoll: xsk.BusyPoll{Timeout: 50 * time.Microsecond}}} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		err := d.Receive(ctx, rc, h)
		cancel()
		if err != nil {
			t.Fatalf("%+v: Receive = %v", rc, err)
		}
		if el := time.Since(start); el > 200*time.Millisecond {
			t.Errorf("%+v: Receive returned %v after a 50 ms context", rc, el)
		}
	}
	// Bad busy-poll parameters are refused before anything runs.
	for _, bp := range []xsk.BusyPoll{{Timeout: -1}, {Timeout: 2 * time.Second}, {Timeout: time.Microsecond, Budget: 70000}} {
		p := xsk.NewPoller(d.Sockets()...)
		if err := p.BusyPoll(bp); !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("Poller.BusyPoll(%+v) = %v, want ErrInvalidConfig", bp, err)
		}
		p.Close()
	}
}

// Closing the device under a running Receive ends it with ErrClosed; a
// device that goes away ends it with ErrNoDevice.
func TestReceiveRunnerEnds(t *testing.T) {
	for _, shape := range []xsk.Shape{xsk.ShapePerQueue, xsk.ShapeOne} {
		t.Run("close/"+shape.String(), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
			done := make(chan error, 1)
			go func() {
				done <- d.Receive(context.Background(), xsk.RunConfig{Shape: shape}, func(*xsk.Socket, *xsk.Batch) {})
			}()
			time.Sleep(20 * time.Millisecond)
			d.Close()
			select {
			case err := <-done:
				if !errors.Is(err, xsk.ErrClosed) {
					t.Fatalf("Receive after Close = %v, want ErrClosed", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Receive did not return after Close")
			}
		})
		t.Run("gone/"+shape.String(), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
			done := make(chan error, 1)
			go func() {
				done <- d.Receive(context.Background(), xsk.RunConfig{Shape: shape}, func(*xsk.Socket, *xsk.Batch) {})
			}()
			time.Sleep(20 * time.Millisecond)
			err := pair.B.Do(func() error {
				l, err := netlink.LinkByName(pair.B.Link)
				if err != nil {
					return err
				}
				return netlink.LinkDel(l)
			})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			select {
			case err := <-done:
				if !errors.Is(err, xsk.ErrNoDevice) {
					t.Fatalf("Receive after the device went = %v, want ErrNoDevice", err)
				}
				t.Logf("ended %v after the delete: %v", time.Since(start), err)
			case <-time.After(2 * time.Second):
				t.Fatal("Receive did not notice the device was deleted within 2 s")
			}
		})
	}
}

// Device.Send fills and sends frames on every queue until each filler
// says stop; the kernel's UDP socket on the peer gets every datagram.
func TestSendRunner(t *testing.T) {
	for _, shape := range []xsk.Shape{xsk.ShapePerQueue, xsk.ShapeOne} {
		t.Run(shape.String(), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{NoProgram: true})
			dst := netip.AddrPortFrom(pair.A.IPv4, testPort)
			c := listenUDP(t, pair.A, dst)
			const perQueue = 600
			var sent [2]atomic.Int64
			read := make(chan [][]byte, 1)
			go func() { read <- readAll(c, 2*perQueue, 5*time.Second) }()
			err := d.Send(context.Background(), xsk.RunConfig{Shape: shape, Batch: 32}, func(s *xsk.Socket, b *xsk.Batch) error {
				q := s.Queue()
				for i := range b.Len() {
					n := sent[q].Load()
					if n == perQueue {
						return xsk.ErrStop // the rest of b stays at length 0
					}
					payload := make([]byte, 16)
					binary.BigEndian.PutUint64(payload, uint64(q)<<32|uint64(n))
					src := netip.AddrPortFrom(pair.B.IPv4, uint16(41000+q))
					f := udpFrame(pair.B.MAC, pair.A.MAC, src, dst, payload)
					b.SetLen(i, copy(b.Buffer(i), f))
					sent[q].Add(1)
					// Pace for the peer's kernel socket, which reads one
					// datagram at a time.
					if n%64 == 63 {
						time.Sleep(time.Millisecond)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			got := <-read
			seen := map[uint64]bool{}
			for _, p := range got {
				if len(p) >= 8 {
					seen[binary.BigEndian.Uint64(p)] = true
				}
			}
			if len(seen) != 2*perQueue {
				t.Fatalf("peer received %d distinct datagrams, want %d", len(seen), 2*perQueue)
			}
			for _, s := range d.Sockets() {
				st := checkAccounting(t, s)
				if st.TXFrames != perQueue || st.FramesTX != 0 || st.FramesApp != 0 {
					t.Errorf("queue %d: sent %d (want %d), %d on the TX ring, %d held after Send returned", s.Queue(), st.TXFrames, perQueue, st.FramesTX, st.FramesApp)
				}
			}
		})
	}
}

// A filler's error ends Send with it, and a bad configuration is refused
// before anything runs.
func TestRunnerErrors(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	boom := errors.New("boom")
	if err := d.Send(context.Background(), xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Send with a failing filler = %v, want its error", err)
	}
	for _, cfg := range []xsk.RunConfig{{Batch: -1}, {Batch: 5000}, {Shape: 7}} {
		if err := d.Receive(context.Background(), cfg, func(*xsk.Socket, *xsk.Batch) {}); !errors.Is(err, xsk.ErrInvalidConfig) {
			t.Errorf("Receive with %+v = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if err := d.Receive(context.Background(), xsk.RunConfig{}, nil); !errors.Is(err, xsk.ErrInvalidConfig) {
		t.Errorf("Receive with a nil handler = %v, want ErrInvalidConfig", err)
	}
	for _, s := range d.Sockets() {
		if st := checkAccounting(t, s); st.FramesApp != 0 {
			t.Errorf("the failed Send left %d frames with the application", st.FramesApp)
		}
	}
}

// Closing the device under a running Send ends it with ErrClosed, in each
// shape, and the filler is not called again afterwards.
func TestSendRunnerClose(t *testing.T) {
	for _, shape := range []xsk.Shape{xsk.ShapePerQueue, xsk.ShapeOne} {
		t.Run(shape.String(), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{NoProgram: true})
			frame := udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(pair.B.IPv4, 41000), netip.AddrPortFrom(pair.A.IPv4, testPort), make([]byte, 18))
			var closed atomic.Bool
			var lateCalls atomic.Int64
			done := make(chan error, 1)
			go func() {
				done <- d.Send(context.Background(), xsk.RunConfig{Shape: shape, Batch: 16}, func(s *xsk.Socket, b *xsk.Batch) error {
					if closed.Load() {
						lateCalls.Add(1)
					}
					for i := range b.Len() {
						b.SetLen(i, copy(b.Buffer(i), frame))
					}
					time.Sleep(100 * time.Microsecond) // a paced sender
					return nil
				})
			}()
			time.Sleep(50 * time.Millisecond)
			d.Close()
			closed.Store(true)
			select {
			case err := <-done:
				if !errors.Is(err, xsk.ErrClosed) {
					t.Fatalf("Send after Close = %v, want ErrClosed", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Send did not return after Close")
			}
			// A filler already running when Close began may finish; none
			// starts after Send saw the sockets closed.
			if n := lateCalls.Load(); n > 2 {
				t.Errorf("the filler ran %d times after Close", n)
			}
		})
	}
}

// Receive and Send on a closed device return ErrClosed at once.
func TestRunnerOnClosedDevice(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	d.Close()
	if err := d.Receive(context.Background(), xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) {}); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("Receive on a closed device = %v, want ErrClosed", err)
	}
	if err := d.Send(context.Background(), xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) error { return nil }); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("Send on a closed device = %v, want ErrClosed", err)
	}
}

// A handler may close the device: Receive then returns ErrClosed, and the
// frames the handler held stayed readable to the end of the call.
func TestReceiveRunnerCloseFromHandler(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	var seen atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- d.Receive(context.Background(), xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) {
			d.Close()
			for i := range b.Len() {
				if _, ok := udpPayload(b.Frame(i), testPort); ok {
					seen.Add(1)
				}
			}
		})
	}()
	// One datagram per flow: after the Close, a second one on a flow
	// would meet the kernel's port-unreachable for the first.
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 8, 8, 64, 0)
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("Receive after its handler closed the device = %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Receive did not return after its handler closed the device")
	}
	if seen.Load() == 0 {
		t.Fatal("the handler read no datagram")
	}
}
