package offload

// Linux as the oracle for TSO, USO and GRO: kernel sockets in one
// namespace of a veth pair send through a veth end whose TSO and checksum
// offloads are off, so the kernel segments (GSO) and checksums in software;
// AF_PACKET captures what arrives in the other namespace.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

func segHtons(v uint16) uint16 { return v<<8 | v>>8 }

// segCapture is an AF_PACKET socket bound to one interface, reading frames in
// a goroutine until stopped.
type segCapture struct {
	fd     int
	mu     sync.Mutex
	frames [][]byte
	kinds  []uint8 // sockaddr_ll pkttype of each frame
	done   chan struct{}
	stop   chan struct{}
}

// segStartCapture opens the socket inside h's namespace. The goroutine reads
// with a 100 ms timeout so that Stop returns promptly.
func segStartCapture(t *testing.T, h *netnstest.Host) *segCapture {
	t.Helper()
	c := &segCapture{done: make(chan struct{}), stop: make(chan struct{})}
	err := h.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(segHtons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
		tv := unix.Timeval{Usec: 100000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("SO_RCVTIMEO: %w", err)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: segHtons(unix.ETH_P_ALL), Ifindex: h.Ifindex})
	})
	if err != nil {
		if c.fd > 0 {
			unix.Close(c.fd)
		}
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		buf := make([]byte, 1<<17)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				continue // timeout (EAGAIN) or EINTR
			}
			ll, _ := from.(*unix.SockaddrLinklayer)
			c.mu.Lock()
			c.frames = append(c.frames, append([]byte(nil), buf[:n]...))
			if ll != nil {
				c.kinds = append(c.kinds, ll.Pkttype)
			} else {
				c.kinds = append(c.kinds, 0xff)
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.Stop)
	return c
}

// Stop ends the capture (idempotent) and closes the socket.
func (c *segCapture) Stop() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
	unix.Close(c.fd)
}

// received returns the captured frames that arrived (not sent) on the
// interface, or, with outgoing, only those sent.
func (c *segCapture) received(outgoing bool) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for i, f := range c.frames {
		if (c.kinds[i] == unix.PACKET_OUTGOING) == outgoing {
			out = append(out, f)
		}
	}
	return out
}

func segEthtoolK(t *testing.T, h *netnstest.Host, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all := append([]string{"-K", h.Link}, args...)
	if out, err := h.Command(ctx, "ethtool", all...).CombinedOutput(); err != nil {
		t.Fatalf("ethtool %s: %v: %s", strings.Join(all, " "), err, out)
	}
}

