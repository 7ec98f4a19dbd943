//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// xdpAttached reports whether any XDP program is attached to h's veth, as
// netlink tells.
func xdpAttached(t *testing.T, h *netnstest.Host) bool {
	t.Helper()
	a, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	x := a.Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

func TestCloseDetaches(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var d *xsk.Device
	if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, xsk.Config{}); return }); err != nil {
		t.Fatal(err)
	}
	if !xdpAttached(t, pair.B) {
		t.Fatal("no XDP program on the interface after Open")
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if xdpAttached(t, pair.B) {
		t.Fatal("XDP program still attached after Close")
	}
	// Re-open right away: the kernel may still be tearing the old sockets
	// down; Open must cope.
	for i := 0; i < 3; i++ {
		if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, xsk.Config{}); return }); err != nil {
			t.Fatalf("re-open %d: %v", i, err)
		}
		d.Close()
	}
}

// TestHelperHoldSockets is not a test: TestKilledProcessDetaches runs the
// test binary with XDPIO_HELPER_IFACE set to make it hold sockets open
// until killed.
func TestHelperHoldSockets(t *testing.T) {
	ifname := os.Getenv("XDPIO_HELPER_IFACE")
	if ifname == "" {
		t.Skip("helper process for TestKilledProcessDetaches")
	}
	var cfg xsk.Config
	if os.Getenv("XDPIO_HELPER_NAPI") != "" {
		// The lab's crash test: hold NAPI deferral when killed.
		cfg.NAPIDeferral = &xsk.NAPIDeferral{DeferHardIRQs: 7, GROFlushTimeout: 70 * time.Microsecond}
	}
	if p := os.Getenv("XDPIO_HELPER_UDPPORT"); p != "" {
		// The dispatcher's crash test: only this port to the sockets.
		port, _ := strconv.Atoi(p)
		cfg.Program.Filter = []xsk.Rule{xsk.UDPPort(uint16(port))}
	}
	d, err := xsk.Open(ifname, cfg)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Printf("ready %d\n", len(d.Sockets()))
	time.Sleep(30 * time.Second)
	os.Exit(2)
}

func TestKilledProcessDetaches(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	cmd := holdSockets(t, pair.B, "XDPIO_HELPER_IFACE="+pair.B.Link)
	if !xdpAttached(t, pair.B) {
		t.Fatal("helper holds sockets but no XDP program is attached")
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for xdpAttached(t, pair.B) {
		if time.Now().After(deadline) {
			t.Fatal("XDP program still attached 5 s after the holding process was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFilterPassesOtherTraffic: with sockets open for one UDP port, ping,
// a TCP connection and UDP to another port still reach B's kernel stack,
// while the chosen port goes to the sockets.
func TestFilterPassesOtherTraffic(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
		if out, err := pair.A.Command(ctx, "ping", "-c", "2", "-i", "0.2", "-W", "2", dst.String()).CombinedOutput(); err != nil {
			t.Fatalf("ping %v while sockets are open: %v\n%s", dst, err, out)
		}
	}

	// TCP to B's kernel.
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(pair.B.IPv4.String(), "2222"))
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello over tcp"))
			c.Close()
		}
	}()
	var conn net.Conn
	if err := pair.A.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(pair.B.IPv4.String(), "2222"), 5*time.Second)
		return
	}); err != nil {
		t.Fatalf("TCP connect while sockets are open: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	conn.Close()
	if string(buf[:n]) != "hello over tcp" {
		t.Fatalf("TCP read %q", buf[:n])
	}

	// UDP to another port reaches the kernel; UDP to the filtered port
	// reaches the sockets, not the kernel.
	other := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, testPort+1))
	kernelOnFiltered := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, testPort))
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), testPort, 100, 10*time.Second) }()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 4, 100, 64, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort+1), 4, 100, 64, 0)
	if c := <-done; c.frames != 100 {
		t.Errorf("sockets received %v, want 100 frames", c)
	}
	if got := readAll(other, 100, 5*time.Second); len(got) != 100 {
		t.Errorf("kernel socket on the unfiltered port got %d datagrams, want 100", len(got))
	}
	if got := readAll(kernelOnFiltered, 1, 200*time.Millisecond); len(got) != 0 {
		t.Errorf("kernel socket on the filtered port got %d datagrams, want 0 (they belong to AF_XDP)", len(got))
	}
}

