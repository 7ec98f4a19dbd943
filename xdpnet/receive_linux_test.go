//go:build linux

package xdpnet_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// What arrives damaged is never delivered, and is counted by cause.
func TestDamagedFramesCounted(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	// With A's TX checksum offload on, the kernel leaves the checksum to
	// veth, which never computes it: partial checksums.
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	for i := 0; i < 10; i++ {
		k.WriteToUDPAddrPort([]byte("partial checksum"), netip.AddrPortFrom(pair.B.IPv4, port))
	}
	// A raw frame with a wrong checksum and a truncated one, from AF_XDP.
	var tx *xsk.Device
	if err := pair.A.Do(func() (err error) {
		tx, err = xsk.Open(pair.A.Link, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	good := rawUDP(pair, []byte("a good datagram"))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	short := append([]byte(nil), good[:14+20+4]...)
	sendRaw(t, tx.Sockets()[0], good, bad, short, bad)
	buf := make([]byte, 100)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "a good datagram" {
		t.Fatalf("ReadFrom: %q, %v; want only the good datagram", buf[:n], err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := c.ReadFromUDPAddrPort(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a damaged datagram was delivered: %q, %v", buf[:n], err)
	}
	tot := c.Stats().Total()
	d := tot.Drops
	if d.PartialChecksum != 10 || d.BadChecksum != 2 || d.Malformed != 1 {
		t.Errorf("drops %+v, want 10 partial checksums, 2 bad checksums, 1 malformed", d)
	}
	// A dropped datagram is a drop only: the copying read sums the
	// checksum while it copies, and once counted it twice.
	if tot.Datagrams != 1 || tot.Bytes != uint64(len("a good datagram")) {
		t.Errorf("%d datagrams, %d bytes counted; want the one good datagram", tot.Datagrams, tot.Bytes)
	}
	if tot.Socket.RXFrames != tot.Datagrams+d.Total() {
		t.Errorf("the socket took %d frames; %d datagrams + %d drops", tot.Socket.RXFrames, tot.Datagrams, d.Total())
	}
	// Accepted where asked for: the kernel's own datagrams over veth.
	c.Close()
	c2 := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{RXChecksum: xdpnet.RXChecksumAcceptPartial})
	k.WriteToUDPAddrPort([]byte("partial, accepted"), netip.AddrPortFrom(pair.B.IPv4, port))
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _, err := c2.ReadFromUDPAddrPort(buf); err != nil || string(buf[:n]) != "partial, accepted" {
		t.Errorf("RXChecksumAcceptPartial: %q, %v", buf[:n], err)
	}
}

// rawUDP is a datagram from A to B's conn, with checksums computed by the
// kernel-independent code of the test (gopacket in frame_test.go covers
// the package's own builder).
func rawUDP(pair *netnstest.Pair, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:], pair.B.MAC)
	copy(f[6:], pair.A.MAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], pair.A.IPv4.AsSlice())
	copy(ip[16:], pair.B.IPv4.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], ^fold(ip[:20], 0))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(udp[8:], payload)
	ph := append(append(append([]byte{}, ip[12:20]...), 0, 17), byte((8+len(payload))>>8), byte(8+len(payload)))
	binary.BigEndian.PutUint16(udp[6:], ^fold(udp, fold(ph, 0)))
	return f
}

func fold(b []byte, init uint16) uint16 {
	s := uint32(init)
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

func sendRaw(t *testing.T, s *xsk.Socket, frames ...[]byte) {
	t.Helper()
	b := s.NewBatch(len(frames))
	if s.Alloc(b, len(frames)) != len(frames) {
		t.Fatal("no TX frames")
	}
	for i, f := range frames {
		b.SetLen(i, copy(b.Buffer(i), f))
	}
	if _, err := s.Transmit(b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for s.TXPending() > 0 && time.Now().Before(deadline) {
		if s.Complete() == 0 {
			s.Kick()
			time.Sleep(time.Millisecond)
		}
	}
}

// IPv4 fragments reach the kernel, which reassembles them, and the conn
// reads the datagram from its kernel socket.
func TestFragmentedDatagramsThroughTheKernel(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	txOff(t, pair.A)
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	k := kernelUDP(t, pair.A, netip.AddrPortFrom(pair.A.IPv4, 0))
	big := bytes.Repeat([]byte("fragment "), 400) // 3600 bytes: three fragments
	if _, err := k.WriteToUDPAddrPort(big, netip.AddrPortFrom(pair.B.IPv4, port)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("fragmented datagram: %d bytes, %v", n, err)
	}
	if from.Addr() != pair.A.IPv4 {
		t.Errorf("from %v", from)
	}
	st := c.Stats().Queues
	if kq := st[len(st)-1]; kq.Queue != xdpnet.KernelQueue || kq.Datagrams != 1 {
		t.Errorf("the kernel queue delivered %d datagrams, want 1", kq.Datagrams)
	}
}

// A device that goes away ends a blocked read with ErrNoDevice.
func TestDeviceGoneEndsReads(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	c := listen(t, pair.B, netip.AddrPortFrom(pair.B.IPv4, port), xdpnet.Config{})
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(make([]byte, 100))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	run(t, pair.B, "ip", "link", "del", pair.B.Link)
	select {
	case err := <-errc:
		if !errors.Is(err, xsk.ErrNoDevice) {
			t.Errorf("read after the device went away: %v, want ErrNoDevice", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("noticed after %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a blocked read did not notice its device went away")
	}
}
