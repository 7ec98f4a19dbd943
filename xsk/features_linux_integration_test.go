//go:build linux

package xsk_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

// receivePackets collects whole packets (multi-buffer fragments joined)
// from s until want packets arrived or the timeout passed.
func receivePackets(t *testing.T, s *xsk.Socket, want int, timeout time.Duration) (pkts [][]byte, frags []int) {
	t.Helper()
	b := s.NewBatch(64)
	deadline := time.Now().Add(timeout)
	var cur []byte
	n := 0
	for len(pkts) < want && time.Now().Before(deadline) {
		if s.Receive(b) == 0 {
			s.Wait(10*time.Millisecond, false)
			continue
		}
		for i := 0; i < b.Len(); i++ {
			cur = append(cur, b.Frame(i)...)
			n++
			if !b.Desc(i).More() {
				pkts = append(pkts, cur)
				frags = append(frags, n)
				cur, n = nil, 0
			}
		}
		s.Release(b)
	}
	if cur != nil {
		t.Errorf("a packet ended without its last fragment after a full batch: %d bytes", len(cur))
	}
	return pkts, frags
}

func TestMultiBuffer(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1, MTU: 9000})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{MultiBuffer: true},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s := d.Sockets()[0]

	// RX: 8000-byte datagrams from the kernel span several 4096-byte frames.
	const count, size = 20, 8000
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 1, count, size, 0)
	pkts, frags := receivePackets(t, s, count, 10*time.Second)
	if len(pkts) != count {
		st, _ := s.Stats()
		t.Fatalf("received %d packets of %d; stats %+v", len(pkts), count, st)
	}
	for i, p := range pkts {
		payload, ok := udpPayload(p, testPort)
		if !ok || len(payload) != size {
			t.Fatalf("packet %d: %d bytes, UDP payload ok=%v len %d, want %d", i, len(p), ok, len(payload), size)
		}
		seq := binary.BigEndian.Uint64(payload)
		for j := 8; j < size; j++ {
			if payload[j] != byte(int(seq)+j) {
				t.Fatalf("packet %d byte %d corrupted", i, j)
			}
		}
		if frags[i] < 2 {
			t.Errorf("packet %d of %d bytes came in %d descriptor(s), want a multi-buffer chain", i, len(p), frags[i])
		}
	}

	// TX: a 8000-byte datagram sent as a chain of frames arrives whole.
	dst := netip.AddrPortFrom(pair.A.IPv4, 9001)
	ln := listenUDP(t, pair.A, dst)
	payload := bytes.Repeat([]byte("multi-buffer "), 600)[:7800]
	frame := udpFrame(pair.B.MAC, pair.A.MAC, netip.AddrPortFrom(pair.B.IPv4, 7000), dst, payload)
	b := s.NewBatch(8)
	chunk := 3000
	nfr := (len(frame) + chunk - 1) / chunk
	if got := s.Alloc(b, nfr); got != nfr {
		t.Fatalf("Alloc %d frames, got %d", nfr, got)
	}
	for i := 0; i < nfr; i++ {
		part := frame[i*chunk : min(len(frame), (i+1)*chunk)]
		b.SetLen(i, copy(b.Buffer(i), part))
		if i < nfr-1 {
			b.SetOptions(i, xsk.OptContinues)
		}
	}
	if n, err := s.Transmit(b); err != nil || n != nfr {
		t.Fatalf("Transmit = %d, %v; want %d", n, err, nfr)
	}
	got := readAll(ln, 1, 5*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0], payload) {
		st, _ := s.Stats()
		t.Fatalf("kernel received %d datagrams (want 1 of %d bytes); stats %+v", len(got), len(payload), st)
	}
}

