//go:build linux

package xsk_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// transmitFrames sends frames through s, waiting for completions, and
// returns when all are completed or the timeout passed.
func transmitFrames(t *testing.T, s *xsk.Socket, frames [][]byte, timeout time.Duration) {
	t.Helper()
	b := s.NewBatch(64)
	deadline := time.Now().Add(timeout)
	next := 0
	for next < len(frames) || s.TXPending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queue %d: %d of %d frames sent, %d pending after %v", s.Queue(), next, len(frames), s.TXPending(), timeout)
		}
		s.Complete()
		if next < len(frames) && b.Len() == 0 {
			n := s.Alloc(b, min(32, len(frames)-next))
			for i := 0; i < n; i++ {
				b.SetLen(i, copy(b.Buffer(i), frames[next+i]))
			}
			next += n
		}
		if _, err := s.Transmit(b); err != nil {
			t.Fatalf("Transmit: %v", err)
		}
		if b.Len() > 0 || s.TXPending() > 0 {
			// Let the peer's kernel drain its backlog.
			time.Sleep(50 * time.Microsecond)
			s.Kick()
		}
	}
}

func TestTransmitModes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		attach     xsk.AttachMode
		noWakeup   bool
		ipv6       bool
		sharedUMEM bool
	}{
		{name: "driver/need_wakeup", attach: xsk.AttachDriver},
		{name: "driver/no_need_wakeup", attach: xsk.AttachDriver, noWakeup: true},
		{name: "generic/need_wakeup", attach: xsk.AttachGeneric},
		{name: "generic/no_need_wakeup", attach: xsk.AttachGeneric, noWakeup: true},
		{name: "driver/ipv6", attach: xsk.AttachDriver, ipv6: true},
		{name: "driver/shared_umem", attach: xsk.AttachDriver, sharedUMEM: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{
				SharedUMEM: tc.sharedUMEM,
				Socket:     xsk.SocketConfig{DisableNeedWakeup: tc.noWakeup},
				Program:    xsk.ProgramConfig{Attach: tc.attach, Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
			})
			if got := d.Program().Mode(); got != tc.attach {
				t.Fatalf("attached in %v mode, want %v", got, tc.attach)
			}
			srcIP, dstIP := pair.B.IPv4, pair.A.IPv4
			if tc.ipv6 {
				srcIP, dstIP = pair.B.IPv6, pair.A.IPv6
			}
			dst := netip.AddrPortFrom(dstIP, 9001)
			ln := listenUDP(t, pair.A, dst)
			ln.SetReadBuffer(8 << 20)

			// RX through the sockets, kernel sender.
			const rxCount = 1000
			done := make(chan *collector)
			go func() { done <- collect(t, d.Sockets(), testPort, rxCount, 20*time.Second) }()
			sendUDP(t, pair.A, netip.AddrPortFrom(srcIP, testPort), 8, rxCount, 100, 200*time.Microsecond)
			if c := <-done; c.frames != rxCount {
				t.Fatalf("received %v, want %d frames", c, rxCount)
			}

			// TX through every socket, kernel receiver.
			const perQueue = 1500
			var want [][]byte
			type result struct{ got [][]byte }
			res := make(chan result)
			go func() { res <- result{readAll(ln, perQueue*len(d.Sockets()), 20*time.Second)} }()
			for _, s := range d.Sockets() {
				var frames [][]byte
				for i := 0; i < perQueue; i++ {
					payload := []byte(fmt.Sprintf("q%d-%06d-", s.Queue(), i))
					payload = append(payload, bytes.Repeat([]byte{byte(i)}, 64+i%700)...)
					want = append(want, payload)
					frames = append(frames, udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(srcIP, uint16(7000+s.Queue())), dst, payload))
				}
				transmitFrames(t, s, frames, 20*time.Second)
			}
			got := (<-res).got
			if len(got) != len(want) {
				t.Fatalf("kernel socket received %d datagrams, sent %d", len(got), len(want))
			}
			seen := map[string]bool{}
			for _, g := range got {
				seen[string(g)] = true
			}
			for _, w := range want {
				if !seen[string(w)] {
					t.Fatalf("datagram %q... not received byte-exact", w[:10])
				}
			}
			for _, s := range d.Sockets() {
				s.Complete()
				st := checkAccounting(t, s)
				if st.TXFrames != perQueue {
					t.Errorf("queue %d: TXFrames %d, want %d", s.Queue(), st.TXFrames, perQueue)
				}
				if st.FramesTX != 0 || st.FramesApp != 0 {
					t.Errorf("queue %d: %d frames still on TX, %d held by app after all completed", s.Queue(), st.FramesTX, st.FramesApp)
				}
				if tc.noWakeup && st.Kicks < uint64(perQueue/32) {
					t.Errorf("queue %d: %d kicks without need_wakeup, want one per Transmit", s.Queue(), st.Kicks)
				}
				t.Logf("queue %d: zero-copy %v, kicks %d, rx %d tx %d", s.Queue(), st.ZeroCopy, st.Kicks, st.RXFrames, st.TXFrames)
			}
		})
	}
}