// segKernelTCPTransfer sends n bytes over a kernel TCP connection from A to B
// and waits until B has read them all.
// sockopt, if not nil, is called on A's socket before it connects.
func segKernelTCPTransfer(t *testing.T, pair *netnstest.Pair, v6 bool, n int, sockopt func(fd int) error) {
	t.Helper()
	network, dst := "tcp4", pair.B.IPv4
	if v6 {
		network, dst = "tcp6", pair.B.IPv6
	}
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen(network, netip.AddrPortFrom(dst, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		k, _ := io.Copy(io.Discard, c)
		got <- k
	}()
	var conn net.Conn
	if err := pair.A.Do(func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		if sockopt != nil {
			d.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) { serr = sockopt(int(fd)) }); err != nil {
					return err
				}
				return serr
			}
		}
		conn, err = d.Dial(network, ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*131 + i>>8)
	}
	conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(data); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	select {
	case k := <-got:
		if k != int64(n) {
			t.Fatalf("receiver got %d bytes, want %d", k, n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("transfer timed out")
	}
	time.Sleep(200 * time.Millisecond) // let the capture drain
}

// segDataFrames returns the frames of proto from src with a non-empty
// transport payload, parsed.
func segDataFrames(frames [][]byte, proto uint8, src netip.Addr) ([][]byte, []Layout) {
	var out [][]byte
	var los []Layout
	for _, f := range frames {
		var lo Layout
		if e := parseLayout(&lo, f, proto); e.kind != nil || lo.End-lo.Payload == 0 {
			continue
		}
		var s netip.Addr
		if lo.IPv6 {
			s = netip.AddrFrom16([16]byte(f[lo.L3+8:]))
		} else {
			s = netip.AddrFrom4([4]byte(f[lo.L3+12:]))
		}
		if s != src {
			continue
		}
		out = append(out, f[:lo.End])
		los = append(los, lo)
	}
	return out, los
}

// maskedHeader returns a copy of f's headers with the fields segmentation
// changes cleared, for grouping segments that came from one super-packet.
func maskedHeader(f []byte, lo Layout) []byte {
	h := append([]byte(nil), f[:lo.Payload]...)
	ip := h[lo.L3:]
	if lo.IPv6 {
		ip[4], ip[5] = 0, 0
	} else {
		copy(ip[2:6], []byte{0, 0, 0, 0})
		ip[10], ip[11] = 0, 0
	}
	th := h[lo.L4:]
	copy(th[4:8], []byte{0, 0, 0, 0})
	if lo.Proto == ipProtoTCP {
		th[13] &^= tcpPSH | tcpFIN
		th[16], th[17] = 0, 0
	} else {
		copy(th[4:8], []byte{0, 0, 0, 0})
	}
	return h
}

// groupSegments splits consecutive captured segments into runs that one
// super-packet segmented at mss would produce: equal headers apart from
// the per-segment fields, contiguous sequence numbers and IPv4 IDs, every
// segment but the last exactly mss bytes without FIN/PSH, CWR only first.
func groupSegments(segs [][]byte, los []Layout, mss int) [][]int {
	var groups [][]int
	var cur []int
	total := 0
	for i := range segs {
		f, lo := segs[i], los[i]
		plen := lo.End - lo.Payload
		if len(cur) > 0 {
			j := cur[len(cur)-1]
			p, plo := segs[j], los[j]
			ok := plo.End-plo.Payload == mss && bytes.Equal(maskedHeader(f, lo), maskedHeader(p, plo)) &&
				lo.L4-lo.L3+total+plen+(lo.Payload-lo.L4) <= 65535
			if ok && lo.Proto == ipProtoTCP {
				ok = p[plo.L4+13]&(tcpPSH|tcpFIN) == 0 && f[lo.L4+13]&tcpCWR == 0 &&
					binary.BigEndian.Uint32(f[lo.L4+4:]) == binary.BigEndian.Uint32(p[plo.L4+4:])+uint32(mss)
			}
			if ok && !lo.IPv6 {
				ok = binary.BigEndian.Uint16(f[lo.L3+4:]) == binary.BigEndian.Uint16(p[plo.L3+4:])+1
			}
			if !ok {
				groups = append(groups, cur)
				cur, total = nil, 0
			}
		}
		cur = append(cur, i)
		total += plen
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// rebuildSuper joins a group of segments into the super-packet they came
// from: the first segment's headers, FIN/PSH from the last, lengths fixed,
// checksums computed with the reference loop (not the code under test).
func rebuildSuper(segs [][]byte, los []Layout, group []int) []byte {
	first, lo := segs[group[0]], los[group[0]]
	out := append([]byte(nil), first[:lo.Payload]...)
	for _, i := range group {
		out = append(out, segs[i][los[i].Payload:los[i].End]...)
	}
	last := segs[group[len(group)-1]]
	ip := out[lo.L3:]
	if lo.IPv6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(len(out)-lo.L3-40))
	} else {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(out)-lo.L3))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^uint16(segRefSum(ip[:lo.L4-lo.L3])))
	}
	l4len := len(out) - lo.L4
	ck := lo.L4 + 16
	if lo.Proto == ipProtoTCP {
		out[lo.L4+13] |= last[los[group[len(group)-1]].L4+13] & (tcpPSH | tcpFIN)
	} else {
		binary.BigEndian.PutUint16(out[lo.L4+4:], uint16(l4len))
		ck = lo.L4 + 6
	}
	out[ck], out[ck+1] = 0, 0
	var ph []byte
	if lo.IPv6 {
		ph = append(ph, ip[8:40]...)
		ph = binary.BigEndian.AppendUint32(ph, uint32(l4len))
		ph = append(ph, 0, 0, 0, lo.Proto)
	} else {
		ph = append(ph, ip[12:20]...)
		ph = append(ph, 0, lo.Proto)
		ph = binary.BigEndian.AppendUint16(ph, uint16(l4len))
	}
	binary.BigEndian.PutUint16(out[ck:], ^uint16(segRefSum(append(ph, out[lo.L4:]...))))
	return out
}

