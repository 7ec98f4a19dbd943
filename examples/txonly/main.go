// Command txonly sends UDP packets as fast as it can from every chosen
// queue of an interface, one AF_XDP socket and one goroutine per queue. It
// prints packets/s per queue once a second and the totals at the end.
//
//	txonly -i eth0 -dst 198.18.0.1 -dst-mac 02:00:00:00:00:01 [-size 64] [-q 0-1] [-t 10s]
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"

	"github.com/xdpio/xdpio/examples/internal/exutil"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "txonly:", err)
		os.Exit(1)
	}
}

func run() error {
	var f exutil.Flags
	f.Register(flag.CommandLine)
	dstMAC := flag.String("dst-mac", "ff:ff:ff:ff:ff:ff", "destination MAC address")
	dst := flag.String("dst", "", "destination IPv4 or IPv6 address (required)")
	src := flag.String("src", "", "source address (default: the interface's first address of that family)")
	port := flag.Int("port", 9000, "destination UDP port")
	size := flag.Int("size", 64, "frame size in bytes, Ethernet header included (without FCS)")
	flows := flag.Int("flows", 16, "distinct source ports per queue")
	flag.Parse()
	if f.Iface == "" || *dst == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	mac, err := net.ParseMAC(*dstMAC)
	if err != nil {
		return fmt.Errorf("-dst-mac: %w", err)
	}
	dstIP, err := netip.ParseAddr(*dst)
	if err != nil {
		return fmt.Errorf("-dst: %w", err)
	}
	ifi, err := net.InterfaceByName(f.Iface)
	if err != nil {
		return err
	}
	srcIP, err := sourceAddr(ifi, *src, dstIP.Is4())
	if err != nil {
		return err
	}
	frame, err := BuildUDP(ifi.HardwareAddr, mac, srcIP, dstIP, 10000, uint16(*port), *size)
	if err != nil {
		return err
	}
	cfg.Socket.NoRX = true
	cfg.Socket.TxBudget = 256
	// Sending needs no XDP program: RX stays with the kernel.
	cfg.NoProgram = true
	ctx, cancel := exutil.Context(f.Duration)
	defer cancel()
	return txonly(ctx, f.Iface, cfg, frame, *flows, f.Batch)
}

func sourceAddr(ifi *net.Interface, flagValue string, v4 bool) (netip.Addr, error) {
	if flagValue != "" {
		return netip.ParseAddr(flagValue)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(n.IP)
			ip = ip.Unmap()
			if ip.Is4() == v4 && !ip.IsLinkLocalUnicast() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no address of the destination's family: give -src", ifi.Name)
}

// BuildUDP returns an Ethernet/IP/UDP frame of size bytes with valid
// checksums.
func BuildUDP(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16, size int) ([]byte, error) {
	l3 := 20
	if src.Is6() {
		l3 = 40
	}
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("source %v and destination %v are of different families", src, dst)
	}
	if size < 14+l3+8 || size > 9000 {
		return nil, fmt.Errorf("frame size %d: must be between %d and 9000", size, 14+l3+8)
	}
	f := make([]byte, size)
	copy(f[0:], dstMAC)
	copy(f[6:], srcMAC)
	udpLen := size - 14 - l3
	ip := f[14:]
	if src.Is4() {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		ip[8] = 64
		ip[9] = 17
		s, d := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = 17
		ip[7] = 64
		s, d := src.As16(), dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
	}
	udp := ip[l3:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	if _, err := offload.FillChecksum(f); err != nil {
		return nil, err
	}
	return f, nil
}

// txonly sends copies of frame, with the source port cycling over flows
// values, until ctx ends.
func txonly(ctx context.Context, iface string, cfg xsk.Config, frame []byte, flows, batch int) error {
	dev, err := xsk.Open(iface, cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	socks := dev.Sockets()
	fmt.Printf("txonly on %s: %d queues, %d-byte frames, zero-copy %v\n", iface, len(socks), len(frame), socks[0].ZeroCopy())
	l4 := 14 + 20
	if frame[12] == 0x86 {
		l4 = 14 + 40
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(socks))
	for _, s := range socks {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			// Precompute one frame per flow: the source port changes, and so
			// does the UDP checksum (RFC 1624 incremental update).
			tmpl := make([][]byte, flows)
			for i := range tmpl {
				t := append([]byte(nil), frame...)
				old := binary.BigEndian.Uint16(t[l4:])
				sport := old + uint16(s.Queue()*flows+i)
				binary.BigEndian.PutUint16(t[l4:], sport)
				if c := binary.BigEndian.Uint16(t[l4+6:]); c != 0 {
					binary.BigEndian.PutUint16(t[l4+6:], offload.Update16(c, old, sport))
				}
				tmpl[i] = t
			}
			b := s.NewBatch(batch)
			n := 0
			for ctx.Err() == nil {
				got := s.Alloc(b, batch-b.Len())
				for i := b.Len() - got; i < b.Len(); i++ {
					b.SetLen(i, copy(b.Buffer(i), tmpl[n%flows]))
					n++
				}
				if _, err := s.Transmit(b); err != nil {
					errs <- err
					return
				}
				s.Complete()
			}
			s.Free(b)
		}(s)
	}
	exutil.Report(ctx, os.Stdout, socks, "sent", func(st xsk.Stats) uint64 { return st.TxFrames })
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
