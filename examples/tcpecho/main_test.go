package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/examples/internal/flagtest"
	"github.com/xdpio/xdpio/internal/netnstest"
)

var (
	stack4 = netip.MustParsePrefix("198.18.0.3/24")
	stack6 = netip.MustParsePrefix("2001:db8::3/64")
)

// tcpecho echoes, byte for byte, a kernel client's 1 MiB over IPv4 and
// IPv6 from the peer namespace, and its summary agrees with the peer
// kernel: the connections it opened, and the segments it sent
// (/proc/net/snmp's TcpOutSegs are tcpecho's segments in, with those
// GRO merged).
func TestTCPEcho(t *testing.T) {
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprintf("accept-partial=%v", accept), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			args := []string{"-i", pair.B.Link, "-addr", stack4.String() + "," + stack6.String(), "-t", "4s"}
			if accept {
				args = append(args, "-accept-partial") // veth-a keeps its TX checksum offload
			} else if out, err := pair.A.Command(context.Background(), "ethtool", "-K", pair.A.Link, "tx", "off").CombinedOutput(); err != nil {
				t.Fatalf("ethtool: %v %s", err, out)
			}
			before := snmpTCP(t, pair.A)
			out, done := start(t, pair, args)
			for _, a := range []netip.Addr{stack4.Addr(), stack6.Addr()} {
				echo(t, pair, netip.AddrPortFrom(a, 7), 1<<20)
			}
			if err := <-done; err != nil {
				t.Fatalf("tcpecho: %v\n%s", err, out.String())
			}
			after := snmpTCP(t, pair.A)
			m := regexp.MustCompile(`echoed (\d+) bytes on (\d+) connections; TCP: (\d+) segments in`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no summary in the output:\n%s", out.String())
			}
			bytes, _ := strconv.ParseUint(m[1], 10, 64)
			conns, _ := strconv.ParseUint(m[2], 10, 64)
			segs, _ := strconv.ParseUint(m[3], 10, 64)
			if bytes != 2<<20 || conns != 2 || conns != after["ActiveOpens"]-before["ActiveOpens"] {
				t.Errorf("tcpecho echoed %d bytes on %d connections, the kernel opened %d: want 2 MiB on 2\n%s", bytes, conns, after["ActiveOpens"]-before["ActiveOpens"], out.String())
			}
			f := regexp.MustCompile(`frames: (\d+) received \((\d+) packets after GRO\)`).FindStringSubmatch(out.String())
			if f == nil {
				t.Fatalf("no frame counts in the output:\n%s", out.String())
			}
			frames, _ := strconv.ParseUint(f[1], 10, 64)
			packets, _ := strconv.ParseUint(f[2], 10, 64)
			// A packet GRO merged is one segment to the stack: the
			// segments merged into others are the frames less the
			// packets.
			if sent := after["OutSegs"] - before["OutSegs"]; segs+frames-packets != sent {
				t.Errorf("tcpecho counted %d segments in, %d more merged by GRO; the peer kernel sent %d\n%s", segs, frames-packets, sent, out.String())
			}
			if strings.Contains(out.String(), "hint:") {
				t.Errorf("a hint without unfinished checksums:\n%s", out.String())
			}
			t.Logf("%s", out.String())
		})
	}
}

// Without -accept-partial, a veth peer that leaves its checksums to an
// offload gets no connection, and the summary says why and what to do.
func TestTCPEchoPartialChecksumHint(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	out, done := start(t, pair, []string{"-i", pair.B.Link, "-addr", stack4.String(), "-t", "2s"})
	err := pair.A.Do(func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(stack4.Addr(), 7).String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Error("connected although every segment had an unfinished checksum")
	}
	if err := <-done; err != nil {
		t.Fatalf("tcpecho: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "hint: ") || !strings.Contains(out.String(), "-accept-partial") || !strings.Contains(out.String(), "on 0 connections") {
		t.Errorf("output:\n%s\nwant no connection and the hint", out.String())
	}
}

// echo sends n random bytes to dst from the peer's kernel and reads them
// back.
func echo(t *testing.T, pair *netnstest.Pair, dst netip.AddrPort, n int) {
	t.Helper()
	var c net.Conn
	if err := pair.A.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", dst.String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %v: %v", dst, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	want := make([]byte, n)
	rand.Read(want)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		errc <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo from %v: %v (or different bytes)", dst, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// snmpTCP reads the Tcp counters of /proc/net/snmp in h's namespace.
func snmpTCP(t *testing.T, h *netnstest.Host) map[string]uint64 {
	t.Helper()
	out, err := h.Command(context.Background(), "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	m := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64) // MaxConn is -1
			m[names[i]] = uint64(n)
		}
	}
	return m
}

// start runs tcpecho with args in pair.B until its ready line. It returns
// its output and, once it ends, its error.
func start(t *testing.T, pair *netnstest.Pair, args []string) (*syncBuffer, <-chan error) {
	t.Helper()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- pair.B.Do(func() error { return run(args, out) }) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready: ") {
		select {
		case err := <-done:
			t.Fatalf("tcpecho ended before it was ready: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tcpecho printed no ready line in 10 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out, done
}

// syncBuffer is a bytes.Buffer that tcpecho writes while the test reads.
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

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // in the error, or "" when accepted
	}{
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24"}, ""},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24,2001:db8::3/64", "-gw", "198.18.0.1,2001:db8::1"}, ""},
		{[]string{"-i", "eth0"}, "-addr PREFIX is required"},
		{[]string{"-addr", "198.18.0.3/24"}, "-i IFACE"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3"}, "-addr"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-gw", "nonsense"}, "-gw"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-port", "70000"}, "-port 70000"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-t", "-1s"}, "-t -1s"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-frames", "100"}, "-frames 100"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-q", "0-x"}, "-q"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "-accept-partial", "-no-rx-csum"}, "-accept-partial"},
		{[]string{"-i", "eth0", "-addr", "198.18.0.3/24", "stray"}, `unexpected argument "stray"`},
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
	for _, s := range []string{"-i eth0 -addr 198.18.0.3/24", "-i eth0 -addr 198.18.0.3/24,2001:db8::3/64 -gw 198.18.0.1",
		"-i eth0 -addr 198.18.0.3/24 -port 70000", "-i eth0 -t -1s", "-i eth0 x -t 1s", "-i eth0 -addr 1.2.3.4/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseFlags(strings.Fields(s))
		if err != nil {
			return
		}
		if o.Iface == "" || o.port == 0 || o.Duration < 0 || len(o.cfg.Addrs) == 0 {
			t.Fatalf("accepted %q as %+v", s, o)
		}
		for _, p := range o.cfg.Addrs {
			if !p.IsValid() {
				t.Fatalf("accepted %q with prefix %v", s, p)
			}
		}
	})
}

// -h prints the usage and exits 0, a bad flag exits 2, as in every example.
func TestHelp(t *testing.T) {
	flagtest.CheckHelp(t, "tcpecho", func(args []string) error { return run(args, io.Discard) })
}