// compareWithKernel rebuilds every group, segments it with the code under
// test and requires the kernel's segments byte for byte.
func compareWithKernel(t *testing.T, segs [][]byte, los []Layout, proto uint8) {
	t.Helper()
	mss := 0
	for _, lo := range los {
		mss = max(mss, lo.End-lo.Payload)
	}
	groups := groupSegments(segs, los, mss)
	multi := 0
	for gi, g := range groups {
		if len(g) > 1 {
			multi++
		}
		super := rebuildSuper(segs, los, g)
		var ours [][]byte
		var err error
		if proto == ipProtoTCP {
			ours, err = Segment(nil, super, SegmentOptions{MSS: mss})
		} else {
			ours, err = SegmentUDP(nil, super, SegmentOptions{MSS: mss})
		}
		if err != nil {
			t.Fatalf("group %d: %v", gi, err)
		}
		if len(ours) != len(g) {
			t.Fatalf("group %d: %d segments, kernel sent %d", gi, len(ours), len(g))
		}
		for k, i := range g {
			if !bytes.Equal(ours[k], segs[i]) {
				t.Fatalf("group %d segment %d differs from the kernel's:\nkernel %x\n  ours %x", gi, k, segs[i][:min(len(segs[i]), 90)], ours[k][:min(len(ours[k]), 90)])
			}
		}
	}
	t.Logf("%d kernel segments (MSS %d) in %d super-packets, %d of them multi-segment: all identical", len(segs), mss, len(groups), multi)
	if multi < 3 {
		t.Fatalf("only %d multi-segment groups: the kernel did not segment large packets (is GSO on?)", multi)
	}
}

// TestKernelTSO compares Segment with Linux software GSO of a kernel TCP
// socket's large write, over IPv4 and IPv6, plain and with IPv4 options
// (IP_OPTIONS) or an IPv6 destination options header (IPV6_DSTOPTS) on
// every packet.
func TestKernelTSO(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	for _, c := range []struct {
		name    string
		v6      bool
		sockopt func(fd int) error
	}{
		{"IPv4", false, nil},
		{"IPv6", true, nil},
		{"IPv4 options", false, func(fd int) error {
			// NOP NOP NOP EOL: the IPv4 header grows to 24 bytes.
			return unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, "\x01\x01\x01\x00")
		}},
		{"IPv6 destination options", true, func(fd int) error {
			// An 8-byte destination options header holding PadN.
			return unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_DSTOPTS, "\x00\x00\x01\x04\x00\x00\x00\x00")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{})
			segWaitOperUp(t, pair)
			segEthtoolK(t, pair.A, "tx", "off", "tso", "off", "gso", "on")
			segEthtoolK(t, pair.B, "gro", "off")
			capt := segStartCapture(t, pair.B)
			segKernelTCPTransfer(t, pair, c.v6, 1<<20, c.sockopt)
			capt.Stop()
			src := pair.A.IPv4
			if c.v6 {
				src = pair.A.IPv6
			}
			segs, los := segDataFrames(capt.received(false), ipProtoTCP, src)
			if c.sockopt != nil {
				// The option must really be on the wire.
				lo := los[0]
				if extra := lo.L4 - lo.L3 - map[bool]int{false: 20, true: 40}[c.v6]; extra != map[bool]int{false: 4, true: 8}[c.v6] {
					t.Fatalf("captured segments have %d bytes of IP options/extension headers", extra)
				}
			}
			compareWithKernel(t, segs, los, ipProtoTCP)
		})
	}
}

