//go:build linux

package xsk_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

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
