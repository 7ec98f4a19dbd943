//go:build linux

package rss

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestDispatchKernelFrames captures frames the kernel builds (UDP over
// IPv4 and IPv6, sent from sockets in one namespace to the other) with a
// packet socket, and dispatches them. The kernel is the oracle: each
// frame's flow key equals the addresses and ports of the sockets that sent
// it, and every flow's datagrams reach one worker in the order sent.
func TestDispatchKernelFrames(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	const (
		flows   = 6 // per address family
		perFlow = 20
		dport   = 47001
	)

	// netnstest.New returns once the links are set up; frames sent before
	// the kernel's link watch turns the carrier on (and replaces the noop
	// qdisc) are dropped, which under load takes a while.
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		waitOperUp(t, h)
	}

	// Capture on B before anything is sent, and listen there so that no
	// ICMP port unreachable ends the flows.
	var psock int
	var sink *net.UDPConn
	if err := pair.B.Do(func() error {
		var err error
		if sink, err = net.ListenUDP("udp", &net.UDPAddr{Port: dport}); err != nil {
			return err
		}
		t.Cleanup(func() { sink.Close() })
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		psock = fd
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: pair.B.Ifindex}); err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(psock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}

	// Probe until a datagram gets through: the link is up when its
	// operational state says so, but the qdisc may lag a moment behind.
	var probe *net.UDPConn
	if err := pair.A.Do(func() error {
		var err error
		probe, err = net.ListenUDP("udp", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no probe datagram reached the other namespace in 5 s")
		}
		if _, err := probe.WriteToUDPAddrPort([]byte("probe"), netip.AddrPortFrom(pair.B.IPv4, dport)); err != nil {
			t.Fatal(err)
		}
		n, _, err := unix.Recvfrom(psock, buf, 0)
		if err != nil {
			continue // timeout: send another
		}
		if k, err := ParseFlowKey(buf[:n]); err == nil && k.DstPort == dport {
			break
		}
	}

	// Send from A: flows sockets per family, datagrams interleaved, each
	// carrying (flow, sequence).
	type flow struct {
		key FlowKey
		id  uint32
	}
	var sent []flow
	if err := pair.A.Do(func() error {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := range 2 * flows {
			dst := netip.AddrPortFrom(pair.B.IPv4, dport)
			if i >= flows {
				dst = netip.AddrPortFrom(pair.B.IPv6, dport)
			}
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			conns = append(conns, c)
			la := c.LocalAddr().(*net.UDPAddr).AddrPort()
			sent = append(sent, flow{FlowKey{Src: la.Addr().Unmap(), Dst: dst.Addr(), SrcPort: la.Port(), DstPort: dport, Proto: 17, Ports: true}, uint32(i)})
		}
		msg := make([]byte, 8)
		for seq := range perFlow {
			for i, c := range conns {
				binary.BigEndian.PutUint32(msg, uint32(i))
				binary.BigEndian.PutUint32(msg[4:], uint32(seq))
				if _, err := c.Write(msg); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Collect the datagrams to dport (bounded in frames and time).
	var frames [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for len(frames) < 2*flows*perFlow && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(psock, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fr := append([]byte(nil), buf[:n]...)
		if k, err := ParseFlowKey(fr); err == nil && k.Ports && k.DstPort == dport && !bytes.HasSuffix(fr, []byte("probe")) {
			frames = append(frames, fr)
		}
	}
	if len(frames) != 2*flows*perFlow {
		t.Fatalf("captured %d of %d datagrams", len(frames), 2*flows*perFlow)
	}

	// The parser agrees with the sockets.
	byID := map[uint32]FlowKey{}
	for _, f := range sent {
		byID[f.id] = f.key
	}
	for _, fr := range frames {
		k, _ := ParseFlowKey(fr)
		id := binary.BigEndian.Uint32(fr[len(fr)-8:])
		if want := byID[id]; k != want {
			t.Fatalf("frame of flow %d parsed as %+v, the socket was %+v", id, k, want)
		}
	}

	// Dispatch: per-flow order, one worker per flow.
	var mu sync.Mutex
	next := map[uint32]uint32{}
	worker := map[uint32]int{}
	var problems []string
	d, err := NewDispatcher(DispatchOptions{Workers: 3, BatchSize: 7, QueueLen: 21}, func(w int, fs [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, fr := range fs {
			id, seq := binary.BigEndian.Uint32(fr[len(fr)-8:]), binary.BigEndian.Uint32(fr[len(fr)-4:])
			if seq != next[id] {
				problems = append(problems, fmt.Sprintf("flow %d: seq %d, want %d", id, seq, next[id]))
			}
			next[id]++
			if prev, ok := worker[id]; ok && prev != w {
				problems = append(problems, fmt.Sprintf("flow %d on workers %d and %d", id, prev, w))
			}
			worker[id] = w
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(frames); i += 16 {
		if _, err := d.Dispatch(frames[i:min(i+16, len(frames))]...); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if s := d.Stats(); s.Delivered != uint64(len(frames)) || s.Pending != 0 {
		t.Errorf("stats %+v", s)
	}
}

// waitOperUp waits (at most 5 s) until h's link is operationally up.
func waitOperUp(t *testing.T, h *netnstest.Host) {
	t.Helper()
	nh, err := h.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := nh.LinkByIndex(h.Ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: operational state %v after 5 s", h.Link, h.NS, l.Attrs().OperState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
