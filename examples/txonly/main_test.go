package main

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

func TestBuildUDPDecodes(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1")
	mac1, _ := net.ParseMAC("02:00:00:00:00:01")
	mac2, _ := net.ParseMAC("02:00:00:00:00:02")
	for _, size := range []int{64, 1514} {
		f, err := BuildUDP(mac1, mac2, src, dst, 40001, 40000, size)
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if el := p.ErrorLayer(); el != nil {
			t.Fatalf("gopacket: %v", el.Error())
		}
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if udp == nil || ip == nil || udp.DstPort != 40000 || int(ip.Length) != size-14 {
			t.Fatalf("decoded %v", p)
		}
		// Recompute with gopacket and compare.
		wantUDP, wantIP := udp.Checksum, ip.Checksum
		buf := gopacket.NewSerializeBuffer()
		udp.SetNetworkLayerForChecksum(ip)
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ip, udp, gopacket.Payload(udp.Payload)); err != nil {
			t.Fatal(err)
		}
		p2 := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeIPv4, gopacket.Default)
		if got := p2.Layer(layers.LayerTypeUDP).(*layers.UDP).Checksum; got != wantUDP {
			t.Errorf("size %d: UDP checksum %#x, gopacket computes %#x", size, wantUDP, got)
		}
		if got := p2.Layer(layers.LayerTypeIPv4).(*layers.IPv4).Checksum; got != wantIP {
			t.Errorf("size %d: IPv4 checksum %#x, gopacket computes %#x", size, wantIP, got)
		}
	}
	if _, err := BuildUDP(mac1, mac2, src, dst, 1, 2, 20); err == nil {
		t.Error("a 20-byte frame was accepted")
	}
}

// txonly's datagrams reach a kernel UDP socket on the peer, through the
// runner in each shape and through the plain loop.
func TestTXOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape xsk.Shape
		raw   bool
	}{{"runner per-queue", xsk.ShapePerQueue, false}, {"runner one", xsk.ShapeOne, false}, {"raw", xsk.ShapeAuto, true}} {
		t.Run(tc.name, func(t *testing.T) { testTXOnly(t, tc.shape, tc.raw) })
	}
}

func testTXOnly(t *testing.T, shape xsk.Shape, raw bool) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	var ln *net.UDPConn
	if err := pair.A.Do(func() (err error) {
		ln, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.A.IPv4, 9000)))
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	frame, err := BuildUDP(pair.B.MAC, pair.A.MAC, pair.B.IPv4, pair.A.IPv4, 10000, 9000, 128)
	if err != nil {
		t.Fatal(err)
	}
	// It sends for 1 s (-t 1s) once its sockets are open; ctx only
	// guards against a run that would not end.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- pair.B.Do(func() error {
			return txonly(ctx, pair.B.Link, xsk.Config{NoProgram: true, Socket: xsk.SocketConfig{NoRX: true}}, frame, 4, 32, shape, raw, time.Second)
		})
	}()
	got := 0
	buf := make([]byte, 2048)
	for {
		ln.SetReadDeadline(time.Now().Add(time.Second))
		n, err := ln.Read(buf)
		if err != nil {
			break
		}
		if n != 128-42 {
			t.Fatalf("datagram of %d bytes, want %d", n, 128-42)
		}
		got++
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got < 1000 {
		t.Fatalf("kernel socket received %d datagrams in 1 s, want at least 1000", got)
	}
	t.Logf("kernel socket received %d datagrams", got)
}