// TestForwardEcho reflects datagrams back to the sender by swapping MAC
// addresses, IP addresses and ports in place and transmitting the received
// frame itself (no copy). Swapping keeps every checksum valid.
func TestForwardEcho(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared_umem=%v", shared), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			d := openOn(t, pair.B, xsk.Config{SharedUMEM: shared, Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
			stop := make(chan struct{})
			fwdDone := make(chan struct{})
			socks := d.Sockets()
			stopOnce := func() {
				select {
				case <-stop:
				default:
					close(stop)
				}
				<-fwdDone
			}
			// Runs before openOn's cleanup closes the sockets.
			defer stopOnce()
			go func() {
				defer close(fwdDone)
				batches := make([]*xsk.Batch, len(socks))
				for i, s := range socks {
					batches[i] = s.NewBatch(64)
				}
				for {
					select {
					case <-stop:
						for i, s := range socks {
							s.Release(batches[i])
						}
						return
					default:
					}
					idle := true
					for i, s := range socks {
						b := batches[i]
						s.Complete()
						if s.Receive(b) > 0 {
							idle = false
							for j := 0; j < b.Len(); j++ {
								swapEcho(b.Frame(j))
							}
						}
						// With a shared UMEM, queue 0's frames leave through
						// the last socket: frames move between sockets.
						out := s
						if shared {
							out = socks[len(socks)-1]
						}
						if _, err := out.Transmit(b); err != nil {
							t.Errorf("transmit: %v", err)
							return
						}
					}
					if idle {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			var conn = listenUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
			const count = 500
			if out, err := pair.A.Command(context.Background(), "ethtool", "-K", pair.A.Link, "tx", "off").CombinedOutput(); err != nil {
				t.Fatalf("ethtool: %v %s", err, out)
			}
			for i := 0; i < count; i++ {
				msg := binary.BigEndian.AppendUint64(nil, uint64(i))
				msg = append(msg, bytes.Repeat([]byte{0xab}, 100)...)
				if _, err := conn.WriteToUDPAddrPort(msg, netip.AddrPortFrom(pair.B.IPv4, testPort)); err != nil {
					t.Fatal(err)
				}
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 2048)
				n, from, err := conn.ReadFromUDPAddrPort(buf)
				if err != nil {
					stopOnce()
					for _, s := range socks {
						st, _ := s.Stats()
						t.Logf("queue %d stats: %+v", s.Queue(), st)
					}
					t.Fatalf("echo %d: %v", i, err)
				}
				if !bytes.Equal(buf[:n], msg) || from != netip.AddrPortFrom(pair.B.IPv4, testPort) {
					t.Fatalf("echo %d from %v = %x, want %x from %v", i, from, buf[:n], msg, netip.AddrPortFrom(pair.B.IPv4, testPort))
				}
			}
			stopOnce()
			total := 0
			for _, s := range socks {
				deadline := time.Now().Add(2 * time.Second)
				for s.TXPending() > 0 && time.Now().Before(deadline) {
					s.Kick()
					s.Complete()
					time.Sleep(time.Millisecond)
				}
			}
			if shared {
				// Frames migrate between sockets, so account over the UMEM.
				var sum, owned int
				for _, s := range socks {
					st, _ := s.Stats()
					sum += st.FramesFree + st.FramesFill + st.FramesTX + st.FramesApp + st.FramesLost
					owned += st.FramesOwned
					total += int(st.TXFrames)
				}
				if sum != owned {
					t.Errorf("shared UMEM: frames in known places %d, owned %d", sum, owned)
				}
			} else {
				for _, s := range socks {
					total += int(checkAccounting(t, s).TXFrames)
				}
			}
			if total != count {
				t.Errorf("forwarded %d frames, want %d", total, count)
			}
		})
	}
}

// swapEcho turns an Ethernet/IPv4/UDP frame around in place.
func swapEcho(f []byte) {
	for i := 0; i < 6; i++ {
		f[i], f[6+i] = f[6+i], f[i]
	}
	ip := f[14:]
	for i := 0; i < 4; i++ {
		ip[12+i], ip[16+i] = ip[16+i], ip[12+i]
	}
	udp := ip[int(ip[0]&0xf)*4:]
	for i := 0; i < 2; i++ {
		udp[i], udp[2+i] = udp[2+i], udp[i]
	}
}

// Submit leaves frames on the TX ring (copy mode sends only when woken);
// Flush sends them with one kick. Sleep returns early on Close.
func TestSubmitFlushAndSleep(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{NoProgram: true})
	s := d.Sockets()[0]
	dst := netip.AddrPortFrom(pair.A.IPv4, 9001)
	ln := listenUDP(t, pair.A, dst)
	frame := udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(pair.B.IPv4, 7000), dst, []byte("held until flush"))
	b := s.NewBatch(16)
	for round := 0; round < 3; round++ {
		n := s.Alloc(b, 5)
		for i := 0; i < n; i++ {
			b.SetLen(i, copy(b.Buffer(i), frame))
		}
		if got, err := s.Submit(b); got != 5 || err != nil {
			t.Fatalf("Submit = %d, %v", got, err)
		}
		s.Complete() // must not push the held frames out
	}
	st, _ := s.Stats()
	if got := readAll(ln, 1, 100*time.Millisecond); len(got) != 0 || st.Kicks != 0 {
		t.Fatalf("before Flush: %d datagrams arrived, %d kicks; want 0 and 0", len(got), st.Kicks)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(ln, 15, 3*time.Second); len(got) != 15 {
		t.Fatalf("after Flush: %d of 15 datagrams arrived", len(got))
	}
	if st, _ = s.Stats(); st.Kicks != 1 {
		t.Errorf("%d kicks for one Flush of 15 frames, want 1", st.Kicks)
	}

	start := time.Now()
	if err := s.Sleep(20 * time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Sleep(20ms) = %v after %v", err, time.Since(start))
	}
	go func() { time.Sleep(50 * time.Millisecond); s.Close() }()
	start = time.Now()
	if err := s.Sleep(10 * time.Second); err != xsk.ErrClosed || time.Since(start) > 5*time.Second {
		t.Fatalf("Sleep during Close = %v after %v, want ErrClosed promptly", err, time.Since(start))
	}
}
