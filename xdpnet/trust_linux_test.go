//go:build linux

package xdpnet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
)

// injector sends raw Ethernet frames out of a host's veth with an
// AF_PACKET socket: what a hostile peer on the link can send, past every
// check of the sending kernel.
type injector struct {
	fd  int
	sll unix.SockaddrLinklayer
}

func newInjector(t testing.TB, h *netnstest.Host) *injector {
	t.Helper()
	in := &injector{fd: -1}
	err := h.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		in.fd = fd
		in.sll = unix.SockaddrLinklayer{Ifindex: h.Ifindex, Halen: 6}
		return nil
	})
	if err != nil {
		t.Fatalf("AF_PACKET socket in %s: %v", h.NS, err)
	}
	t.Cleanup(func() { unix.Close(in.fd) })
	return in
}

func (in *injector) send(t testing.TB, frame []byte) {
	t.Helper()
	if err := unix.Sendto(in.fd, frame, 0, &in.sll); err != nil {
		t.Fatalf("inject %d-byte frame: %v", len(frame), err)
	}
}

// udpFrame builds an Ethernet/IP/UDP frame with gopacket (lengths and
// checksums computed by it, not by the code under test).
func udpFrame(t testing.TB, srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.SerializableLayer
	if dst.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// received collects the tags (first 8 bytes) of the datagrams a reader
// got, with their sources.
type received struct {
	mu   sync.Mutex
	tags map[uint64]netip.AddrPort
}

func (r *received) add(p []byte, from netip.AddrPort) {
	if len(p) < 8 {
		return
	}
	r.mu.Lock()
	r.tags[binary.BigEndian.Uint64(p)] = from
	r.mu.Unlock()
}

func (r *received) get(tag uint64) (netip.AddrPort, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.tags[tag]
	return a, ok
}

// TestKernelReceiveChecks injects, from the peer's namespace, datagrams
// the kernel refuses (martian sources, other hosts' addresses and MACs)
// and datagrams it takes, once to a kernel UDP socket and once to an
// xdpnet conn bound to the unspecified address, and requires the conn to
// take exactly what the kernel's socket took — the kernel is the oracle —
// with every refusal counted (Drops.MartianSource) or left with the
// kernel (never redirected). The table it logs is the issue's.
func TestKernelReceiveChecks(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	a, b := pair.A, pair.B
	// Another address of B's host, on its loopback interface: a source
	// the kernel calls martian, a destination it takes (weak host).
	run(t, b, "ip", "addr", "add", "198.19.77.1/32", "dev", "lo")
	run(t, b, "ip", "addr", "add", "2001:db8:77::1/128", "dev", "lo")
	const kport, xport = 9500, 9501
	k := kernelUDP(t, b, netip.AddrPortFrom(netip.IPv6Unspecified(), kport))
	c := listen(t, b, netip.AddrPortFrom(netip.IPv6Unspecified(), xport), xdpnet.Config{})
	kgot := &received{tags: map[uint64]netip.AddrPort{}}
	xgot := &received{tags: map[uint64]netip.AddrPort{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := k.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			kgot.add(buf[:n], from)
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			xgot.add(buf[:n], from)
		}
	}()

	bLL := linkLocal(t, b) // once usable: the conn's view follows DAD
	otherMAC := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99}
	bcastMAC := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	aLL := netip.MustParseAddr("fe80::a:1")
	ip := netip.MustParseAddr
	type tc struct {
		name     string
		src, dst netip.Addr
		dstMAC   net.HardwareAddr
	}
	cases := []tc{
		{"IPv4 from the peer (control)", a.IPv4, b.IPv4, nil},
		{"IPv4 from 127.0.0.1", ip("127.0.0.1"), b.IPv4, nil},
		{"IPv4 from 127.1.2.3", ip("127.1.2.3"), b.IPv4, nil},
		{"IPv4 from 0.0.0.0", ip("0.0.0.0"), b.IPv4, nil},
		{"IPv4 from 0.1.2.3", ip("0.1.2.3"), b.IPv4, nil},
		{"IPv4 from 255.255.255.255", ip("255.255.255.255"), b.IPv4, nil},
		{"IPv4 from 224.0.0.5 (multicast)", ip("224.0.0.5"), b.IPv4, nil},
		{"IPv4 from 239.1.1.1 (multicast)", ip("239.1.1.1"), b.IPv4, nil},
		{"IPv4 from the host's own address", b.IPv4, b.IPv4, nil},
		{"IPv4 from the host's address on lo", ip("198.19.77.1"), b.IPv4, nil},
		{"IPv4 from 240.0.0.1 (class E)", ip("240.0.0.1"), b.IPv4, nil},
		{"IPv4 to another host on the link", a.IPv4, ip("198.18.0.99"), nil},
		{"IPv4 to a far host", a.IPv4, ip("203.0.113.9"), nil},
		{"IPv4 to the host, another host's MAC", a.IPv4, b.IPv4, otherMAC},
		{"IPv4 to the host, broadcast MAC", a.IPv4, b.IPv4, bcastMAC},
		{"IPv4 to the host's address on lo", a.IPv4, ip("198.19.77.1"), nil},
		{"IPv4 to 127.0.0.1", a.IPv4, ip("127.0.0.1"), nil},
		{"IPv4 to 255.255.255.255 (broadcast)", a.IPv4, ip("255.255.255.255"), bcastMAC},
		{"IPv4 to 198.18.0.255 (the subnet's broadcast)", a.IPv4, ip("198.18.0.255"), bcastMAC},
		{"IPv4 to 224.0.0.1 (all hosts, joined)", a.IPv4, ip("224.0.0.1"), net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}},
		{"IPv4 to 239.1.2.3 (a group not joined)", a.IPv4, ip("239.1.2.3"), net.HardwareAddr{0x01, 0, 0x5e, 1, 2, 3}},
		{"IPv6 from the peer (control)", a.IPv6, b.IPv6, nil},
		{"IPv6 from ::1", ip("::1"), b.IPv6, nil},
		{"IPv6 from ::", ip("::"), b.IPv6, nil},
		{"IPv6 from ::ffff:198.18.0.1 (v4-mapped)", ip("::ffff:198.18.0.1"), b.IPv6, nil},
		{"IPv6 from ff02::1 (multicast)", ip("ff02::1"), b.IPv6, nil},
		{"IPv6 from ff0e::1 (multicast)", ip("ff0e::1"), b.IPv6, nil},
		{"IPv6 from the host's own address", b.IPv6, b.IPv6, nil},
		{"IPv6 from the host's address on lo", ip("2001:db8:77::1"), b.IPv6, nil},
		{"IPv6 from a link-local address", aLL, b.IPv6, nil},
		{"IPv6 to another host on the link", a.IPv6, ip("2001:db8::99"), nil},
		{"IPv6 to the host, another host's MAC", a.IPv6, b.IPv6, otherMAC},
		{"IPv6 to the host's address on lo", a.IPv6, ip("2001:db8:77::1"), nil},
		{"IPv6 to ::1", a.IPv6, ip("::1"), nil},
		{"IPv6 to ::ffff:198.18.0.2 (v4-mapped)", a.IPv6, ip("::ffff:198.18.0.2"), nil},
		{"IPv6 to ff02::1 (all nodes, joined)", a.IPv6, ip("ff02::1"), net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}},
		{"IPv6 to ff0e::1:2 (a group not joined)", a.IPv6, ip("ff0e::1:2"), net.HardwareAddr{0x33, 0x33, 0, 1, 0, 2}},
	}
	cases = append(cases, tc{"IPv6 link-local to link-local", aLL, bLL, nil})
	in := newInjector(t, a)
	before := c.Stats().Total()
	send := func(tag uint64, cs tc, port uint16) {
		mac := cs.dstMAC
		if mac == nil {
			mac = b.MAC
		}
		payload := make([]byte, 32)
		binary.BigEndian.PutUint64(payload, tag)
		in.send(t, udpFrame(t, a.MAC, mac, netip.AddrPortFrom(cs.src, 7000+uint16(tag)), netip.AddrPortFrom(cs.dst, port), payload))
	}
	for i, cs := range cases {
		send(uint64(2*i), cs, kport)
		send(uint64(2*i+1), cs, xport)
	}
	// The controls last: once both arrived, everything before them on the
	// one queue has been decided (one NAPI, in order).
	last := len(cases)
	send(uint64(2*last), cases[0], kport)
	send(uint64(2*last+1), cases[0], xport)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, kok := kgot.get(uint64(2 * last))
		_, xok := xgot.get(uint64(2*last + 1))
		if kok && xok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the kernel socket's reader, a goroutine behind
	after := c.Stats().Total()

	var table strings.Builder
	fmt.Fprintf(&table, "\n| injected | kernel socket | xdpnet conn |\n|---|---|---|\n")
	word := func(ok bool) string {
		if ok {
			return "delivered"
		}
		return "dropped"
	}
	for i, cs := range cases {
		_, kok := kgot.get(uint64(2 * i))
		from, xok := xgot.get(uint64(2*i + 1))
		fmt.Fprintf(&table, "| %s | %s | %s |\n", cs.name, word(kok), word(xok))
		if kok != xok {
			t.Errorf("%s (%v → %v): the kernel's socket %s it, the conn %s it", cs.name, cs.src, cs.dst, word(kok), word(xok))
		}
		if xok && cs.src.Is6() && cs.src.IsLinkLocalUnicast() && from.Addr().Zone() != b.Link {
			t.Errorf("%s: the conn read the source %v, want zone %q", cs.name, from, b.Link)
		}
	}
	t.Log(table.String())
	martians := after.Drops.MartianSource - before.Drops.MartianSource
	t.Logf("drops by cause: martian source %d, not for us %d, total %d; the socket received %d frames",
		martians, after.Drops.NotForUs-before.Drops.NotForUs, after.Drops.Total()-before.Drops.Total(), after.Socket.RXFrames-before.Socket.RXFrames)
	if martians == 0 {
		t.Errorf("no MartianSource drop counted")
	}
	// Every frame the AF_XDP socket took is a datagram or a counted drop.
	var took, accounted uint64
	for _, q := range c.Stats().Queues {
		if q.Queue != xdpnet.KernelQueue {
			took += q.Socket.RXFrames
			accounted += q.Datagrams + q.Drops.Total()
		}
	}
	if took != accounted {
		t.Errorf("the AF_XDP socket took %d frames; datagrams and drops add up to %d", took, accounted)
	}
}

