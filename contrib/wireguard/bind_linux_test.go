//go:build linux

package wireguard_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/netstack"

	"github.com/xdpio/xdpio/contrib/wireguard"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// Inner (tunnel) addresses: only inside the two userspace netstacks.
var (
	innerA = netip.MustParseAddr("198.19.100.1")
	innerB = netip.MustParseAddr("198.19.100.2")
)

const (
	portA = 51820
	portB = 51821
)

type keyPair struct{ priv, pub [32]byte }

func newKey(t testing.TB) keyPair {
	t.Helper()
	var k keyPair
	if _, err := rand.Read(k.priv[:]); err != nil {
		t.Fatal(err)
	}
	k.priv[0] &= 248
	k.priv[31] = k.priv[31]&127 | 64
	pub, err := curve25519.X25519(k.priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	copy(k.pub[:], pub)
	return k
}

// peer is one end of a tunnel: a wireguard-go device on a userspace
// netstack, in one namespace, on the Bind given.
type peer struct {
	dev  *device.Device
	tnet *netstack.Net
	bind conn.Bind
	log  *deviceLog
	h    *netnstest.Host
}

// nsBind opens its Bind inside a namespace whichever goroutine asks:
// wireguard-go brings a device up from its TUN event reader too (netstack
// reports EventUp at once), and a kernel-socket Bind opened there would
// listen in the test's own namespace.
type nsBind struct {
	conn.Bind
	h *netnstest.Host
}

func (b nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	err = b.h.Do(func() error {
		fns, actual, err = b.Bind.Open(port)
		return err
	})
	return fns, actual, err
}

// deviceLog keeps what a wireguard-go device logs.
type deviceLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *deviceLog) printf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *deviceLog) find(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.lines {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

func (l *deviceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// newPeer builds and brings up a device in h's namespace, its Bind opened
// there. What the device logs is shown if the test fails.
func newPeer(t testing.TB, h *netnstest.Host, bind conn.Bind, inner netip.Addr, port int, self, other keyPair, otherInner netip.Addr, otherEndpoint netip.AddrPort) *peer {
	t.Helper()
	tun, tnet, err := netstack.CreateNetTUN([]netip.Addr{inner}, nil, 1420)
	if err != nil {
		t.Fatal(err)
	}
	log := &deviceLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the device at %v said:\n%s", inner, log)
		}
	})
	// wireguard-go reports receive errors at the verbose level.
	dev := device.NewDevice(tun, nsBind{bind, h}, &device.Logger{Verbosef: log.printf, Errorf: log.printf})
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nallowed_ip=%v/32\nendpoint=%v\npersistent_keepalive_interval=1\n",
		hex.EncodeToString(self.priv[:]), port, hex.EncodeToString(other.pub[:]), otherInner, otherEndpoint)
	if err := dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := dev.Up(); err != nil {
		t.Fatalf("device up in %s: %v", h.NS, err)
	}
	t.Cleanup(dev.Close)
	return &peer{dev: dev, tnet: tnet, bind: bind, log: log, h: h}
}

// transfer sends size bytes each way over a TCP connection through the
// tunnel, from A's netstack to B's, and checks both arrive unchanged
// (SHA-256).
func transfer(t *testing.T, a, b *peer, size int) time.Duration {
	t.Helper()
	ln, err := b.tnet.ListenTCPAddrPort(netip.AddrPortFrom(innerB, 5001))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type result struct {
		got [32]byte
		err error
	}
	// Each side sends size random bytes and hashes what it receives.
	run := func(c net.Conn, data []byte, out chan<- result) {
		var wg sync.WaitGroup
		wg.Add(1)
		var werr error
		go func() {
			defer wg.Done()
			_, werr = c.Write(data)
			if tc, ok := c.(interface{ CloseWrite() error }); ok {
				tc.CloseWrite()
			}
		}()
		h := sha256.New()
		_, rerr := io.CopyN(h, c, int64(size))
		wg.Wait()
		var r result
		copy(r.got[:], h.Sum(nil))
		r.err = errors.Join(werr, rerr)
		out <- r
	}
	dataA, dataB := make([]byte, size), make([]byte, size)
	rand.Read(dataA)
	rand.Read(dataB)
	wantA, wantB := sha256.Sum256(dataA), sha256.Sum256(dataB)
	resA, resB := make(chan result, 1), make(chan result, 1)
	start := time.Now()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			resB <- result{err: err}
			return
		}
		defer c.Close()
		run(c, dataB, resB)
	}()
	var c net.Conn
	for try := 0; ; try++ {
		// The first packets wait for the handshake.
		c, err = a.tnet.DialContextTCPAddrPort(ctx, netip.AddrPortFrom(innerB, 5001))
		if err == nil || try == 10 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial through the tunnel: %v", err)
	}
	defer c.Close()
	run(c, dataA, resA)
	ra, rb := <-resA, <-resB
	took := time.Since(start)
	if ra.err != nil || rb.err != nil {
		t.Fatalf("transfer: A %v, B %v", ra.err, rb.err)
	}
	if rb.got != wantA {
		t.Errorf("B received %x, A sent %x", rb.got, wantA)
	}
	if ra.got != wantB {
		t.Errorf("A received %x, B sent %x", ra.got, wantB)
	}
	return took
}