// TestKernelUSO compares SegmentUDP with Linux UDP GSO (UDP_SEGMENT)
// segmented in software.
func TestKernelUSO(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{})
			segWaitOperUp(t, pair)
			segEthtoolK(t, pair.A, "tx", "off", "tx-udp-segmentation", "off", "gso", "on")
			segEthtoolK(t, pair.B, "gro", "off")
			c := segStartCapture(t, pair.B)
			network, dst, src := "udp4", pair.B.IPv4, pair.A.IPv4
			if v6 {
				network, dst, src = "udp6", pair.B.IPv6, pair.A.IPv6
			}
			// A listener in B, so that no ICMP port unreachable makes the
			// connected sender's next write fail.
			var sink *net.UDPConn
			if err := pair.B.Do(func() (err error) {
				sink, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 0)))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			sink.SetReadBuffer(4 << 20)
			var conn *net.UDPConn
			if err := pair.A.Do(func() (err error) {
				conn, err = net.DialUDP(network, nil, sink.LocalAddr().(*net.UDPAddr))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			raw, err := conn.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			const gso = 1200
			var serr error
			raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, gso) })
			if serr != nil {
				t.Fatalf("UDP_SEGMENT: %v", serr)
			}
			sizes := []int{20000, 1201, 60000, 2400, 5555}
			want := 0
			for _, n := range sizes {
				want += (n + gso - 1) / gso
			}
			for k, n := range sizes {
				msg := make([]byte, n)
				for i := range msg {
					msg[i] = byte(i*7 + k)
				}
				if _, err := conn.Write(msg); err != nil {
					t.Fatalf("send %d bytes with UDP_SEGMENT: %v", n, err)
				}
				time.Sleep(20 * time.Millisecond) // keep datagrams of different sends apart
			}
			time.Sleep(200 * time.Millisecond)
			c.Stop()
			segs, los := segDataFrames(c.received(false), ipProtoUDP, src)
			compareWithKernel(t, segs, los, ipProtoUDP)
			if len(segs) != want {
				t.Errorf("captured %d datagrams, want %d", len(segs), want)
			}
		})
	}
}

// segSNMPCounter reads one counter ("Tcp", "InCsumErrors") of the calling
// thread's namespace, or, for IPv6 counters ("", "Udp6InCsumErrors"), the
// snmp6 one. Run it inside the namespace.
func segSNMPCounter(t *testing.T, table, name string) int64 {
	t.Helper()
	m, err := netnstest.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m[table+name]
	if !ok {
		t.Fatalf("no counter %s %s", table, name)
	}
	return v
}

// TestKernelAcceptsSegments injects frames made by Segment and SegmentUDP
// into B's kernel through AF_PACKET in A and requires B's checksum error
// counters to stay put while its input counters grow; one deliberately
// corrupted frame per protocol must raise the error counter by one, so the
// test can fail.
func TestKernelAcceptsSegments(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	segWaitOperUp(t, pair)
	var fd int
	if err := pair.A.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	send := func(f []byte) {
		t.Helper()
		if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: pair.A.Ifindex, Halen: 6}); err != nil {
			t.Fatalf("AF_PACKET send: %v", err)
		}
	}
	type counters struct{ tcpIn, tcpErr, udpNoPorts, udpErr, ipErr, udp6Err, udp6In int64 }
	read := func() (c counters) {
		pair.B.Do(func() error {
			c.tcpIn = segSNMPCounter(t, "Tcp", "InSegs")
			c.tcpErr = segSNMPCounter(t, "Tcp", "InCsumErrors")
			c.udpNoPorts = segSNMPCounter(t, "Udp", "NoPorts")
			c.udpErr = segSNMPCounter(t, "Udp", "InCsumErrors")
			c.ipErr = segSNMPCounter(t, "IpExt", "InCsumErrors")
			c.udp6Err = segSNMPCounter(t, "", "Udp6InCsumErrors")
			c.udp6In = segSNMPCounter(t, "", "Udp6NoPorts")
			return nil
		})
		return c
	}
	var frames [][]byte
	var bad [][]byte
	for _, v6 := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			s := superSpec{v6: v6, udp: udp, tsopt: true, flags: tcpACK | tcpPSH, payload: 30000, id: 77, seq: 1000}
			in := buildSuper(t, s)
			segRetarget(in, pair, v6)
			var segs [][]byte
			var err error
			if udp {
				segs, err = SegmentUDP(nil, in, SegmentOptions{MSS: 1400})
			} else {
				segs, err = Segment(nil, in, SegmentOptions{MSS: 1400})
			}
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, segs...)
			b := append([]byte(nil), segs[1]...)
			b[len(b)-1] ^= 0x01 // payload bit flip: L4 checksum now wrong
			bad = append(bad, b)
		}
	}
	// Probe until B's IPv4 and IPv6 receive paths count datagrams: right
	// after the pair is created IPv6 may still drop them for a while.
	probe := map[bool][]byte{}
	for _, v6 := range []bool{false, true} {
		p := buildSuper(t, superSpec{v6: v6, udp: true, payload: 10})
		segRetarget(p, pair, v6)
		segs, err := SegmentUDP(nil, p, SegmentOptions{MSS: 1400})
		if err != nil {
			t.Fatal(err)
		}
		probe[v6] = segs[0]
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c0 := read()
		send(probe[false])
		send(probe[true])
		time.Sleep(50 * time.Millisecond)
		if c1 := read(); c1.udpNoPorts > c0.udpNoPorts && c1.udp6In > c0.udp6In {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's kernel does not count probe datagrams after 10 s")
		}
	}
	before := read()
	for _, f := range frames {
		send(f)
	}
	time.Sleep(300 * time.Millisecond)
	mid := read()
	perKind := int64(len(frames) / 4) // 22 segments of each kind
	if d := mid.tcpIn - before.tcpIn; d < 2*perKind {
		t.Errorf("Tcp InSegs grew by %d, want at least %d", d, 2*perKind)
	}
	if d := mid.udpNoPorts - before.udpNoPorts; d != perKind {
		t.Errorf("Udp NoPorts grew by %d, want %d", d, perKind)
	}
	if d := mid.udp6In - before.udp6In; d != perKind {
		t.Errorf("Udp6NoPorts grew by %d, want %d", d, perKind)
	}
	if mid.tcpErr != before.tcpErr || mid.udpErr != before.udpErr || mid.ipErr != before.ipErr || mid.udp6Err != before.udp6Err {
		t.Errorf("checksum errors after offload frames: before %+v after %+v", before, mid)
	}
	// Positive control: the corrupted frames must be counted.
	for _, f := range bad {
		send(f)
	}
	time.Sleep(300 * time.Millisecond)
	after := read()
	if d := after.tcpErr - mid.tcpErr; d != 2 {
		t.Errorf("Tcp InCsumErrors grew by %d for 2 corrupted segments", d)
	}
	if d := after.udpErr - mid.udpErr; d != 1 {
		t.Errorf("Udp InCsumErrors grew by %d for 1 corrupted datagram", d)
	}
	if d := after.udp6Err - mid.udp6Err; d != 1 {
		t.Errorf("Udp6InCsumErrors grew by %d for 1 corrupted datagram", d)
	}
	t.Logf("counters before %+v, after offload frames %+v, after corrupted %+v", before, mid, after)
}