func TestFilterRules(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	// Port range over UDP only, and IPv6 only.
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{
		{EtherType: 0x86dd, Protocol: 17, DstPortMin: 9100, DstPortMax: 9199},
	}}})
	in := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, 9150))
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), 9150, 50, 10*time.Second) }()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv6, 9150), 1, 50, 64, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, 9150), 1, 50, 64, 0)
	if c := <-done; c.frames != 50 {
		t.Errorf("IPv6 in range: sockets got %v, want 50", c)
	}
	if got := readAll(in, 50, 5*time.Second); len(got) != 50 {
		t.Errorf("IPv4 to the same port is outside the rule and must reach the kernel: got %d of 50", len(got))
	}
	// Outside the range reaches the kernel even over IPv6.
	in6 := listenUDP(t, pair.B, netip.AddrPortFrom(pair.B.IPv6, 9200))
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv6, 9200), 1, 20, 64, 0)
	if got := readAll(in6, 20, 5*time.Second); len(got) != 20 {
		t.Errorf("IPv6 port 9200 is outside 9100-9199: kernel got %d of 20", len(got))
	}
}

func TestOpenErrors(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	open := func(name string, cfg xsk.Config) error {
		var d *xsk.Device
		err := pair.B.Do(func() (err error) { d, err = xsk.Open(name, cfg); return })
		if err == nil {
			d.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name   string
		ifname string
		cfg    xsk.Config
		want   error
		text   string
	}{
		{"no such interface", "nope0", xsk.Config{}, xsk.ErrNoDevice, "nope0"},
		{"queue out of range", pair.B.Link, xsk.Config{Queues: []int{5}}, xsk.ErrInvalidConfig, "RX queues 0-1"},
		{"ring not power of two", pair.B.Link, xsk.Config{Socket: xsk.SocketConfig{RXRingSize: 1000}}, xsk.ErrInvalidConfig, "power of two"},
		{"frame size", pair.B.Link, xsk.Config{UMEM: xsk.UMEMConfig{FrameSize: 3000}}, xsk.ErrInvalidConfig, "frame size 3000"},
		{"negative RX nap", pair.B.Link, xsk.Config{Socket: xsk.SocketConfig{RXNap: -time.Millisecond}}, xsk.ErrInvalidConfig, "RX nap -1ms"},
		{"zero-copy on veth", pair.B.Link, xsk.Config{Socket: xsk.SocketConfig{Bind: xsk.BindZeroCopy}}, xsk.ErrNotSupported, "zero-copy"},
		{"UMEM too small", pair.B.Link, xsk.Config{SharedUMEM: true, UMEM: xsk.UMEMConfig{NumFrames: 1}}, xsk.ErrInvalidConfig, "frames"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := open(tc.ifname, tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want errors.Is %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not mention %q", err, tc.text)
			}
		})
	}

	t.Run("another program attached", func(t *testing.T) {
		var first *xsk.Device
		if err := pair.B.Do(func() (err error) { first, err = xsk.Open(pair.B.Link, xsk.Config{}); return }); err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		err := open(pair.B.Link, xsk.Config{Queues: []int{0}, NoProgram: true})
		if !errors.Is(err, xsk.ErrBusy) || !strings.Contains(err.Error(), "socket is bound to this queue") {
			t.Fatalf("second Open on a bound queue = %v, want ErrBusy naming the queue", err)
		}
		// With a program of its own, Open names the attached one first:
		// xdpio's own, held by the first Device's bpf_link.
		err = open(pair.B.Link, xsk.Config{Queues: []int{0}})
		if !errors.Is(err, xsk.ErrBusy) || !strings.Contains(err.Error(), "xdpio's own program") || !strings.Contains(err.Error(), "bpf_link") {
			t.Fatalf("second Open = %v, want ErrBusy naming the attached program", err)
		}
		for _, mode := range []xsk.AttachMode{xsk.AttachAuto, xsk.AttachDriver} {
			err = pair.B.Do(func() error {
				p, err := xsk.NewProgram(pair.B.Ifindex, xsk.ProgramConfig{Attach: mode})
				if err == nil {
					p.Close()
				}
				return err
			})
			if !errors.Is(err, xsk.ErrBusy) || !strings.Contains(err.Error(), "xdpio's own program") {
				t.Fatalf("second program (%v) = %v, want ErrBusy naming the attached program", mode, err)
			}
		}
		if xdpAttached(t, pair.B) == false {
			t.Fatal("the failed Open removed the first program")
		}
	})

}