// A tunnel between wireguard-go on AF_XDP and wireguard-go on its own
// kernel-socket bind, then between two AF_XDP binds: 64 MiB each way over
// TCP through the tunnel arrive unchanged.
func TestTunnel(t *testing.T) {
	size := 64 << 20
	if raceEnabled {
		size = 4 << 20
	}
	for _, bothXDP := range []bool{false, true} {
		name := "xdp-to-stdnet"
		if bothXDP {
			name = "xdp-to-xdp"
		}
		t.Run(name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			// The kernel side's datagrams leave with full checksums (veth
			// would leave them to an offload that never runs).
			for _, h := range []*netnstest.Host{pair.A, pair.B} {
				if out, err := h.Command(context.Background(), "ethtool", "-K", h.Link, "tx", "off").CombinedOutput(); err != nil {
					t.Fatalf("ethtool: %v %s", err, out)
				}
			}
			ka, kb := newKey(t), newKey(t)
			xa := wireguard.NewBind(pair.A.Link, wireguard.Options{Do: pair.A.Do})
			var bb conn.Bind = conn.NewStdNetBind()
			if bothXDP {
				bb = wireguard.NewBind(pair.B.Link, wireguard.Options{Do: pair.B.Do})
			}
			a := newPeer(t, pair.A, xa, innerA, portA, ka, kb, innerB, netip.AddrPortFrom(pair.B.IPv4, portB))
			b := newPeer(t, pair.B, bb, innerB, portB, kb, ka, innerA, netip.AddrPortFrom(pair.A.IPv4, portA))
			took := transfer(t, a, b, size)
			t.Logf("%d MiB each way in %v: %.0f Mbit/s each way", size>>20, took, float64(size)*8/took.Seconds()/1e6)
			st := xa.Stats().Total()
			t.Logf("A's bind: %d datagrams in, %d out; drops %+v; the kernel dropped %d", st.Datagrams, st.Sent, st.Drops, st.Socket.RXDropped+st.Socket.RXRingFull)
			if st.Datagrams == 0 || st.Sent == 0 {
				t.Errorf("the AF_XDP bind carried nothing (%d in, %d out)", st.Datagrams, st.Sent)
			}
			if st.Drops.Total() != 0 {
				t.Errorf("the AF_XDP bind dropped frames: %+v", st.Drops)
			}
		})
	}
}

// Close makes every ReceiveFunc return net.ErrClosed; endpoints that do
// not parse are errors.
func TestBindContract(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	b := wireguard.NewBind(pair.A.Link, wireguard.Options{Do: pair.A.Do})
	fns, port, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if port == 0 || len(fns) != 3 {
		t.Fatalf("Open: port %d, %d receive functions, want a port and 2 queues + the kernel socket's", port, len(fns))
	}
	if _, _, err := b.Open(0); !errors.Is(err, conn.ErrBindAlreadyOpen) {
		t.Errorf("second Open: %v", err)
	}
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() {
			bufs := make([][]byte, b.BatchSize())
			for i := range bufs {
				bufs[i] = make([]byte, 2048)
			}
			sizes := make([]int, len(bufs))
			eps := make([]conn.Endpoint, len(bufs))
			for {
				if _, err := fn(bufs, sizes, eps); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range fns {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("ReceiveFunc after Close: %v, want net.ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a ReceiveFunc is still blocked 2 s after Close")
		}
	}
	for _, s := range []string{"", "198.18.0.1", "198.18.0.1:99999", "[2001:db8::1]", "not an address:1"} {
		if _, err := b.ParseEndpoint(s); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", s)
		}
	}
	ep, err := b.ParseEndpoint("[2001:db8::1]:51820")
	if err != nil || ep.DstToString() != "[2001:db8::1]:51820" {
		t.Errorf("ParseEndpoint: %v, %v", ep, err)
	}
}

