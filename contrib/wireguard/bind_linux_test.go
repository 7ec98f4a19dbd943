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
	"sync"
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
}

// newPeer builds and brings up a device in h's namespace: its Bind opens
// there (device.Up opens the bind on the calling thread).
func newPeer(t testing.TB, h *netnstest.Host, bind conn.Bind, inner netip.Addr, port int, self, other keyPair, otherInner netip.Addr, otherEndpoint netip.AddrPort) *peer {
	t.Helper()
	tun, tnet, err := netstack.CreateNetTUN([]netip.Addr{inner}, nil, 1420)
	if err != nil {
		t.Fatal(err)
	}
	dev := device.NewDevice(tun, bind, device.NewLogger(device.LogLevelError, fmt.Sprintf("(%v) ", inner)))
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nallowed_ip=%v/32\nendpoint=%v\npersistent_keepalive_interval=1\n",
		hex.EncodeToString(self.priv[:]), port, hex.EncodeToString(other.pub[:]), otherInner, otherEndpoint)
	if err := dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := h.Do(dev.Up); err != nil {
		t.Fatalf("device up in %s: %v", h.NS, err)
	}
	t.Cleanup(dev.Close)
	return &peer{dev: dev, tnet: tnet, bind: bind}
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
			t.Logf("A's bind: %d datagrams in, %d out; drops %+v; the kernel dropped %d", st.Datagrams, st.Sent, st.Drops, st.Socket.RxDropped+st.Socket.RxRingFull)
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