// segWaitOperUp waits until both veth ends are operationally up with their
// IPv6 addresses ready: until then the kernel's link watcher has not
// attached the queueing discipline (frames written to an AF_PACKET socket
// are dropped silently) and IPv6 does not deliver to the address.
func segWaitOperUp(t *testing.T, pair *netnstest.Pair) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		nh, err := h.Handle()
		if err != nil {
			t.Fatal(err)
		}
		for {
			l, err := nh.LinkByIndex(h.Ifindex)
			if err != nil {
				nh.Close()
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp && segIPv6Ready(nh, l, h.IPv6) {
				break
			}
			if time.Now().After(deadline) {
				nh.Close()
				t.Fatalf("%s in %s not operationally up after 5 s (state %v)", h.Link, h.NS, l.Attrs().OperState)
			}
			time.Sleep(10 * time.Millisecond)
		}
		nh.Close()
	}
}

// segIPv6Ready reports whether addr is configured on l and no longer
// tentative (addrconf finishes it only after the link came up).
func segIPv6Ready(nh *netlink.Handle, l netlink.Link, addr netip.Addr) bool {
	as, err := nh.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return false
	}
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip == addr {
			return a.Flags&unix.IFA_F_TENTATIVE == 0
		}
	}
	return false
}

// segRetarget rewrites a test super-packet's MACs and addresses to go from A
// to B of pair (and re-fixes the checksums, which Segment recomputes
// anyway except for what it keeps: nothing).
func segRetarget(f []byte, pair *netnstest.Pair, v6 bool) {
	copy(f[0:6], pair.B.MAC)
	copy(f[6:12], pair.A.MAC)
	if v6 {
		a, b := pair.A.IPv6.As16(), pair.B.IPv6.As16()
		copy(f[14+8:], a[:])
		copy(f[14+24:], b[:])
	} else {
		a, b := pair.A.IPv4.As4(), pair.B.IPv4.As4()
		copy(f[14+12:], a[:])
		copy(f[14+16:], b[:])
	}
}