// TestOversizeWithoutMultiBuffer: with no MaxFrame limit (negative), a
// packet larger than a frame on a socket without multi-buffer is not
// delivered, and the loss is visible in the kernel's counters. (By
// default such packets go to the kernel's stack: TestLongFramesPassToKernel.)
func TestOversizeWithoutMultiBuffer(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1, MTU: 9000})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}, MaxFrame: -1}})
	s := d.Sockets()[0]
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 1, 10, 8000, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 1, 5, 1000, 0)
	pkts, _ := receivePackets(t, s, 5, 5*time.Second)
	if len(pkts) != 5 {
		t.Fatalf("received %d small packets, want 5", len(pkts))
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RXDropped+st.RXInvalidDescs < 10 {
		t.Fatalf("10 oversize packets were not counted: %+v", st)
	}
}

func TestRXHashMetadata(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{RXHash: true, Filter: []xsk.Rule{xsk.UDPPort(testPort)}}})
	const flows, count = 8, 400
	hashes := map[uint16]map[uint32]bool{} // source port -> hashes seen
	var missing int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		got := 0
		for ctx.Err() == nil && got < count {
			for _, s := range d.Sockets() {
				b := s.NewBatch(64)
				s.Receive(b)
				for i := 0; i < b.Len(); i++ {
					f := b.Frame(i)
					if _, ok := udpPayload(f, testPort); !ok {
						continue
					}
					got++
					sport := binary.BigEndian.Uint16(f[34:])
					h, _, ok := b.RXHash(i)
					if !ok {
						missing++
						continue
					}
					if hashes[sport] == nil {
						hashes[sport] = map[uint32]bool{}
					}
					hashes[sport][h] = true
				}
				s.Release(b)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), flows, count, 64, 100*time.Microsecond)
	<-done
	if missing > 0 {
		t.Fatalf("%d frames without an RX hash (veth computes one for every skb)", missing)
	}
	if len(hashes) != flows {
		t.Fatalf("hashes for %d flows, want %d", len(hashes), flows)
	}
	distinct := map[uint32]bool{}
	for sport, hs := range hashes {
		if len(hs) != 1 {
			t.Errorf("flow from port %d has %d different hashes, want 1", sport, len(hs))
		}
		for h := range hs {
			distinct[h] = true
		}
	}
	if len(distinct) < flows-1 {
		t.Errorf("%d flows share %d hashes: the hash does not tell flows apart", flows, len(distinct))
	}
}

// snmpCounter reads one counter (e.g. "Udp", "InCsumErrors") from h's
// namespace.
func snmpCounter(t *testing.T, h *netnstest.Host, proto, name string) int {
	t.Helper()
	m, err := h.Counters()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m[proto+name]
	if !ok {
		t.Fatalf("no %s %s in the kernel's SNMP counters", proto, name)
	}
	return int(v)
}

