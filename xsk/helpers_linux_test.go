//go:build linux

package xsk_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

// holdSockets runs this test binary as TestHelperHoldSockets (in h's
// namespace, or in this one when h is nil), with env added to the
// environment, and returns once the helper holds its sockets. The helper
// is killed when the test ends, if the test did not kill it first. (`ip
// netns exec` execs the binary in place: the process is the helper.)
func holdSockets(t *testing.T, h *netnstest.Host, env ...string) *exec.Cmd {
	t.Helper()
	args := []string{"-test.run=^TestHelperHoldSockets$", "-test.v"}
	cmd := exec.Command(os.Args[0], args...)
	if h != nil {
		cmd = h.Command(context.Background(), os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ready") {
			return cmd
		}
		if strings.HasPrefix(sc.Text(), "error") {
			t.Fatalf("helper: %s", sc.Text())
		}
	}
	t.Fatal("helper never became ready")
	return nil
}

// openOn opens sockets on host h's veth inside its namespace and closes
// them at cleanup.
func openOn(t *testing.T, h *netnstest.Host, cfg xsk.Config) *xsk.Device {
	t.Helper()
	var d *xsk.Device
	err := h.Do(func() error {
		var err error
		d, err = xsk.Open(h.Link, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Open %s: %v", h.Link, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// sendUDP sends count datagrams from h's kernel stack to dst, spread over
// flows source ports. Each payload carries its sequence number in the
// first 8 bytes and is size bytes long. It returns the total payload bytes.
func sendUDP(t *testing.T, h *netnstest.Host, dst netip.AddrPort, flows, count, size int, pace time.Duration) int {
	t.Helper()
	var conns []*net.UDPConn
	err := h.Do(func() error {
		for i := 0; i < flows; i++ {
			network := "udp4"
			src := h.IPv4
			if dst.Addr().Is6() {
				network, src = "udp6", h.IPv6
			}
			c, err := net.DialUDP(network, &net.UDPAddr{IP: src.AsSlice(), Port: 40000 + i}, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	buf := make([]byte, size)
	total := 0
	for i := 0; i < count; i++ {
		for j := range buf {
			buf[j] = byte(i + j)
		}
		binary.BigEndian.PutUint64(buf, uint64(i))
		if _, err := conns[i%flows].Write(buf); err != nil {
			t.Fatalf("send datagram %d: %v", i, err)
		}
		total += size
		if pace > 0 && i%64 == 63 {
			time.Sleep(pace)
		}
	}
	return total
}

// collector drains sockets on one goroutine per socket until stop, and
// keeps per-queue counts and the UDP payloads seen.
type collector struct {
	mu       sync.Mutex
	perQueue map[int]int
	payloads map[uint64][]byte
	frames   int
	bytes    int
}

func collect(t *testing.T, sockets []*xsk.Socket, port uint16, want int, timeout time.Duration) *collector {
	t.Helper()
	c := &collector{perQueue: map[int]int{}, payloads: map[uint64][]byte{}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range sockets {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(64)
			for ctx.Err() == nil {
				if n := s.Receive(b); n == 0 {
					s.Wait(10*time.Millisecond, false)
					continue
				}
				c.mu.Lock()
				for i := 0; i < b.Len(); i++ {
					f := b.Frame(i)
					payload, ok := udpPayload(f, port)
					if !ok {
						continue
					}
					c.perQueue[s.Queue()]++
					c.frames++
					c.bytes += len(payload)
					if len(payload) >= 8 {
						c.payloads[binary.BigEndian.Uint64(payload)] = append([]byte(nil), payload...)
					}
				}
				done := c.frames >= want
				c.mu.Unlock()
				s.Release(b)
				if done {
					cancel()
				}
			}
		}(s)
	}
	wg.Wait()
	return c
}

// udpPayload returns the UDP payload of an Ethernet frame to port.
func udpPayload(f []byte, port uint16) ([]byte, bool) {
	if len(f) < 14 {
		return nil, false
	}
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case unix.ETH_P_IP:
		ip := f[14:]
		if len(ip) < 20 || ip[9] != unix.IPPROTO_UDP {
			return nil, false
		}
		l4 = ip[int(ip[0]&0xf)*4:]
	case unix.ETH_P_IPV6:
		ip := f[14:]
		if len(ip) < 40 || ip[6] != unix.IPPROTO_UDP {
			return nil, false
		}
		l4 = ip[40:]
	default:
		return nil, false
	}
	if len(l4) < 8 || binary.BigEndian.Uint16(l4[2:]) != port {
		return nil, false
	}
	ul := int(binary.BigEndian.Uint16(l4[4:]))
	if ul < 8 || ul > len(l4) {
		return nil, false
	}
	return l4[8:ul], true
}

func (c *collector) String() string {
	return fmt.Sprintf("%d frames, %d payload bytes, per queue %v", c.frames, c.bytes, c.perQueue)
}

// udpFrame builds an Ethernet + IPv4/IPv6 + UDP frame with valid checksums
// (computed here, independently of the code under test).
func udpFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	var f []byte
	f = append(f, dstMAC...)
	f = append(f, srcMAC...)
	udpLen := 8 + len(payload)
	udp := make([]byte, udpLen)
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[8:], payload)
	var pseudo []byte
	if src.Addr().Is4() {
		f = binary.BigEndian.AppendUint16(f, unix.ETH_P_IP)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		ip[6] = 0x40 // DF
		ip[8] = 64
		ip[9] = unix.IPPROTO_UDP
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^refSum(ip))
		f = append(f, ip...)
		pseudo = append(append(append(pseudo, s4[:]...), d4[:]...), 0, unix.IPPROTO_UDP, byte(udpLen>>8), byte(udpLen))
	} else {
		f = binary.BigEndian.AppendUint16(f, unix.ETH_P_IPV6)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = unix.IPPROTO_UDP
		ip[7] = 64
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:], s16[:])
		copy(ip[24:], d16[:])
		f = append(f, ip...)
		pseudo = append(append(append(pseudo, s16[:]...), d16[:]...), 0, 0, byte(udpLen>>8), byte(udpLen), 0, 0, 0, unix.IPPROTO_UDP)
	}
	c := ^refSum(append(pseudo, udp...))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return append(f, udp...)
}

// refSum is a plain RFC 1071 sum, folded, not complemented.
func refSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// listenUDP opens a kernel UDP socket in h's namespace.
func listenUDP(t *testing.T, h *netnstest.Host, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		t.Fatalf("listen %v in %s: %v", addr, h.NS, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads datagrams from c until want arrived or timeout passed.
func readAll(c *net.UDPConn, want int, timeout time.Duration) [][]byte {
	var got [][]byte
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 65536)
	for len(got) < want {
		c.SetReadDeadline(deadline)
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	return got
}

// checkAccounting asserts that every frame a socket took from its UMEM is
// in exactly one known place.
func checkAccounting(t *testing.T, s *xsk.Socket) xsk.Stats {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	sum := st.FramesFree + st.FramesFill + st.FramesTX + st.FramesApp + st.FramesLost
	if sum != st.FramesOwned {
		t.Errorf("queue %d: free %d + fill %d + tx %d + app %d + lost %d = %d, want %d frames owned",
			s.Queue(), st.FramesFree, st.FramesFill, st.FramesTX, st.FramesApp, st.FramesLost, sum, st.FramesOwned)
	}
	return st
}
