//go:build linux

package offload

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// kernelCsumCounters reads the SNMP counters of h's namespace
// ("UdpInCsumErrors", "IpExtInCsumErrors", "Udp6InCsumErrors", …).
func kernelCsumCounters(t *testing.T, h *netnstest.Host) map[string]int64 {
	t.Helper()
	m, err := h.Counters()
	if err != nil {
		t.Fatalf("counters of %s: %v", h.NS, err)
	}
	return m
}

// kernelCsumFrame is one kind of frame sent to the kernel.
type kernelCsumFrame struct {
	name    string
	o       frameOpts
	counter string // the checksum error counter a corrupted one must raise
	udp     bool   // delivered to the UDP socket of its family
}

// TestFillKernel injects frames filled by FillChecksum (and by
// PreparePartial+FillPartial) from namespace A into a veth whose peer in
// namespace B has RX checksum offload off, so B's kernel verifies every
// checksum in software: the UDP datagrams must reach B's sockets and no
// checksum error counter may move. Then one corrupted frame of each kind
// must raise exactly its counter — proof that the kernel really checked.
func TestFillKernel(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	netnstest.RequireTool(t, "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Older veth drivers marked packets without checksum state
	// CHECKSUM_UNNECESSARY while RX checksumming was on; turn it off so
	// B's stack computes and checks every sum on any kernel. (The
	// corrupted frames below prove that it does.)
	if out, err := pair.B.Command(ctx, "ethtool", "-K", pair.B.Link, "rx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K %s rx off: %v\n%s", pair.B.Link, err, out)
	}

	const port = 9999
	var udp4, udp6 *net.UDPConn
	var tcpLn4, tcpLn6 net.Listener
	err := pair.B.Do(func() error {
		var err error
		if udp4, err = net.ListenUDP("udp4", &net.UDPAddr{IP: pair.B.IPv4.AsSlice(), Port: port}); err != nil {
			return err
		}
		if udp6, err = net.ListenUDP("udp6", &net.UDPAddr{IP: pair.B.IPv6.AsSlice(), Port: port}); err != nil {
			return err
		}
		if tcpLn4, err = net.Listen("tcp4", net.JoinHostPort(pair.B.IPv4.String(), strconv.Itoa(port))); err != nil {
			return err
		}
		tcpLn6, err = net.Listen("tcp6", net.JoinHostPort(pair.B.IPv6.String(), strconv.Itoa(port)))
		return err
	})
	if err != nil {
		t.Fatalf("sockets in %s: %v", pair.B.NS, err)
	}
	defer udp4.Close()
	defer udp6.Close()
	defer tcpLn4.Close()
	defer tcpLn6.Close()

	var fd int
	err = pair.A.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(netOrder16(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: netOrder16(unix.ETH_P_ALL), Ifindex: pair.A.Ifindex})
	})
	if err != nil {
		t.Fatalf("AF_PACKET socket in %s: %v", pair.A.NS, err)
	}
	defer unix.Close(fd)

	kinds := []kernelCsumFrame{
		{name: "udp4", o: frameOpts{proto: ProtoUDP}, counter: "UdpInCsumErrors", udp: true},
		{name: "udp4-ipopts-odd", o: frameOpts{proto: ProtoUDP, ipOpts: 8}, counter: "UdpInCsumErrors", udp: true},
		{name: "udp6", o: frameOpts{v6: true, proto: ProtoUDP}, counter: "Udp6InCsumErrors", udp: true},
		{name: "udp6-exthdrs", o: frameOpts{v6: true, proto: ProtoUDP, ext: []uint8{ProtoHopByHop, ProtoDstOpts, ProtoFragment}}, counter: "Udp6InCsumErrors", udp: true},
		{name: "tcp4-syn", o: frameOpts{proto: ProtoTCP}, counter: "TcpInCsumErrors"},
		{name: "tcp6-syn", o: frameOpts{v6: true, proto: ProtoTCP, tcpOpts: 4}, counter: "TcpInCsumErrors"},
		{name: "icmp4-echo", o: frameOpts{proto: ProtoICMP}, counter: "IcmpInCsumErrors"},
		{name: "icmp6-echo", o: frameOpts{v6: true, proto: ProtoICMPv6}, counter: "Icmp6InCsumErrors"},
	}
	rng := rand.New(rand.NewPCG(61, 62))
	sport := uint16(20000)
	build := func(k kernelCsumFrame, payload int) []byte {
		o := k.o
		o.payload = payload
		f := buildFrame(rng, o)
		copy(f[0:6], pair.B.MAC)
		copy(f[6:12], pair.A.MAC)
		lo, r := Parse(f)
		if r != ReasonNone {
			t.Fatalf("%s: test frame does not parse: %v", k.name, r)
		}
		if !lo.IPv6 {
			f[lo.L3+1] = 0                                  // TOS
			binary.BigEndian.PutUint16(f[lo.L3+6:], 0x4000) // DF, not a fragment
		}
		sport++
		switch k.o.proto {
		case ProtoUDP:
			binary.BigEndian.PutUint16(f[lo.L4:], sport)
			binary.BigEndian.PutUint16(f[lo.L4+2:], port)
		case ProtoTCP:
			binary.BigEndian.PutUint16(f[lo.L4:], sport)
			binary.BigEndian.PutUint16(f[lo.L4+2:], port)
			binary.BigEndian.PutUint32(f[lo.L4+8:], 0) // ack
			f[lo.L4+13] = TCPFlagSYN
			binary.BigEndian.PutUint16(f[lo.L4+14:], 65535)
			binary.BigEndian.PutUint16(f[lo.L4+18:], 0) // urgent
			for i := lo.L4 + TCPMinLen; i < lo.L4+TCP(f[lo.L4:]).DataOffset(); i++ {
				f[i] = 1 // NOP options
			}
		case ProtoICMP, ProtoICMPv6:
			f[lo.L4+1] = 0 // code
		}
		return f
	}
	send := func(f []byte) {
		t.Helper()
		if _, err := unix.Write(fd, f); err != nil {
			t.Fatalf("send %d-byte frame: %v", len(f), err)
		}
	}

	before := kernelCsumCounters(t, pair.B)
	const perKind = 6
	wantUDP := map[*net.UDPConn][]string{}
	for _, k := range kinds {
		for i := 0; i < perKind; i++ {
			payload := 1 + rng.IntN(1000)
			if k.o.proto == ProtoTCP {
				payload = 0
			}
			f := build(k, payload)
			if i%2 == 0 {
				if _, err := FillChecksum(f); err != nil {
					t.Fatalf("%s: FillChecksum: %v", k.name, err)
				}
			} else {
				start, off, err := PreparePartial(f)
				if err != nil {
					t.Fatalf("%s: PreparePartial: %v", k.name, err)
				}
				if err := FillPartial(f, start, off); err != nil {
					t.Fatalf("%s: FillPartial: %v", k.name, err)
				}
			}
			if r := VerifyRX(f); !r.OK() || r.L4 != VerdictOK {
				t.Fatalf("%s: frame to send does not verify: %v", k.name, r)
			}
			if k.udp {
				lo, _ := Parse(f)
				c := udp4
				if lo.IPv6 {
					c = udp6
				}
				wantUDP[c] = append(wantUDP[c], string(f[lo.L4+UDPLen:lo.End]))
			}
			send(f)
		}
	}
	for c, want := range wantUDP {
		got := map[string]bool{}
		buf := make([]byte, 2048)
		for range want {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := c.ReadFromUDP(buf)
			if err != nil {
				t.Fatalf("%v: received %d of %d datagrams: %v", c.LocalAddr(), len(got), len(want), err)
			}
			got[string(buf[:n])] = true
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%v: a datagram's payload never arrived", c.LocalAddr())
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // let TCP and ICMP settle
	mid := kernelCsumCounters(t, pair.B)
	errCounters := []string{"UdpInCsumErrors", "Udp6InCsumErrors", "TcpInCsumErrors", "IcmpInCsumErrors", "Icmp6InCsumErrors", "IpExtInCsumErrors"}
	for _, c := range errCounters {
		if _, ok := mid[c]; !ok {
			t.Fatalf("counter %s not found in %s", c, pair.B.NS)
		}
		if d := mid[c] - before[c]; d != 0 {
			t.Errorf("%s rose by %d for frames filled by this package", c, d)
		}
	}
	for c, want := range map[string]int64{"IcmpInEchos": perKind, "Icmp6InEchos": perKind} {
		if d := mid[c] - before[c]; d != want {
			t.Errorf("%s rose by %d, want %d: echo requests were not accepted", c, d, want)
		}
	}
	if d := mid["TcpOutSegs"] - before["TcpOutSegs"]; d < 2*perKind {
		t.Errorf("TcpOutSegs rose by %d, want ≥ %d SYN-ACKs", d, 2*perKind)
	}

	// One corrupted frame per kind, and one IPv4 header with a bad
	// checksum: each must raise its counter by exactly one.
	wantDelta := map[string]int64{"IpExtInCsumErrors": 1}
	for _, k := range kinds {
		payload := 8
		if k.o.proto == ProtoTCP {
			payload = 0
		}
		f := build(k, payload)
		if _, err := FillChecksum(f); err != nil {
			t.Fatal(err)
		}
		lo, _ := Parse(f)
		f[lo.End-1] ^= 0x01 // last byte: payload, or a TCP option/header byte
		if r := VerifyRX(f); r.L4 != VerdictBad {
			t.Fatalf("%s: corrupted frame verdict %v", k.name, r)
		}
		wantDelta[k.counter]++
		send(f)
	}
	f := build(kinds[0], 8)
	if _, err := FillChecksum(f); err != nil {
		t.Fatal(err)
	}
	f[EthernetLen+IPv4ChecksumOffset] ^= 0x40
	if r := VerifyRX(f); r.L3 != VerdictBad {
		t.Fatalf("corrupted IPv4 header verdict %v", r)
	}
	send(f)

	var after map[string]int64
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = kernelCsumCounters(t, pair.B)
		done := true
		for c, w := range wantDelta {
			if after[c]-mid[c] < w {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range errCounters {
		if d := after[c] - mid[c]; d != wantDelta[c] {
			t.Errorf("%s rose by %d for the corrupted frames, want %d", c, d, wantDelta[c])
		}
	}
	t.Logf("checksum error counters after the corrupted frames: %s", fmtCsumCounters(after, mid, errCounters))
}

func fmtCsumCounters(after, before map[string]int64, names []string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s+%d ", n, after[n]-before[n])
	}
	return b.String()
}

func netOrder16(v uint16) uint16 { return v<<8 | v>>8 }