// openPair opens a Bind in each namespace of a fresh pair and returns
// them with their ReceiveFuncs and the endpoint of the other's port.
func openPair(t *testing.T) (*netnstest.Pair, [2]*wireguard.Bind, [2][]conn.ReceiveFunc, [2]conn.Endpoint) {
	t.Helper()
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	var binds [2]*wireguard.Bind
	var fns [2][]conn.ReceiveFunc
	var eps [2]conn.Endpoint
	for i, h := range []*netnstest.Host{pair.A, pair.B} {
		binds[i] = wireguard.NewBind(h.Link, wireguard.Options{Do: h.Do})
		f, port, err := binds[i].Open(0)
		if err != nil {
			t.Fatal(err)
		}
		fns[i] = f
		t.Cleanup(func() { binds[i].Close() })
		ep, err := binds[i].ParseEndpoint(netip.AddrPortFrom(h.IPv4, port).String())
		if err != nil {
			t.Fatal(err)
		}
		eps[i] = ep
	}
	return pair, binds, fns, eps
}

// The bind adds no allocation per packet: Send of a batch and the
// ReceiveFunc that takes it, once the next hop is known.
func TestBindDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are the race detector's own under -race")
	}
	_, binds, fns, eps := openPair(t)
	const batch = 32
	out := make([][]byte, batch)
	for i := range out {
		out[i] = make([]byte, 1200)
	}
	in := make([][]byte, binds[1].BatchSize())
	for i := range in {
		in[i] = make([]byte, 2048)
	}
	sizes := make([]int, len(in))
	peps := make([]conn.Endpoint, len(in))
	round := func() {
		if err := binds[0].Send(out, eps[1]); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < batch; {
			n, err := fns[1][0](in, sizes, peps)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	// Until the next hop is resolved, datagrams go through the kernel
	// socket, and arrive on B's kernel queue: warm up on the AF_XDP path.
	for i := 0; i < 100 && binds[0].Stats().Queues[0].Sent == 0; i++ {
		binds[0].Send(out[:1], eps[1])
		time.Sleep(5 * time.Millisecond)
	}
	drain := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(drain) {
		// The first datagrams may wait on B's kernel socket: take them.
		ch := make(chan struct{})
		go func() {
			fns[1][1](in, sizes, peps)
			close(ch)
		}()
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
			drain = time.Now()
		}
	}
	round()
	if a := testing.AllocsPerRun(50, round); a != 0 {
		t.Errorf("a batch of %d packets through Send and a ReceiveFunc allocates %.1f times", batch, a)
	}
}

// A packet larger than the path MTU is an error, not a silent drop.
func TestBindOversizedPacket(t *testing.T) {
	_, binds, _, eps := openPair(t)
	err := binds[0].Send([][]byte{make([]byte, 1473)}, eps[1])
	if !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("Send of 1473 bytes over a 1500-byte MTU: %v, want EMSGSIZE", err)
	}
}

// A device that goes away under a running tunnel: the ReceiveFuncs fail
// with the device's error, wireguard-go reports it, and after the
// device's Close no goroutine of the bind is left.
func TestTunnelDeviceGone(t *testing.T) {
	before := runtime.NumGoroutine()
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		if out, err := h.Command(context.Background(), "ethtool", "-K", h.Link, "tx", "off").CombinedOutput(); err != nil {
			t.Fatalf("ethtool: %v %s", err, out)
		}
	}
	ka, kb := newKey(t), newKey(t)
	xa := wireguard.NewBind(pair.A.Link, wireguard.Options{Do: pair.A.Do})
	a := newPeer(t, pair.A, xa, innerA, portA, ka, kb, innerB, netip.AddrPortFrom(pair.B.IPv4, portB))
	b := newPeer(t, pair.B, conn.NewStdNetBind(), innerB, portB, kb, ka, innerA, netip.AddrPortFrom(pair.A.IPv4, portA))
	transfer(t, a, b, 1<<20)
	if out, err := pair.A.Command(context.Background(), "ip", "link", "del", pair.A.Link).CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v %s", err, out)
	}
	const failed, cause = "Failed to receive", "no such network interface"
	deadline := time.Now().Add(3 * time.Second)
	for !(a.log.find(failed) && a.log.find(cause)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !a.log.find(failed) || !a.log.find(cause) {
		t.Errorf("wireguard-go reported no receive error naming the device within 3 s")
	}
	a.dev.Close()
	b.dev.Close()
	deadline = time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
