package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/examples/internal/flagtest"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// udpecho answers a kernel UDP client over IPv4 and IPv6, in both
// shapes, and says what it echoed.
func TestUDPEcho(t *testing.T) {
	for _, queues := range []bool{false, true} {
		name := "packetconn"
		if queues {
			name = "queues"
		}
		t.Run(name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			if out, err := pair.A.Command(context.Background(), "ethtool", "-K", pair.A.Link, "tx", "off").CombinedOutput(); err != nil {
				t.Fatalf("ethtool: %v %s", err, out)
			}
			args := []string{"-i", pair.B.Link, "-port", "7007", "-t", "3s"}
			if queues {
				args = append(args, "-queues")
			}
			out, done := startEcho(t, pair, args)
			k := client(t, pair)
			buf := make([]byte, 2000)
			for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
				for i := 0; i < 20; i++ {
					msg := bytes.Repeat([]byte{byte(i)}, 10+i*50)
					if _, err := k.WriteToUDPAddrPort(msg, netip.AddrPortFrom(dst, 7007)); err != nil {
						t.Fatal(err)
					}
					k.SetReadDeadline(time.Now().Add(2 * time.Second))
					n, from, err := k.ReadFromUDPAddrPort(buf)
					if err != nil || !bytes.Equal(buf[:n], msg) || from.Addr().Unmap() != dst {
						t.Fatalf("echo %d from %v: %d bytes from %v, %v", i, dst, n, from, err)
					}
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("udpecho: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "received 40 datagrams, echoed 40") {
				t.Errorf("output:\n%s\nwant it to count 40 echoed datagrams", out.String())
			}
		})
	}
}

// A client on the same host whose veth keeps TX checksum offload on (veth's
// default) sends datagrams with partial checksums: udpecho drops them and
// its summary names -accept-partial and ethtool; with -accept-partial it
// echoes them.
func TestUDPEchoPartialChecksum(t *testing.T) {
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprintf("accept-partial=%v", accept), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 1})
			args := []string{"-i", pair.B.Link, "-port", "7007", "-t", "2s"}
			if accept {
				args = append(args, "-accept-partial")
			}
			out, done := startEcho(t, pair, args)
			k := client(t, pair)
			const count = 5
			echoed := 0
			buf := make([]byte, 2000)
			for i := 0; i < count; i++ {
				msg := []byte(fmt.Sprintf("datagram %d", i))
				if _, err := k.WriteToUDPAddrPort(msg, netip.AddrPortFrom(pair.B.IPv4, 7007)); err != nil {
					t.Fatal(err)
				}
				k.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if n, _, err := k.ReadFromUDPAddrPort(buf); err == nil && bytes.Equal(buf[:n], msg) {
					echoed++
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("udpecho: %v\n%s", err, out.String())
			}
			hint := strings.Contains(out.String(), "hint: ") && strings.Contains(out.String(), "-accept-partial") && strings.Contains(out.String(), "ethtool -K DEV tx off")
			switch {
			case accept && (echoed != count || hint || !strings.Contains(out.String(), "echoed 5")):
				t.Errorf("-accept-partial: %d of %d echoed; output:\n%s\nwant all echoed and no hint", echoed, count, out.String())
			case !accept && (echoed != 0 || !hint || !strings.Contains(out.String(), "PartialChecksum:5")):
				t.Errorf("%d of %d echoed; output:\n%s\nwant none echoed, 5 PartialChecksum drops and the hint", echoed, count, out.String())
			}
		})
	}
}

// startEcho runs udpecho with args in pair.B, and gives it time to attach.
// It returns its output and, once it ends, its error.
func startEcho(t *testing.T, pair *netnstest.Pair, args []string) (*syncBuffer, <-chan error) {
	t.Helper()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- pair.B.Do(func() error { return run(args, out) }) }()
	// Datagrams sent before the ready line reach no socket.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready: ") {
		select {
		case err := <-done:
			t.Fatalf("udpecho ended before it was ready: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("udpecho printed no ready line in 10 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out, done
}

// syncBuffer is a bytes.Buffer that udpecho writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// What udpecho's summary says the kernel dropped before its sockets (read
// after Close, so until the program was gone) is what veth counted as
// frames it could not redirect (ethtool -S rx_queue_N_drops).
func TestUDPEchoKernelDropsMatchVeth(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	if out, err := pair.A.Command(context.Background(), "ethtool", "-K", pair.A.Link, "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v %s", err, out)
	}
	out, done := startEcho(t, pair, []string{"-i", pair.B.Link, "-port", "7007", "-frames", "256", "-t", "2s"})
	k := client(t, pair)
	msg := make([]byte, 64)
	for i := 0; i < 50000; i++ { // far faster than one echo each: the rings overflow
		if _, err := k.WriteToUDPAddrPort(msg, netip.AddrPortFrom(pair.B.IPv4, 7007)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("udpecho: %v\n%s", err, out.String())
	}
	var dropped uint64
	i := strings.Index(out.String(), "the kernel dropped ")
	if i < 0 {
		t.Fatalf("no kernel drops in the summary:\n%s", out.String())
	}
	fmt.Sscanf(out.String()[i:], "the kernel dropped %d", &dropped)
	m, err := pair.B.EthtoolStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	veth, _ := netnstest.SumStats(m, "rx_queue_", "_drops")
	if dropped == 0 || dropped != veth {
		t.Errorf("udpecho says the kernel dropped %d; veth counted %d (rx_queue_N_drops)\n%s", dropped, veth, out.String())
	}
	t.Logf("the kernel dropped %d, veth counted %d", dropped, veth)
}

// client returns a kernel UDP socket in pair.A, closed when the test ends.
func client(t *testing.T, pair *netnstest.Pair) *net.UDPConn {
	t.Helper()
	var k *net.UDPConn
	if err := pair.A.Do(func() (err error) {
		k, err = net.ListenUDP("udp", &net.UDPAddr{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // in the error, or "" when accepted
	}{
		{[]string{"-i", "eth0"}, ""},
		{[]string{"-i", "eth0", "-port", "70000"}, "-port 70000"},
		{[]string{"-i", "eth0", "-port", "0"}, "-port 0"},
		{[]string{"-i", "eth0", "-t", "-1s"}, "-t -1s"},
		{[]string{"-i", "eth0", "stray"}, `unexpected argument "stray"`},
		{[]string{"-port", "7"}, "-i IFACE"},
		{[]string{"-i", "eth0", "-addr", "nonsense"}, "-addr"},
		{[]string{"-i", "eth0", "-frames", "100"}, "-frames 100"},
		{[]string{"-i", "eth0", "-frames", "4096"}, ""},
	} {
		_, err := parseFlags(tc.args)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.bad)
		}
	}
}

// FuzzParseFlags: no command line panics the parser, and what it accepts
// is in range.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"-i eth0", "-i eth0 -port 70000", "-i eth0 -port -1", "-i eth0 -t -1s", "-i eth0 x -t 1s", "-i eth0 -addr 198.18.0.2 -queues"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseFlags(strings.Fields(s))
		if err != nil {
			return
		}
		if o.Iface == "" || o.port == 0 || o.Duration < 0 || !o.addr.IsValid() {
			t.Fatalf("accepted %q as %+v", s, o)
		}
	})
}

// -h prints the usage and exits 0, a bad flag exits 2, as in every example.
func TestHelp(t *testing.T) {
	flagtest.CheckHelp(t, "udpecho", func(args []string) error { return run(args, io.Discard) })
}