// TestTXChecksumOffload asks the kernel, through AF_XDP TX metadata, to
// fill the UDP checksum (copy mode computes it in software with
// XDP_UMEM_TX_SW_CSUM). The peer's kernel verifies checksums (rx-checksumming
// off on its veth), so a datagram that arrives carries a correct one; a
// frame with a wrong checksum and no request is dropped and counted.
func TestTXChecksumOffload(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var d *xsk.Device
	err := pair.B.Do(func() (err error) {
		d, err = xsk.Open(pair.B.Link, xsk.Config{UMEM: xsk.UMEMConfig{TXSoftwareChecksum: true}})
		return
	})
	netnstest.SkipIfNotSupported(t, err) // a kernel before 6.11; any other error fails
	defer d.Close()
	if out, err := pair.A.Command(context.Background(), "ethtool", "-K", pair.A.Link, "rx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K rx off: %v\n%s", err, out)
	}
	s := d.Sockets()[0]
	dst := netip.AddrPortFrom(pair.A.IPv4, 9001)
	ln := listenUDP(t, pair.A, dst)
	src := netip.AddrPortFrom(pair.B.IPv4, 7000)

	send := func(frame []byte, request bool) {
		t.Helper()
		b := s.NewBatch(1)
		if s.Alloc(b, 1) != 1 {
			t.Fatal("no free frame")
		}
		b.SetLen(0, copy(b.Buffer(0), frame))
		if request && !b.RequestChecksum(0, 14+20, 6) {
			t.Fatal("RequestChecksum refused on a UMEM with TX metadata")
		}
		if _, err := s.Transmit(b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100 && s.TXPending() > 0; i++ {
			time.Sleep(time.Millisecond)
			s.Complete()
		}
	}
	errsBefore := snmpCounter(t, pair.A, "Udp", "InCsumErrors")

	// Partial frame: the checksum field holds the pseudo-header sum only.
	payload := []byte("checksum filled by the kernel from TX metadata")
	f := udpFrame(pair.B.MAC, pair.A.MAC, src, dst, payload)
	udpLen := 8 + len(payload)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	pseudo := refSum(append(append(append([]byte{}, s4[:]...), d4[:]...), 0, 17, byte(udpLen>>8), byte(udpLen)))
	binary.BigEndian.PutUint16(f[14+20+6:], pseudo)
	send(f, true)
	if got := readAll(ln, 1, 3*time.Second); len(got) != 1 || !bytes.Equal(got[0], payload) {
		t.Fatalf("datagram with a kernel-filled checksum not delivered (got %d)", len(got))
	}
	if e := snmpCounter(t, pair.A, "Udp", "InCsumErrors"); e != errsBefore {
		t.Fatalf("InCsumErrors rose from %d to %d", errsBefore, e)
	}

	// Negative control: the same partial frame without the request is
	// dropped by the peer as a checksum error.
	send(f, false)
	if got := readAll(ln, 1, 300*time.Millisecond); len(got) != 0 {
		t.Fatal("a frame with a partial checksum was delivered: the peer does not verify checksums, the test proves nothing")
	}
	if e := snmpCounter(t, pair.A, "Udp", "InCsumErrors"); e != errsBefore+1 {
		t.Fatalf("InCsumErrors %d, want %d", e, errsBefore+1)
	}
}

func TestUnalignedAndHeadroom(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openOn(t, pair.B, xsk.Config{
		UMEM:    xsk.UMEMConfig{Unaligned: true, FrameSize: 3000, Headroom: 128},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	const count = 3000
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), testPort, count, 20*time.Second) }()
	sent := sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 16, count, 1000, 200*time.Microsecond)
	c := <-done
	if c.frames != count || c.bytes != sent || len(c.payloads) != count {
		t.Fatalf("unaligned 3000-byte frames: received %v, want %d frames", c, count)
	}
	for _, s := range d.Sockets() {
		checkAccounting(t, s)
	}
}

func TestBusyPoll(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{BusyPoll: xsk.BusyPoll{Timeout: 20 * time.Microsecond, Budget: 64}},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), testPort, 500, 10*time.Second) }()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 4, 500, 100, 100*time.Microsecond)
	if c := <-done; c.frames != 500 {
		t.Fatalf("busy poll: received %v, want 500", c)
	}
	s := d.Sockets()[0]
	st, _ := s.Stats()
	id, err := s.NAPIID()
	if err != nil {
		t.Fatal(err)
	}
	// Oracle: the NAPI instances the kernel lists for the device (netdev
	// netlink). A recorded ID must be one of them, and then Receive busy
	// polls; without one (veth on Linux 6.18 registers its XDP RX queues
	// without a NAPI ID) a busy-poll syscall would do nothing, and the
	// library must not make any (copy mode never asks for RX wake-ups).
	napis := deviceNAPIs(t, pair.B)
	t.Logf("socket NAPI ID %d, device NAPIs %v, wake-ups %d", id, napis, st.Wakeups)
	switch {
	case id != 0 && !slices.Contains(napis, id):
		t.Errorf("NAPIID %d is not one of the device's NAPIs %v", id, napis)
	case id != 0 && st.Wakeups == 0:
		t.Errorf("busy poll on and NAPI %d known, but Receive never drove the device (no wake-up syscalls)", id)
	case id == 0 && st.Wakeups != 0:
		t.Errorf("no NAPI ID recorded, yet %d busy-poll syscalls that could do nothing", st.Wakeups)
	}
	s.Close()
	if _, err := s.NAPIID(); !errors.Is(err, xsk.ErrClosed) {
		t.Errorf("NAPIID after Close: %v, want ErrClosed", err)
	}
}

