//go:build linux

package xdpprom_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
)

// run runs a command inside h's namespace and returns its output.
func run(t testing.TB, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", name, args, h.NS, err, out)
	}
	return string(out)
}

// ethtoolS is `ethtool -S` of h's link: the kernel's veth counters.
func ethtoolS(t testing.TB, h *netnstest.Host) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := h.EthtoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gathered is a registry's samples by `name{label="value",…}`, labels
// sorted by name.
type gathered map[string]float64

func gather(t testing.TB, g prometheus.Gatherer) gathered {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := gathered{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, lp := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue()
			if m.Gauge != nil {
				v = m.GetGauge().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// sum adds the samples of family name whose labels contain every one of
// match (`queue="0"`).
func (g gathered) sum(name string, match ...string) (float64, int) {
	var s float64
	n := 0
	for k, v := range g {
		fam, labels, _ := strings.Cut(k, "{")
		if fam != name {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(labels, m)
		}
		if ok {
			s += v
			n++
		}
	}
	return s, n
}

// monotonic fails t if a counter of cur is below its value in prev.
func monotonic(t testing.TB, what string, prev, cur gathered) {
	t.Helper()
	for k, v := range prev {
		fam, _, _ := strings.Cut(k, "{")
		if !strings.HasSuffix(fam, "_total") {
			continue
		}
		if w, ok := cur[k]; ok && w < v {
			t.Errorf("%s: %s went back from %v to %v", what, k, v, w)
		}
	}
}

// sendUDP sends n datagrams of size bytes from a kernel socket in h to
// dst, waiting after each batch until delivered reports them all (bounded
// to 10 s a batch), so that no ring overflows on a loaded machine.
func sendUDP(t testing.TB, h *netnstest.Host, dst netip.AddrPort, n, size int, delivered func() uint64) {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := delivered()
	msg := make([]byte, size)
	const batch = 50
	for sent := 0; sent < n; {
		for i := 0; i < batch && sent < n; i++ {
			msg[0] = byte(sent)
			if _, err := c.WriteToUDPAddrPort(msg, dst); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
			sent++
		}
		for deadline := time.Now().Add(10 * time.Second); delivered()-start < uint64(sent); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d datagrams delivered after 10 s", delivered()-start, sent)
			}
		}
	}
}

// listen opens an xdpnet conn on h's veth inside its namespace, reads it
// until it is closed, and returns it; A's TX checksumming must be off.
func listen(t testing.TB, h *netnstest.Host, laddr netip.AddrPort) *xdpnet.UDPConn {
	c, _ := listenReader(t, h, laddr)
	return c
}

// reader reads a conn on a goroutine of its own until the conn is closed;
// Pause stops it reading (datagrams then wait in the sockets' rings, and
// the kernel drops what does not fit), Resume starts it again.
type reader struct {
	pause, resume chan chan struct{}
}

func (r *reader) Pause() {
	ack := make(chan struct{})
	r.pause <- ack
	<-ack
}

func (r *reader) Resume() {
	ack := make(chan struct{})
	r.resume <- ack
	<-ack
}

func listenReader(t testing.TB, h *netnstest.Host, laddr netip.AddrPort) (*xdpnet.UDPConn, *reader) {
	t.Helper()
	var c *xdpnet.UDPConn
	if err := h.Do(func() (err error) {
		c, err = xdpnet.ListenUDP(h.Link, laddr, xdpnet.Config{})
		return err
	}); err != nil {
		t.Fatalf("ListenUDP %v on %s: %v", laddr, h.Link, err)
	}
	t.Cleanup(func() { c.Close() })
	r := &reader{pause: make(chan chan struct{}), resume: make(chan chan struct{})}
	go func() {
		buf := make([]byte, 2048)
		for {
			select {
			case ack := <-r.pause:
				close(ack)
				close(<-r.resume)
			default:
			}
			// A short deadline, so that Pause is answered promptly.
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()
	return c, r
}

// connPair is a veth pair with TX checksumming off at A (the sender), so
// that an xdpnet conn at B takes A's datagrams (xdpnet's documentation,
// "veth and checksums").
func connPair(t testing.TB, queues int) *netnstest.Pair {
	t.Helper()
	netnstest.RequirePriv(t)
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: queues})
	run(t, p.A, "ethtool", "-K", p.A.Link, "tx", "off")
	return p
}