// TestKernelGRO compares GRO with Linux's: veth-b with GRO on (veth then
// runs NAPI and napi_gro_receive), the wire segments captured leaving A,
// the kernel's merged packets captured arriving in B. Every merged packet
// B's kernel made must be what GRO makes of the same wire segments.
//
// With IPv4 options on every packet the kernel merges nothing (IHL must be
// 5), and GRO, fed the whole wire stream, must merge nothing either; with
// an IPv6 destination options header both merge.
func TestKernelGRO(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	for _, c := range []struct {
		name    string
		v6      bool
		sockopt func(fd int) error
	}{
		{"IPv4", false, nil},
		{"IPv6", true, nil},
		{"IPv4 options", false, func(fd int) error {
			return unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, "\x01\x01\x01\x00")
		}},
		{"IPv6 destination options", true, func(fd int) error {
			return unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_DSTOPTS, "\x00\x00\x01\x04\x00\x00\x00\x00")
		}},
	} {
		v6, ipOpts := c.v6, c.sockopt != nil && !c.v6
		t.Run(c.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{})
			segWaitOperUp(t, pair)
			segEthtoolK(t, pair.A, "tx", "off", "tso", "off", "gso", "on")
			segEthtoolK(t, pair.B, "gro", "on")
			wire := segStartCapture(t, pair.A)
			merged := segStartCapture(t, pair.B)
			segKernelTCPTransfer(t, pair, v6, 1<<20, c.sockopt)
			wire.Stop()
			merged.Stop()
			src := pair.A.IPv4
			if v6 {
				src = pair.A.IPv6
			}
			ws, wlos := segDataFrames(wire.received(true), ipProtoTCP, src)
			ms, mlos := segDataFrames(merged.received(false), ipProtoTCP, src)
			mss := 0
			for _, lo := range wlos {
				mss = max(mss, lo.End-lo.Payload)
			}
			bySeq := map[uint32]int{}
			for i, f := range ws {
				if lo := wlos[i]; lo.End-lo.L3 > 1500 {
					t.Fatalf("wire segment %d has %d bytes: A's capture saw the packet before GSO", i, lo.End-lo.L3)
				}
				bySeq[binary.BigEndian.Uint32(f[wlos[i].L4+4:])] = i
			}
			g, err := NewGRO(GROOptions{PartialChecksum: true})
			if err != nil {
				t.Fatal(err)
			}
			nMerged := 0
			for k, m := range ms {
				lo := mlos[k]
				seq := binary.BigEndian.Uint32(m[lo.L4+4:])
				plen := lo.End - lo.Payload
				start, ok := bySeq[seq]
				if !ok {
					t.Fatalf("B packet %d (seq %d) starts at no wire segment", k, seq)
				}
				// The wire segments covering [seq, seq+plen).
				var in [][]byte
				for i, covered := start, 0; covered < plen; i++ {
					if i >= len(ws) {
						t.Fatalf("B packet %d runs past the wire capture", k)
					}
					in = append(in, ws[i])
					covered += wlos[i].End - wlos[i].Payload
				}
				if len(in) == 1 {
					if !bytes.Equal(in[0], m) {
						t.Fatalf("B packet %d differs from its single wire segment", k)
					}
					continue
				}
				nMerged++
				var out [][]byte
				for _, f := range in {
					out = g.Feed(out, f)
				}
				out = g.Flush(out)
				if len(out) != 1 {
					t.Fatalf("B packet %d: the kernel merged %d segments, GRO made %d frames of them", k, len(in), len(out))
				}
				if !bytes.Equal(out[0], m) {
					t.Fatalf("B packet %d (%d segments) differs from GRO's merge:\nkernel %x\n   GRO %x", k, len(in), m[:min(len(m), 90)], out[0][:min(len(out[0]), 90)])
				}
			}
			t.Logf("%d wire segments (MSS %d), %d packets after kernel GRO, %d merged: all identical to GRO's", len(ws), mss, len(ms), nMerged)
			if ipOpts {
				if nMerged != 0 {
					t.Fatalf("the kernel merged %d packets with IPv4 options", nMerged)
				}
				var out [][]byte
				for _, f := range ws {
					out = g.Feed(out, f)
				}
				out = g.Flush(out)
				if len(out) != len(ws) {
					t.Fatalf("GRO made %d frames of %d segments with IPv4 options; the kernel merged none", len(out), len(ws))
				}
				return
			}
			if nMerged < 3 {
				t.Fatalf("the kernel merged only %d packets: veth GRO not active?", nMerged)
			}
		})
	}
}