// deviceNAPIs lists the NAPI IDs of h's veth through netdev netlink
// (NETDEV_CMD_NAPI_GET, dumped for one ifindex).
func deviceNAPIs(t *testing.T, h *netnstest.Host) []int {
	t.Helper()
	const (
		cmdNAPIGet  = 11 // NETDEV_CMD_NAPI_GET
		attrIfindex = 1  // NETDEV_A_NAPI_IFINDEX
		attrNAPIID  = 2  // NETDEV_A_NAPI_ID
	)
	var ids []int
	err := h.Do(func() error {
		c, err := genetlink.Dial(nil)
		if err != nil {
			return err
		}
		defer c.Close()
		f, err := c.GetFamily("netdev")
		if err != nil {
			return err
		}
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(attrIfindex, uint32(h.Ifindex))
		req, err := ae.Encode()
		if err != nil {
			return err
		}
		msgs, err := c.Execute(genetlink.Message{Header: genetlink.Header{Command: cmdNAPIGet, Version: f.Version}, Data: req}, f.ID, netlink.Request|netlink.Dump)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			ad, err := netlink.NewAttributeDecoder(m.Data)
			if err != nil {
				return err
			}
			for ad.Next() {
				if ad.Type() == attrNAPIID {
					ids = append(ids, int(ad.Uint32()))
				}
			}
			if err := ad.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netdev netlink NAPI dump of %s: %v", h.Link, err)
	}
	if len(ids) == 0 {
		t.Fatalf("netdev netlink lists no NAPI for %s", h.Link)
	}
	return ids
}

// From Linux 6.11 on every probed feature exists (CI runs 6.18); a false
// there means the probe is broken.
func TestKernelFeatures(t *testing.T) {
	netnstest.RequirePriv(t)
	f, err := xsk.KernelFeatures()
	if err != nil {
		t.Fatal(err)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &major, &minor)
	if major > 6 || major == 6 && minor >= 11 {
		if !f.TXMetadata || !f.TXSoftwareChecksum || !f.RXHash || !f.UnalignedChunks {
			t.Fatalf("KernelFeatures on %d.%d = %+v, want all true", major, minor, f)
		}
	}
	// A UMEM with TX metadata behaves as the probe says.
	u, err := xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 4, TXMetadata: true})
	if err == nil {
		u.Close()
	}
	if (err == nil) != f.TXMetadata {
		t.Fatalf("probe said TX metadata %v, NewUMEM said %v", f.TXMetadata, err)
	}
}

