//go:build linux

package xdpnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// xdpLinkOf returns the ID of the bpf_link holding the XDP program on h's
// veth: the program as the kernel reports it (ip link), its link as
// bpftool lists it.
func xdpLinkOf(t testing.TB, h *netnstest.Host) int {
	t.Helper()
	attrs, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Xdp == nil || !attrs.Xdp.Attached {
		t.Fatalf("no XDP program on %s", h.Link)
	}
	bpftool := netnstest.RequireTool(t, "bpftool")
	out, err := exec.Command(bpftool, "-j", "link", "show").Output()
	if err != nil {
		t.Fatalf("bpftool link show: %v", err)
	}
	var links []struct {
		ID     int    `json:"id"`
		ProgID uint32 `json:"prog_id"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.ProgID == attrs.Xdp.ProgId {
			return l.ID
		}
	}
	t.Fatalf("no bpf_link holds program %d", attrs.Xdp.ProgId)
	return 0
}

func detach(t testing.TB, h *netnstest.Host) time.Time {
	t.Helper()
	id := xdpLinkOf(t, h)
	at := time.Now()
	if out, err := exec.Command("bpftool", "link", "detach", "id", strconv.Itoa(id)).CombinedOutput(); err != nil {
		t.Fatalf("bpftool link detach id %d: %v\n%s", id, err, out)
	}
	return at
}

// Someone detaching the conn's XDP program (bpftool link detach) is no
// silent loss: the conn goes on through its kernel socket and says so in
// Stats, and a reader of an AF_XDP queue ends with xsk.ErrDetached.
func TestDetachedConn(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	t.Run("conn reads", func(t *testing.T) {
		c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
		go echo(c)
		k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
		dst := netip.AddrPortFrom(pair.B.IPv4, port)
		roundTrip := func() error {
			if _, err := k.WriteToUDPAddrPort([]byte("ping"), dst); err != nil {
				return err
			}
			k.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 16)
			_, err := k.Read(buf)
			return err
		}
		if err := roundTrip(); err != nil {
			t.Fatalf("before the detach: %v", err)
		}
		at := detach(t, pair.B)
		for !c.Stats().Detached {
			if time.Since(at) > 2*time.Second {
				t.Fatal("Stats().Detached not set 2 s after the detach")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i := range 5 {
			if err := roundTrip(); err != nil {
				t.Fatalf("echo %d after the detach: %v", i, err)
			}
		}
		st := c.Stats()
		if kq := st.Queues[len(st.Queues)-1]; kq.Datagrams < 5 {
			t.Errorf("the kernel socket delivered %d datagrams after the detach, want 5", kq.Datagrams)
		}
		c.Close()
		if !c.Stats().Detached {
			t.Error("Stats().Detached forgotten at Close")
		}
	})
	t.Run("queue readers", func(t *testing.T) {
		c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
		q := c.Queues()[0]
		ended := make(chan error, 1)
		go func() {
			msgs := make([]xdpnet.Message, 8)
			for {
				if _, err := q.ReadView(msgs, -1); err != nil {
					ended <- err
					return
				}
			}
		}()
		at := detach(t, pair.B)
		select {
		case err := <-ended:
			if !errors.Is(err, xsk.ErrDetached) {
				t.Errorf("ReadView ended with %v, want xsk.ErrDetached", err)
			}
			t.Logf("ReadView ended %v after the detach: %v", time.Since(at).Round(time.Millisecond), err)
		case <-time.After(3 * time.Second):
			t.Fatal("ReadView went on 3 s after the detach")
		}
	})
}

// With jumbo frames (MTU 9000 at both ends) datagrams longer than a UMEM
// frame holds are not lost: the XDP program leaves them to the kernel,
// the conn reads them from its kernel socket, and writes of that size go
// out through it too.
func TestJumboDatagrams(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2, MTU: 9000})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv6Unspecified(), port), xdpnet.Config{})
	// Info agrees with the kernel: veth runs the program in its driver.
	if a, err := pair.B.Attrs(); err != nil || a.Xdp == nil || a.Xdp.AttachMode != 1 || c.Info().String() != pair.B.Link+", queues 0-1, copy mode, driver attach" {
		t.Errorf("Info %q; the kernel's XDP attach mode %+v (1: driver), %v", c.Info(), a.Xdp, err)
	}
	go echo(c)
	for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
		src := pair.A.IPv4
		if dst.Is6() {
			src = pair.A.IPv6
		}
		k := kernelUDP(t, pair.A, netip.AddrPortFrom(src, 0))
		for _, size := range []int{1000, 3700, 3900, 4100, 8000, 8952} {
			if dst.Is6() && size > 8952 {
				continue
			}
			p := bytes.Repeat([]byte{byte(size)}, size)
			if _, err := k.WriteToUDPAddrPort(p, netip.AddrPortFrom(dst, port)); err != nil {
				t.Fatalf("send %d bytes to %v: %v", size, dst, err)
			}
			k.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 10000)
			n, err := k.Read(buf)
			if err != nil || !bytes.Equal(buf[:n], p) {
				t.Errorf("%d bytes to %v: echo of %d bytes, %v", size, dst, n, err)
			}
		}
	}
	st := c.Stats().Total()
	if st.Socket.RXDropped != 0 || st.Drops.Total() != 0 {
		t.Errorf("dropped: socket %d, conn %+v", st.Socket.RXDropped, st.Drops)
	}
	t.Logf("%d datagrams, %d through the kernel socket", st.Datagrams, c.Stats().Queues[2].Datagrams)
}

// An MTU raised under a running conn loses nothing either: the conn was
// opened at MTU 1500, both ends go to 9000, and datagrams longer than its
// UMEM frames reach it through its kernel socket (the program passes
// frames longer than a socket's frame to the kernel), both ways.
func TestMTURaisedUnderConn(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), port), xdpnet.Config{})
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
				werr <- err
				return
			}
		}
	}()
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		run(t, h, "ip", "link", "set", "dev", h.Link, "mtu", "9000")
	}
	defer func() {
		select {
		case err := <-werr:
			t.Errorf("the echo's write failed: %v", err)
		default:
		}
	}()
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	for _, size := range []int{1000, 4100, 8972} {
		p := bytes.Repeat([]byte{byte(size)}, size)
		if _, err := k.WriteToUDPAddrPort(p, netip.AddrPortFrom(pair.B.IPv4, port)); err != nil {
			t.Fatalf("send %d bytes: %v", size, err)
		}
		k.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 10000)
		n, err := k.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], p) {
			t.Errorf("%d bytes after the MTU went to 9000: echo of %d bytes, %v", size, n, err)
		}
	}
	st := c.Stats().Total()
	if st.Socket.RXDropped != 0 || st.Drops.Total() != 0 || st.Datagrams != 3 {
		t.Errorf("%d datagrams; dropped: socket %d, conn %+v", st.Datagrams, st.Socket.RXDropped, st.Drops)
	}
}

// Stats after Close keep what the kernel dropped (the socket's counters
// read at Close), and they agree with veth's own count of the frames it
// could not redirect.
func TestStatsAfterCloseKeepKernelDrops(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{FramesPerQueue: 256})
	// Nobody reads: the rings fill and the rest is dropped by the kernel.
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	for i := range 3000 {
		k.WriteToUDPAddrPort([]byte("flood"), netip.AddrPortFrom(pair.B.IPv4, port))
		if i%256 == 255 {
			time.Sleep(time.Millisecond)
		}
	}
	c.Close()
	st := c.Stats().Total()
	lost := st.Socket.RXDropped + st.Socket.RXRingFull
	m, err := pair.B.EthtoolStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	veth, _ := netnstest.SumStats(m, "rx_queue_", "_drops")
	if lost == 0 || lost != veth {
		t.Errorf("after Close the conn reports %d frames the kernel dropped (RXDropped %d + RXRingFull %d); veth's rx_queue_N_drops: %d",
			lost, st.Socket.RXDropped, st.Socket.RXRingFull, veth)
	}
	t.Logf("after Close: %d dropped by the kernel (veth: %d)", lost, veth)
}

// An address added to the interface after ListenUDP on the unspecified
// address is taken at once (the conn follows the kernel's addresses),
// and one removed is not.
func TestFollowsAddressChanges(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), port), xdpnet.Config{})
	go echo(c)
	extra := netip.MustParseAddr("198.18.0.77")
	run(t, pair.B, "ip", "addr", "add", extra.String()+"/24", "dev", pair.B.Link)
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	roundTrip := func() error {
		if _, err := k.WriteToUDPAddrPort([]byte("ping"), netip.AddrPortFrom(extra, port)); err != nil {
			return err
		}
		k.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 16)
		_, err := k.Read(buf)
		return err
	}
	before := c.Stats().Queues[0].Datagrams
	deadline := time.Now().Add(3 * time.Second)
	for c.Stats().Queues[0].Datagrams == before && time.Now().Before(deadline) {
		if err := roundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	if c.Stats().Queues[0].Datagrams == before {
		t.Fatalf("datagrams to the new address %v never came through AF_XDP", extra)
	}
	run(t, pair.B, "ip", "addr", "del", extra.String()+"/24", "dev", pair.B.Link)
	// Once the notification reached the conn, datagrams to the removed
	// address stay with the kernel (which drops them): the AF_XDP socket
	// sees none of the next ten.
	deadline = time.Now().Add(3 * time.Second)
	for {
		frames := c.Stats().Queues[0].Socket.RXFrames
		for range 10 {
			k.WriteToUDPAddrPort([]byte("gone"), netip.AddrPortFrom(extra, port))
		}
		time.Sleep(20 * time.Millisecond)
		if c.Stats().Queues[0].Socket.RXFrames == frames {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("datagrams to the removed address %v still reach the AF_XDP socket after 3 s", extra)
		}
	}
}

// The firewall does not see AF_XDP traffic: an nftables rule dropping a
// source does not stop the conn from reading it. Config.Expr keeps the
// rule: what the expression turns away goes to the kernel, where the
// rule drops it (its counter says so) before the conn's kernel socket.
func TestExprKeepsFirewallRule(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	nft := netnstest.RequireTool(t, "nft")
	txOff(t, pair.A)
	hostile := netip.MustParseAddr("198.18.0.66")
	run(t, pair.A, "ip", "addr", "add", hostile.String()+"/24", "dev", pair.A.Link)
	run(t, pair.B, nft, "add table inet xdpio_t")
	run(t, pair.B, nft, "add chain inet xdpio_t input { type filter hook input priority 0 ; }")
	run(t, pair.B, nft, fmt.Sprintf("add rule inet xdpio_t input ip saddr %v udp dport %d counter drop", hostile, port))
	dropped := func() int {
		out, err := pair.B.Command(context.Background(), nft, "-j", "list", "table", "inet", "xdpio_t").Output()
		if err != nil {
			t.Fatalf("nft list: %v", err)
		}
		var doc struct {
			Nftables []struct {
				Rule *struct {
					Expr []map[string]json.RawMessage `json:"expr"`
				} `json:"rule"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		for _, o := range doc.Nftables {
			if o.Rule == nil {
				continue
			}
			for _, e := range o.Rule.Expr {
				if c, ok := e["counter"]; ok {
					var n struct{ Packets int }
					json.Unmarshal(c, &n)
					return n.Packets
				}
			}
		}
		t.Fatalf("no counter in:\n%s", out)
		return 0
	}
	send := func(src netip.Addr, n int) {
		k := kernelUDP(t, pair.A, netip.AddrPortFrom(src, 0))
		for range n {
			if _, err := k.WriteToUDPAddrPort([]byte("hi"), netip.AddrPortFrom(pair.B.IPv4, port)); err != nil {
				t.Fatal(err)
			}
		}
		k.Close()
	}
	readFrom := func(c *xdpnet.UDPConn) map[netip.Addr]int {
		got := map[netip.Addr]int{}
		buf := make([]byte, 64)
		for {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return got
			}
			got[from.Addr()]++
		}
	}
	for _, tc := range []struct {
		expr        string
		wantHostile int // datagrams the conn reads from the hostile source
		wantDropped int // the nftables counter's growth
	}{
		{"", 10, 0}, // the documented gap: AF_XDP bypasses the firewall
		{"not src host " + hostile.String(), 0, 10},
	} {
		c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{Expr: tc.expr})
		before := dropped()
		send(hostile, 10)
		send(pair.A.IPv4, 10)
		got := readFrom(c)
		c.Close()
		if got[hostile] != tc.wantHostile || got[pair.A.IPv4] != 10 || dropped()-before != tc.wantDropped {
			t.Errorf("Expr %q: read %d from %v (want %d) and %d from %v (want 10); nftables dropped %d (want %d)",
				tc.expr, got[hostile], hostile, tc.wantHostile, got[pair.A.IPv4], pair.A.IPv4, dropped()-before, tc.wantDropped)
		}
	}
	err := pair.B.Do(func() error {
		c, err := xdpnet.ListenUDP(pair.B.Link, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{Expr: "src hots 198.18.0.66"})
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, xdpnet.ErrInvalidConfig) || !strings.Contains(err.Error(), "hots") {
		t.Errorf("a misspelt expression: %v, want ErrInvalidConfig naming it", err)
	}
}
