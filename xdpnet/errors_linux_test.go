//go:build linux

package xdpnet_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

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
