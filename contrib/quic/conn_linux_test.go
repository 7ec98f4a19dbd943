//go:build linux

package xdpquic_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	xdpquic "github.com/xdpio/xdpio/contrib/quic"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
)

const port = 4433

// tlsConfigs returns a server and a client TLS configuration around a
// fresh self-signed certificate.
func tlsConfigs(t testing.TB) (*tls.Config, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xdpio test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"xdpio.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"xdpio-echo"}}
	client := &tls.Config{RootCAs: pool, ServerName: "xdpio.test", NextProtos: []string{"xdpio-echo"}}
	return server, client
}

// endpoint is one side's UDP socket for quic-go: xdpnet through the
// adapter, or a kernel socket.
func endpoint(t testing.TB, h *netnstest.Host, laddr netip.AddrPort, overXDP bool) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	err := h.Do(func() (err error) {
		if overXDP {
			pc, err = xdpquic.Listen(h.Link, laddr, xdpnet.Config{})
		} else {
			pc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
		}
		return err
	})
	if err != nil {
		t.Fatalf("endpoint %v in %s: %v", laddr, h.NS, err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// echoServer accepts connections and echoes every stream back.
func echoServer(t testing.TB, ln *quic.Listener) {
	for {
		c, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		go func() {
			for {
				s, err := c.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() {
					defer s.Close()
					io.Copy(s, s)
				}()
			}
		}()
	}
}

// echoStream sends size random bytes on a new stream and checks that the
// same come back (SHA-256).
func echoStream(t testing.TB, c *quic.Conn, size int) {
	t.Helper()
	s, err := c.OpenStreamSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	rand.Read(data)
	want := sha256.Sum256(data)
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, werr = s.Write(data)
		s.Close()
	}()
	h := sha256.New()
	_, rerr := io.Copy(h, s)
	wg.Wait()
	if err := errors.Join(werr, rerr); err != nil {
		t.Fatalf("stream of %d bytes: %v", size, err)
	}
	var got [32]byte
	copy(got[:], h.Sum(nil))
	if got != want {
		t.Fatalf("stream of %d bytes came back as %x, sent %x", size, got, want)
	}
}

// quic-go servers and clients on AF_XDP and on kernel UDP, both ways,
// over IPv4 and IPv6: a 32 MiB stream is echoed unchanged, and many short
// streams open and close.
func TestQUICEcho(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		serverXDP, clientXDP bool
		v6                   bool
	}{
		{"server on xdp, ipv4", true, false, false},
		{"client on xdp, ipv4", false, true, false},
		{"server on xdp, ipv6", true, false, true},
		{"client on xdp, ipv6", false, true, true},
		{"both on xdp, ipv4", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			// The kernel side's datagrams leave with full checksums.
			for _, h := range []*netnstest.Host{pair.A, pair.B} {
				if out, err := h.Command(context.Background(), "ethtool", "-K", h.Link, "tx", "off").CombinedOutput(); err != nil {
					t.Fatalf("ethtool: %v %s", err, out)
				}
			}
			srvAddr, cliAddr := netip.AddrPortFrom(pair.B.IPv4, port), netip.AddrPortFrom(pair.A.IPv4, port+1)
			if tc.v6 {
				srvAddr, cliAddr = netip.AddrPortFrom(pair.B.IPv6, port), netip.AddrPortFrom(pair.A.IPv6, port+1)
			}
			stls, ctls := tlsConfigs(t)
			srv := &quic.Transport{Conn: endpoint(t, pair.B, srvAddr, tc.serverXDP)}
			defer srv.Close()
			ln, err := srv.Listen(stls, &quic.Config{MaxIncomingStreams: 1000})
			if err != nil {
				t.Fatal(err)
			}
			go echoServer(t, ln)
			cli := &quic.Transport{Conn: endpoint(t, pair.A, cliAddr, tc.clientXDP)}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := cli.Dial(ctx, net.UDPAddrFromAddrPort(srvAddr), ctls, &quic.Config{})
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.CloseWithError(0, "")
			size := 32 << 20
			if raceEnabled {
				size = 4 << 20
			}
			start := time.Now()
			echoStream(t, c, size)
			took := time.Since(start)
			for i := 0; i < 200; i++ {
				echoStream(t, c, 100+i)
			}
			t.Logf("%d MiB echoed in %v (%.0f Mbit/s each way); 200 short streams", size>>20, took, float64(size)*8/took.Seconds()/1e6)
			for _, pc := range []net.PacketConn{srv.Conn, cli.Conn} {
				if x, ok := pc.(*xdpquic.Conn); ok {
					st := x.Stats().Total()
					t.Logf("xdpnet: %d datagrams in, %d out, drops %+v, kernel dropped %d", st.Datagrams, st.Sent, st.Drops, st.Socket.RXDropped+st.Socket.RXRingFull)
					if st.Datagrams == 0 || st.Sent == 0 {
						t.Errorf("the AF_XDP conn carried nothing")
					}
				}
			}
		})
	}
}