// Close from another goroutine wakes a Wait that has no deadline.
func TestCloseWakesWait(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var d *xsk.Device
	// A port nobody sends to: the kernel's own IPv6 chatter (MLD, router
	// solicitations) must not reach the socket.
	cfg := xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9999)}}}
	if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, cfg); return }); err != nil {
		t.Fatal(err)
	}
	s := d.Sockets()[0]
	done := make(chan error, 1)
	go func() {
		_, err := s.Wait(-1, false)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before Close, with no traffic", err)
	default:
	}
	go d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Fatalf("Wait after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Wait within 5 s")
	}
}

// Close from another goroutine while the owner is busy receiving and
// releasing under traffic: the owner's calls in progress finish, the next
// ones report the socket closed, and nothing touches unmapped rings.
func TestCloseDuringTraffic(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	for round := 0; round < 3; round++ {
		var d *xsk.Device
		cfg := xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}}}
		if err := pair.B.Do(func() (err error) { d, err = xsk.Open(pair.B.Link, cfg); return }); err != nil {
			t.Fatal(err)
		}
		stopSend := make(chan struct{})
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			pair.A.Do(func() error {
				c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, testPort)))
				if err != nil {
					return err
				}
				defer c.Close()
				for i := 0; i < 200000; i++ {
					select {
					case <-stopSend:
						return nil
					default:
					}
					c.Write([]byte("traffic while closing"))
				}
				return nil
			})
		}()
		owners := make(chan error, len(d.Sockets()))
		for _, s := range d.Sockets() {
			go func(s *xsk.Socket) {
				b := s.NewBatch(64)
				for {
					if s.Receive(b) == 0 {
						if _, err := s.Wait(10*time.Millisecond, false); err != nil {
							owners <- err
							return
						}
						continue
					}
					s.Release(b)
				}
			}(s)
		}
		time.Sleep(100 * time.Millisecond)
		d.Close()
		for range d.Sockets() {
			select {
			case err := <-owners:
				if !errors.Is(err, xsk.ErrClosed) {
					t.Fatalf("owner ended with %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("an owner goroutine did not notice Close")
			}
		}
		close(stopSend)
		<-sent
	}
}

// TestHelperOpenUnprivileged is not a test: TestOpenWithoutPrivilege runs
// the test binary without root to see what Open says.
func TestHelperOpenUnprivileged(t *testing.T) {
	ifname := os.Getenv("XDPIO_HELPER_UNPRIV_IFACE")
	if ifname == "" {
		t.Skip("helper process for TestOpenWithoutPrivilege")
	}
	d, err := xsk.Open(ifname, xsk.Config{})
	if err == nil {
		d.Close()
		fmt.Println("result: opened")
		os.Exit(0)
	}
	fmt.Printf("result: permission=%v text=%s\n", errors.Is(err, xsk.ErrPermission), err)
	os.Exit(0)
}

// Without root, Open fails with ErrPermission and says what to do.
func TestOpenWithoutPrivilege(t *testing.T) {
	setpriv := netnstest.RequireTool(t, "setpriv")
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Inside B, drop to nobody with no capabilities at all, then run the
	// helper.
	cmd := pair.B.Command(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", os.Args[0], "-test.run=^TestHelperOpenUnprivileged$")
	cmd.Env = append(os.Environ(), "XDPIO_HELPER_UNPRIV_IFACE="+pair.B.Link)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "result: permission=true") || !strings.Contains(string(out), "run as root") {
		t.Fatalf("unprivileged Open: want ErrPermission with advice, got:\n%s", out)
	}
	if xdpAttached(t, pair.B) {
		t.Fatal("an unprivileged Open left an XDP program behind")
	}
}