// TestKernelReceivesSegmentedStream carries data over a real connection:
// a kernel TCP connection from A to B is set up (timestamps off in A, so
// segments need no timestamp option), its sequence numbers are read from
// the handshake captured in B, and a super-packet continuing the
// connection is segmented by Segment and injected through AF_PACKET in A.
// B's kernel must accept every segment and deliver the bytes, in order, to
// the accepted socket.
func TestKernelReceivesSegmentedStream(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{})
			segWaitOperUp(t, pair)
			if err := pair.A.Do(func() error {
				return os.WriteFile("/proc/sys/net/ipv4/tcp_timestamps", []byte("0"), 0o644)
			}); err != nil {
				t.Fatalf("turn TCP timestamps off in A: %v", err)
			}
			network, dst := "tcp4", pair.B.IPv4
			if v6 {
				network, dst = "tcp6", pair.B.IPv6
			}
			c := segStartCapture(t, pair.B)
			var ln net.Listener
			if err := pair.B.Do(func() (err error) {
				ln, err = net.Listen(network, netip.AddrPortFrom(dst, 0).String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var conn net.Conn
			if err := pair.A.Do(func() (err error) {
				conn, err = (&net.Dialer{Timeout: 5 * time.Second}).Dial(network, ln.Addr().String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			time.Sleep(100 * time.Millisecond)
			sport := uint16(conn.LocalAddr().(*net.TCPAddr).Port)
			dport := uint16(ln.Addr().(*net.TCPAddr).Port)
			// Sequence numbers from the handshake.
			var isnA, isnB uint32
			var haveA, haveB bool
			for _, out := range []bool{false, true} {
				for _, f := range c.received(out) {
					var lo Layout
					if e := parseLayout(&lo, f, ipProtoTCP); e.kind != nil || lo.IPv6 != v6 {
						continue
					}
					th := f[lo.L4:]
					sp, dp := binary.BigEndian.Uint16(th[0:]), binary.BigEndian.Uint16(th[2:])
					switch {
					case !out && sp == sport && dp == dport && th[13] == tcpSYN:
						isnA, haveA = binary.BigEndian.Uint32(th[4:]), true
					case out && sp == dport && dp == sport && th[13] == tcpSYN|tcpACK:
						isnB, haveB = binary.BigEndian.Uint32(th[4:]), true
					}
				}
			}
			c.Stop()
			if !haveA || !haveB {
				t.Fatalf("handshake not captured (SYN %v, SYN-ACK %v)", haveA, haveB)
			}
			// The super-packet: 30000 bytes continuing A's stream.
			const n = 30000
			s := superSpec{v6: v6, flags: tcpACK | tcpPSH, payload: n, seq: isnA + 1, id: 1000}
			super := buildSuper(t, s)
			segRetarget(super, pair, v6)
			lo, err := parseSegLayout(super, ipProtoTCP, "test")
			if err != nil {
				t.Fatal(err)
			}
			th := super[lo.L4:]
			binary.BigEndian.PutUint16(th[0:], sport)
			binary.BigEndian.PutUint16(th[2:], dport)
			binary.BigEndian.PutUint32(th[8:], isnB+1)
			if v6 {
				binary.BigEndian.PutUint32(super[lo.L3:], 0x60000000) // no traffic class or flow label
			}
			mss := 1460
			if v6 {
				mss = 1440
			}
			segs, err := Segment(nil, super, SegmentOptions{MSS: mss})
			if err != nil {
				t.Fatal(err)
			}
			var fd int
			if err := pair.A.Do(func() (err error) {
				fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			var csumBefore int64
			pair.B.Do(func() error { csumBefore = segSNMPCounter(t, "Tcp", "InCsumErrors"); return nil })
			for _, f := range segs {
				if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: pair.A.Ifindex, Halen: 6}); err != nil {
					t.Fatalf("AF_PACKET send: %v", err)
				}
			}
			got := make([]byte, n)
			peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(peer, got); err != nil {
				t.Fatalf("B's socket read: %v", err)
			}
			if !bytes.Equal(got, super[lo.Payload:lo.End]) {
				t.Fatal("B's socket delivered other bytes than the segments carried")
			}
			var csumAfter int64
			pair.B.Do(func() error { csumAfter = segSNMPCounter(t, "Tcp", "InCsumErrors"); return nil })
			if csumAfter != csumBefore {
				t.Errorf("Tcp InCsumErrors %d -> %d", csumBefore, csumAfter)
			}
			t.Logf("%d segments (MSS %d) injected; B's socket read all %d bytes", len(segs), mss, n)
		})
	}
}