// A spoofed loopback source no longer starts an echo loop through the
// kernel socket (the "received 225027 datagrams, echoed 225026"):
// the frame is dropped as martian, and writes to loopback fail.
func TestNoLoopbackEchoLoop(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv6Unspecified(), port), xdpnet.Config{})
	go echo(c)
	in := newInjector(t, pair.A)
	for _, src := range []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9400"), netip.MustParseAddrPort("[::1]:9400")} {
		dst := netip.AddrPortFrom(pair.B.IPv4, port)
		if src.Addr().Is6() {
			dst = netip.AddrPortFrom(pair.B.IPv6, port)
		}
		in.send(t, udpFrame(t, pair.A.MAC, pair.B.MAC, src, dst, []byte("loop?")))
	}
	// Wait for both drops to be counted: every frame is accounted for.
	deadline := time.Now().Add(3 * time.Second)
	var st xdpnet.QueueStats
	for st = c.Stats().Total(); st.Drops.MartianSource < 2 && time.Now().Before(deadline); st = c.Stats().Total() {
		time.Sleep(5 * time.Millisecond)
	}
	if st.Drops.MartianSource != 2 || st.Datagrams != 0 || st.Sent != 0 {
		t.Errorf("after two spoofed loopback frames: %d martian drops, %d datagrams read, %d sent; want 2, 0, 0", st.Drops.MartianSource, st.Datagrams, st.Sent)
	}
	for _, dst := range []string{"127.0.0.1:9400", "[::1]:9400", "[::ffff:127.0.0.1]:9400"} {
		_, err := c.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort(dst))
		if !errors.Is(err, syscall.ENETUNREACH) {
			t.Errorf("WriteTo %s: %v, want ENETUNREACH", dst, err)
		}
	}
}

