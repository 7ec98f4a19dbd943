//go:build linux

package xdpprom_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	xdpprom "github.com/xdpio/xdpio/contrib/prometheus"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// lint fails t on what client_golang's promlint finds in reg's metrics.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// connQueues returns a conn's datagrams per queue label.
func connQueues(st xdpnet.Stats) map[string]uint64 {
	m := map[string]uint64{}
	for _, q := range st.Queues {
		l := fmt.Sprint(q.Queue)
		if q.Queue == xdpnet.KernelQueue {
			l = "kernel"
		}
		m[l] = q.Datagrams
	}
	return m
}

// A ConnCollector exports what the conn counts (the library's Stats, per
// queue), keeps exporting it after Close, and after Replace with a new
// conn on the same address adds the new conn's counts to the old one's:
// no counter goes back at any scrape.
func TestConnCollectorReplace(t *testing.T) {
	p := connPair(t, 2)
	dst := netip.AddrPortFrom(p.B.IPv4, 9500)
	c1 := listen(t, p.B, dst)
	coll := xdpprom.NewConnCollector("echo", c1)
	if coll.Name() != "echo" || xdpprom.NewConnCollector("", c1).Name() != dst.String() {
		t.Fatalf("Name %q; without a name, %q", coll.Name(), xdpprom.NewConnCollector("", c1).Name())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(coll)
	total := func(c *xdpnet.UDPConn) func() uint64 { return func() uint64 { return c.Stats().Total().Datagrams } }

	sendUDP(t, p.A, dst, 300, 64, total(c1))
	g1 := gather(t, reg)
	lint(t, reg)
	st1 := c1.Stats()
	for q, n := range connQueues(st1) {
		if v := g1[`xdpio_conn_datagrams_total{conn="echo",device="`+p.B.Link+`",queue="`+q+`"}`]; v != float64(n) {
			t.Errorf("queue %s: exported %v datagrams, the conn counted %d", q, v, n)
		}
	}
	if v, _ := g1.sum("xdpio_conn_datagrams_total"); v != 300 {
		t.Errorf("exported %v datagrams, 300 sent", v)
	}
	var rx uint64
	for _, q := range st1.Queues {
		rx += q.Socket.RXFrames
	}
	if v, n := g1.sum("xdpio_xsk_rx_frames_total", `device="`+p.B.Link+`"`); v != float64(rx) || n != 2 {
		t.Errorf("xsk rx frames: exported %v over %d sockets, the conn's sockets counted %d over 2", v, n, rx)
	}
	if v, _ := g1.sum("xdpio_conn_drops_total"); v != 0 {
		t.Errorf("drops exported: %v", v)
	}

	c1.Close()
	g2 := gather(t, reg)
	monotonic(t, "after Close", g1, g2)
	if v, _ := g2.sum("xdpio_conn_datagrams_total"); v != 300 {
		t.Errorf("after Close: %v datagrams exported, want the 300 it counted", v)
	}

	c2 := listen(t, p.B, dst)
	coll.Replace(c2)
	g3 := gather(t, reg)
	monotonic(t, "after Replace", g2, g3)
	if v, _ := g3.sum("xdpio_conn_datagrams_total"); v != 300 {
		t.Errorf("after Replace: %v datagrams exported, want the old conn's 300", v)
	}
	sendUDP(t, p.A, dst, 200, 64, total(c2))
	g4 := gather(t, reg)
	monotonic(t, "the new conn counting", g3, g4)
	for q, n := range connQueues(c2.Stats()) {
		k := `xdpio_conn_datagrams_total{conn="echo",device="` + p.B.Link + `",queue="` + q + `"}`
		if g4[k] != g3[k]+float64(n) {
			t.Errorf("queue %s: exported %v, want the old conn's %v + the new one's %d", q, g4[k], g3[k], n)
		}
	}
	if v, _ := g4.sum("xdpio_conn_datagrams_total"); v != 500 {
		t.Errorf("exported %v datagrams over both conns, 500 sent", v)
	}
	coll.Replace(nil)
	if g := gather(t, reg); len(g) != 0 {
		t.Errorf("Replace(nil): %d samples", len(g))
	}
}

// A SocketCollector of an xsk.Device: the same, through Device.Receive.
func TestSocketCollectorReplace(t *testing.T) {
	p := connPair(t, 2)
	const port = 9501
	open := func() (*xsk.Device, func()) {
		var dev *xsk.Device
		if err := p.B.Do(func() (err error) {
			dev, err = xsk.Open(p.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- dev.Receive(ctx, xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) {}) }()
		stop := func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Receive: %v", err)
			}
			dev.Close()
		}
		t.Cleanup(func() { dev.Close() })
		return dev, stop
	}
	rxFrames := func(dev *xsk.Device) func() uint64 {
		return func() uint64 {
			var n uint64
			for _, s := range dev.Sockets() {
				st, _ := s.Stats()
				n += st.RXFrames
			}
			return n
		}
	}
	dst := netip.AddrPortFrom(p.B.IPv4, port)
	d1, stop1 := open()
	coll := xdpprom.NewSocketCollector(d1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(coll)
	sendUDP(t, p.A, dst, 300, 64, rxFrames(d1))
	g1 := gather(t, reg)
	lint(t, reg)
	if v, n := g1.sum("xdpio_xsk_rx_frames_total"); v != 300 || n != 2 {
		t.Errorf("exported %v frames over %d sockets, 300 sent to 2", v, n)
	}
	for _, s := range d1.Sockets() {
		st, _ := s.Stats()
		k := fmt.Sprintf(`xdpio_xsk_rx_frames_total{device="%s",queue="%d"}`, p.B.Link, s.Queue())
		if g1[k] != float64(st.RXFrames) {
			t.Errorf("%s = %v, the socket counted %d", k, g1[k], st.RXFrames)
		}
		kd := fmt.Sprintf(`xdpio_xsk_rx_drops_total{cause="rx_dropped",device="%s",queue="%d"}`, p.B.Link, s.Queue())
		if v, ok := g1[kd]; !ok || v != float64(st.RXDropped) {
			t.Errorf("%s = %v, the kernel counted %d", kd, v, st.RXDropped)
		}
	}
	stop1()
	g2 := gather(t, reg)
	monotonic(t, "after Close", g1, g2)
	if v, _ := g2.sum("xdpio_xsk_rx_frames_total"); v != 300 {
		t.Errorf("after Close: %v frames exported", v)
	}
	d2, stop2 := open()
	defer stop2()
	coll.Replace(d2)
	sendUDP(t, p.A, dst, 200, 64, rxFrames(d2))
	g3 := gather(t, reg)
	monotonic(t, "after Replace", g2, g3)
	if v, _ := g3.sum("xdpio_xsk_rx_frames_total"); v != 500 {
		t.Errorf("exported %v frames over both devices, 500 sent", v)
	}
}

// A NICCollector made in the device's namespace and gathered from this
// goroutine (the registry's, in another) exports veth's ethtool -S
// counters (the oracle: ethtool before and after); when the device goes
// away, Gather still answers, with scrape_success 0 and no stale counter.
func TestNICCollector(t *testing.T) {
	p := connPair(t, 2)
	run(t, p.B, "ethtool", "-K", p.B.Link, "gro", "on")
	run(t, p.A, "ethtool", "-K", p.A.Link, "tso", "off")
	var coll *xdpprom.NICCollector
	if err := p.B.Do(func() error {
		d, err := nic.Open(p.B.Link)
		if err != nil {
			return err
		}
		t.Cleanup(func() { d.Close() })
		coll, err = xdpprom.NewNICCollector(d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(coll)
	sendUDP(t, p.A, netip.AddrPortFrom(p.B.IPv4, 9), 100, 64, func() uint64 {
		n, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets")
		return n
	})
	lo := ethtoolS(t, p.B)
	g := gather(t, reg)
	hi := ethtoolS(t, p.B)
	lint(t, reg)
	n := 0
	for name, v := range lo {
		var dir, rest string
		var q int
		if _, err := fmt.Sscanf(strings.Replace(name, "_queue_", " ", 1), "%s %d_%s", &dir, &q, &rest); err != nil {
			continue
		}
		n++
		k := fmt.Sprintf(`xdpio_nic_%s_%s_total{device="%s",queue="%d"}`, dir, rest, p.B.Link, q)
		if got, ok := g[k]; !ok || got < float64(v) || got > float64(hi[name]) {
			t.Errorf("%s = %v (%v); ethtool -S %s: %d before, %d after", k, got, ok, name, v, hi[name])
		}
	}
	if n != 18 {
		t.Errorf("%d per-queue ethtool -S counters, want veth's 18", n)
	}
	run(t, p.B, "ip", "link", "del", p.B.Link)
	done := make(chan gathered, 1)
	go func() { done <- gather(t, reg) }()
	select {
	case g = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Gather after the deletion took over 5 s")
	}
	if v, ok := g[`xdpio_nic_scrape_success{device="`+p.B.Link+`",part="stats"}`]; !ok || v != 0 {
		t.Errorf("after the deletion: stats success %v %v", v, ok)
	}
	for k := range g {
		if !strings.HasPrefix(k, "xdpio_nic_scrape_") {
			t.Errorf("after the deletion: %s exported", k)
		}
	}
}
