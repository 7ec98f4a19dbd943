package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

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
			var out bytes.Buffer
			done := make(chan error, 1)
			go func() { done <- pair.B.Do(func() error { return run(args, &out) }) }()
			time.Sleep(300 * time.Millisecond) // let it attach
			var k *net.UDPConn
			if err := pair.A.Do(func() (err error) {
				k, err = net.ListenUDP("udp", &net.UDPAddr{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer k.Close()
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
		_, err := parseFlags(tc.args, io.Discard)
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
		o, err := parseFlags(strings.Fields(s), io.Discard)
		if err != nil {
			return
		}
		if o.iface == "" || o.port == 0 || o.duration < 0 || !o.addr.IsValid() {
			t.Fatalf("accepted %q as %+v", s, o)
		}
	})
}