// Loopback datagrams that reach the conn's kernel socket (a local process
// sending to 127.0.0.1) are dropped and counted, not read: the conn does
// not answer loopback.
func TestKernelSocketLoopbackDropped(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), port), xdpnet.Config{})
	err := pair.B.Do(func() error {
		u, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			return err
		}
		defer u.Close()
		for range 3 {
			if _, err := u.Write([]byte("local")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, from, err := c.ReadFromUDPAddrPort(buf); err == nil {
		t.Errorf("read %q from %v", buf[:n], from)
	}
	if st := c.Stats(); st.Queues[len(st.Queues)-1].Drops.MartianSource != 3 {
		t.Errorf("kernel queue: %+v, want 3 martian drops", st.Queues[len(st.Queues)-1].Drops)
	}
}

// A link-local peer: the conn reads its source with the interface as its
// zone, and the first reply, sent while the neighbour is not resolved
// yet (through the kernel socket), arrives.
func TestLinkLocalPeer(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(netip.IPv6Unspecified(), port), xdpnet.Config{})
	go echo(c)
	bLL := linkLocal(t, pair.B)
	aLL := linkLocal(t, pair.A)
	for i, dst := range []netip.Addr{bLL.WithZone(pair.A.Link), pair.B.IPv6} {
		var got []byte
		err := pair.A.Do(func() error {
			u, err := net.ListenUDP("udp6", &net.UDPAddr{IP: aLL.AsSlice(), Zone: pair.A.Link, Port: 7100 + i})
			if err != nil {
				return err
			}
			defer u.Close()
			if _, err := u.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(dst, port)); err != nil {
				return err
			}
			u.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 64)
			n, _, err := u.ReadFromUDPAddrPort(buf)
			got = buf[:n]
			return err
		})
		if err != nil || !bytes.Equal(got, []byte("hello")) {
			t.Errorf("to %v from %v: reply %q, %v", dst, aLL, got, err)
		}
	}
	// A zone naming another interface is refused.
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(aLL.WithZone("lo"), 7100)); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("to %v%%lo: %v, want ENETUNREACH", aLL, err)
	}
}

// linkLocal returns h's link-local address on its veth, once it is usable
// (duplicate address detection done).
func linkLocal(t testing.TB, h *netnstest.Host) netip.Addr {
	t.Helper()
	nh, err := h.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l, err := nh.LinkByName(h.Link)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		as, err := nh.AddrList(l, unix.AF_INET6)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
				return ip
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s has no usable link-local address", h.Link)
	return netip.Addr{}
}
