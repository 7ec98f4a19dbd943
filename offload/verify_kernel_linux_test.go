//go:build linux

package offload

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestVerifyRXKernelFrames has the kernel produce the frames: TCP with its
// options, UDP datagrams large enough to be fragmented, and pings, over
// IPv4 and IPv6, sent from namespace A with transmit checksum offload off
// (so the kernel computes every checksum in software), and captured in
// namespace B with an AF_PACKET socket (GRO off, so no merged packets).
// VerifyRX and VerifyRXComplete must find every one correct — fragments
// skipped, nothing bad or malformed — and PartialChecksum none partial.
// B's own TCP segments, captured on their way out with B's TX checksum
// offload on, are what PartialChecksum must recognize.
func TestVerifyRXKernelFrames(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	netnstest.RequireTool(t, "ethtool")
	netnstest.RequireTool(t, "ping")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []struct {
		h    *netnstest.Host
		args []string
	}{
		{pair.A, []string{"-K", pair.A.Link, "tx", "off"}},
		{pair.B, []string{"-K", pair.B.Link, "gro", "off"}},
	} {
		if out, err := c.h.Command(ctx, "ethtool", c.args...).CombinedOutput(); err != nil {
			t.Fatalf("ethtool %v: %v\n%s", c.args, err, out)
		}
	}

	const port = 9998
	var fd int
	var lns []net.Listener
	var udps []*net.UDPConn
	err := pair.B.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(netOrder16(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: netOrder16(unix.ETH_P_ALL), Ifindex: pair.B.Ifindex}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((300 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
			return err
		}
		for _, ip := range []string{pair.B.IPv4.String(), pair.B.IPv6.String()} {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			lns = append(lns, ln)
			u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip), Port: port})
			if err != nil {
				return err
			}
			udps = append(udps, u)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sockets in %s: %v", pair.B.NS, err)
	}
	defer unix.Close(fd)
	for _, ln := range lns {
		defer ln.Close()
		go func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(io.Discard, c); c.Close() }()
			}
		}(ln)
	}
	for _, u := range udps {
		defer u.Close()
	}

	// Traffic from A: bounded in bytes and packets.
	err = pair.A.Do(func() error {
		for _, ip := range []string{pair.B.IPv4.String(), pair.B.IPv6.String()} {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 5*time.Second)
			if err != nil {
				return err
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(bytes.Repeat([]byte("xdpio checksum "), 4000)); err != nil {
				c.Close()
				return err
			}
			c.Close()
			u, err := net.Dial("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			for _, n := range []int{1, 17, 512, 1400, 3001, 9000} { // the large ones are fragmented
				if _, err := u.Write(bytes.Repeat([]byte{byte(n)}, n)); err != nil {
					u.Close()
					return err
				}
			}
			u.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("traffic from %s: %v", pair.A.NS, err)
	}
	for _, dst := range []string{pair.B.IPv4.String(), pair.B.IPv6.String()} {
		if out, err := pair.A.Command(ctx, "ping", "-c", "2", "-i", "0.2", "-s", "100", "-W", "2", dst).CombinedOutput(); err != nil {
			t.Fatalf("ping %s: %v\n%s", dst, err, out)
		}
	}

	counts := map[string]int{}
	buf := make([]byte, 65536)
	for i := 0; i < 5000; i++ {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			break // idle for 300 ms: all captured
		}
		if err != nil {
			t.Fatalf("recvfrom: %v", err)
		}
		f := buf[:n]
		if sll, ok := from.(*unix.SockaddrLinklayer); !ok || sll.Pkttype != unix.PACKET_HOST {
			// B's own transmissions, its veth's TX checksum offload on:
			// TCP's checksums not final yet, as a veth peer receives them.
			if r := VerifyRX(f); r.Proto == ProtoTCP && r.L4 != VerdictSkipped {
				if !PartialChecksum(f) || r.L4 != VerdictBad {
					t.Errorf("B's own TCP segment (%v): PartialChecksum %v, want true:\n% x", r, PartialChecksum(f), f)
				}
				counts["partial tcp"]++
			}
			continue
		}
		if PartialChecksum(f) {
			t.Errorf("PartialChecksum true for a checksum the kernel finished:\n% x", f)
		}
		r := VerifyRX(f)
		if rc := VerifyRXComplete(f, Checksum(f[EthernetLen:], 0)); rc != r {
			t.Errorf("VerifyRXComplete %v, VerifyRX %v", rc, r)
		}
		if r.Bad() || r.Malformed() {
			t.Errorf("kernel-made frame judged %v:\n% x", r, f)
		}
		counts[r.String()]++
	}
	t.Logf("verdicts: %v", counts)
	for _, want := range []string{"ipv4 ok, tcp ok", "ipv6, tcp ok", "ipv4 ok, udp ok", "ipv6, udp ok", "ipv4 ok, icmp ok", "ipv6, icmpv6 ok",
		"ipv4 ok, udp skipped (fragment)", "ipv6, udp skipped (fragment)", "partial tcp"} {
		if counts[want] == 0 {
			t.Errorf("no frame judged %q among those the kernel sent", want)
		}
	}
}