// A socket registered by descriptor (as one made elsewhere would be)
// receives what the kernel sends, even after the caller closed its copy
// of the descriptor: the XSKMAP holds its own reference.
func TestRegisterFD(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var (
		u *xsk.UMEM
		s *xsk.Socket
		p *xsk.Program
	)
	err := pair.B.Do(func() (err error) {
		if u, err = xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 1024}); err != nil {
			return err
		}
		if s, err = xsk.NewSocket(u, pair.B.Ifindex, 0, xsk.SocketConfig{NoTX: true, RXRingSize: 512, FillRingSize: 512}); err != nil {
			return err
		}
		p, err = xsk.NewProgram(pair.B.Ifindex, xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}})
		return err
	})
	t.Cleanup(func() {
		if p != nil {
			p.Close()
		}
		if s != nil {
			s.Close()
		}
		if u != nil {
			u.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RegisterFD(0, -1); !errors.Is(err, xsk.ErrInvalidConfig) {
		t.Errorf("RegisterFD(0, -1) = %v, want ErrInvalidConfig", err)
	}
	dup, err := unix.Dup(s.FD())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RegisterFD(0, dup); err != nil {
		t.Fatal(err)
	}
	unix.Close(dup)
	done := make(chan *collector)
	go func() { done <- collect(t, []*xsk.Socket{s}, testPort, 200, 10*time.Second) }()
	sent := sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 2, 200, 100, 50*time.Microsecond)
	if c := <-done; c.frames != 200 || c.bytes != sent {
		t.Fatalf("socket registered by descriptor: received %v, want 200 frames, %d bytes", c, sent)
	}
	checkAccounting(t, s)
}

// With RXNap, a receiver that keeps calling Wait gets every datagram
// (byte-exact) while its waits nap instead of polling; once traffic stops,
// a nap that finds nothing hands over to poll; and Close wakes a wait in
// the middle of a nap.
func TestRXNap(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	d := openOn(t, pair.B, xsk.Config{
		Socket:  xsk.SocketConfig{RXNap: 200 * time.Microsecond},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s := d.Sockets()[0]
	done := make(chan *collector)
	go func() { done <- collect(t, d.Sockets(), testPort, 2000, 10*time.Second) }()
	sent := sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, testPort), 4, 2000, 200, 20*time.Microsecond)
	c := <-done
	if c.frames != 2000 || c.bytes != sent {
		t.Fatalf("RX nap: received %v, want 2000 frames, %d bytes", c, sent)
	}
	st := checkAccounting(t, s)
	if st.Naps == 0 {
		t.Errorf("packets flowed, yet no wait napped: %+v", st)
	}
	// Traffic has stopped: the first wait naps and finds nothing, the
	// next ones poll.
	polls := st.Polls
	for i := 0; i < 3; i++ {
		if ok, err := s.Wait(5*time.Millisecond, false); ok || err != nil {
			t.Fatalf("idle Wait = %v, %v; want false, nil", ok, err)
		}
	}
	st2, _ := s.Stats()
	if st2.Naps > st.Naps+1 || st2.Polls < polls+2 {
		t.Errorf("idle waits: naps %d -> %d, polls %d -> %d; want at most one more nap and the rest polls", st.Naps, st2.Naps, polls, st2.Polls)
	}

	// Close wakes a wait that is napping: packets flow again, then a long
	// nap starts.
	d2 := openOn(t, pair.A, xsk.Config{
		Socket:  xsk.SocketConfig{RXNap: 10 * time.Second},
		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(testPort)}},
	})
	s2 := d2.Sockets()[0]
	sendUDP(t, pair.B, netip.AddrPortFrom(pair.A.IPv4, testPort), 1, 1, 64, 0)
	b := s2.NewBatch(8)
	deadline := time.Now().Add(5 * time.Second)
	for s2.Receive(b) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no datagram on the second socket")
		}
		s2.Wait(10*time.Millisecond, false)
	}
	s2.Release(b)
	before, _ := s2.Stats()
	waited := make(chan error, 1)
	start := time.Now()
	go func() { _, err := s2.Wait(-1, false); waited <- err }()
	time.Sleep(50 * time.Millisecond)
	if st, err := s2.Stats(); err != nil || st.Naps != before.Naps+1 || st.Polls != before.Polls {
		t.Errorf("a Wait right after packets: naps %d -> %d, polls %d -> %d (%v); want it napping", before.Naps, st.Naps, before.Polls, st.Polls, err)
	}
	s2.Close()
	select {
	case err := <-waited:
		if !errors.Is(err, xsk.ErrClosed) {
			t.Errorf("Wait during a nap, after Close: %v, want ErrClosed", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("Close took %v to wake a napping Wait", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a Wait in the middle of a 10 s nap")
	}
}
