//go:build linux

package xdpprom_test

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	xdpprom "github.com/xdpio/xdpio/contrib/prometheus"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// collectOnce runs c.Collect and drains what it sent, as a registry's
// Gather does (without its sorting and protobuf conversion).
func collectOnce(c prometheus.Collector, ch chan prometheus.Metric) int {
	c.Collect(ch)
	n := len(ch)
	for len(ch) > 0 {
		<-ch
	}
	return n
}

// BenchmarkCollect measures one Collect of each collector on a device with
// 4 queues: ns and allocations per scrape. socket: an xsk.Device's 4
// sockets (4 getsockopt calls); conn: an xdpnet conn on 4 queues and its
// kernel socket; nic: a veth in another namespace (a setns there and back,
// netdev qstats, ethtool -S, NAPIs and queues over netlink); gather: the
// conn's through a registry's Gather, as promhttp serves it.
func BenchmarkCollect(b *testing.B) {
	p := connPair(b, 4)
	run(b, p.B, "ethtool", "-K", p.B.Link, "gro", "on")
	var dev *xsk.Device
	if err := p.B.Do(func() (err error) {
		dev, err = xsk.Open(p.B.Link, xsk.Config{Queues: []int{0, 1, 2, 3}, Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9700)}}, UMEM: xsk.UMEMConfig{NumFrames: 1024}})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	// The conn on the peer: the same queue count, its own XDP program.
	conn := listen(b, p.A, netip.AddrPortFrom(p.A.IPv4, 9701))
	var nicc *xdpprom.NICCollector
	if err := p.B.Do(func() (err error) {
		nicc, err = xdpprom.OpenNICCollector(p.B.Link)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer nicc.Close()
	connc := xdpprom.NewConnCollector("bench", conn)
	ch := make(chan prometheus.Metric, 1024)
	for _, bc := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"socket-4q", xdpprom.NewSocketCollector(dev)},
		{"conn-4q", connc},
		{"nic-veth-4q", nicc},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = collectOnce(bc.c, ch)
			}
			b.ReportMetric(float64(n), "metrics/op")
		})
	}
	b.Run("gather-conn-4q", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(connc)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScrapeEffect measures what scraping costs a running receiver:
// an xsk.Device on 4 veth queues receives and drops (rxdrop, the runner)
// what an XDP live-frames generator sends as fast as it can, in rounds of
// 1 s that alternate between no scrapes and a Gather of the sockets' and
// the device's collectors every 10 ms (100 times Prometheus's usual 1 s
// interval, so that an effect would show): off, on, off, …, off, 21
// rounds. Each scraping round is compared with the mean of the rounds
// either side of it, so that a change of the machine's load over the run
// does not pass for an effect; it reports the median of those changes, the
// receiver's packets/s without and with scrapes (medians), and the time a
// scrape took; once for the sockets' collector alone, once with the
// device's too. Run it alone, on a quiet machine:
//
//	go test -run '^$' -bench ScrapeEffect -benchtime 1x .
func BenchmarkScrapeEffect(b *testing.B) {
	p := connPair(b, 4)
	const port = 9
	var gen *trafficgen.Generator
	if err := p.A.Do(func() (err error) {
		gen, err = trafficgen.New(trafficgen.Config{Ifindex: p.A.Ifindex, Frame: trafficgen.FrameSpec{
			SrcMAC: p.A.MAC, DstMAC: p.B.MAC, Src: p.A.IPv4, Dst: p.B.IPv4, DstPort: port, Size: 64}})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	var dev *xsk.Device
	if err := p.B.Do(func() (err error) {
		dev, err = xsk.Open(p.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rxDone := make(chan error, 1)
	go func() { rxDone <- dev.Receive(ctx, xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) {}) }()
	defer func() { cancel(); <-rxDone }()

	sockets := prometheus.NewRegistry()
	sockets.MustRegister(xdpprom.NewSocketCollector(dev))
	both := prometheus.NewRegistry()
	both.MustRegister(xdpprom.NewSocketCollector(dev))
	if err := p.B.Do(func() error {
		c, err := xdpprom.OpenNICCollector(p.B.Link)
		if err != nil {
			return err
		}
		b.Cleanup(func() { c.Close() })
		return both.Register(c)
	}); err != nil {
		b.Fatal(err)
	}
	received := func() uint64 {
		var n uint64
		for _, s := range dev.Sockets() {
			st, _ := s.Stats()
			n += st.RXFrames
		}
		return n
	}
	for _, bc := range []struct {
		name string
		reg  *prometheus.Registry
	}{{"sockets", sockets}, {"sockets+nic", both}} {
		b.Run(bc.name, func(b *testing.B) { scrapeEffect(b, bc.reg, gen, received) })
	}
}

// scrapeEffect runs BenchmarkScrapeEffect's rounds, scraping reg.
func scrapeEffect(b *testing.B, reg *prometheus.Registry, gen *trafficgen.Generator, received func() uint64) {
	ctx := context.Background()
	const rounds, roundTime, every = 21, time.Second, 10 * time.Millisecond
	var pps []float64
	var scrapes int
	var scrapeTime time.Duration
	for b.Loop() {
		pps, scrapes, scrapeTime = nil, 0, 0
		for r := range rounds {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if r%2 == 1 {
				wg.Go(func() {
					tk := time.NewTicker(every)
					defer tk.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tk.C:
						}
						t0 := time.Now()
						if _, err := reg.Gather(); err != nil {
							b.Error(err)
						}
						scrapeTime += time.Since(t0)
						scrapes++
					}
				})
			}
			before := received()
			res, err := gen.Run(ctx, 0, roundTime)
			after := received()
			close(stop)
			wg.Wait()
			if err != nil {
				b.Fatal(err)
			}
			pps = append(pps, float64(after-before)/res.Elapsed.Seconds())
		}
	}
	var off, on, change []float64
	for r, v := range pps {
		if r%2 == 0 {
			off = append(off, v)
			continue
		}
		on = append(on, v)
		change = append(change, 100*(v/((pps[r-1]+pps[r+1])/2)-1))
	}
	b.ReportMetric(median(off), "rx-pkts/s-no-scrape")
	b.ReportMetric(median(on), "rx-pkts/s-scraping")
	b.ReportMetric(median(change), "%-change")
	b.ReportMetric(float64(scrapeTime.Microseconds())/float64(max(scrapes, 1)), "µs/scrape")
	fmt.Fprintf(os.Stderr, "packets/s by round (no scrapes, a scrape every %v, no scrapes, …): %.0f\nchange of each scraping round against the rounds either side (%%): %.1f\n%d scrapes, %v each on average\n",
		every, pps, change, scrapes, scrapeTime/time.Duration(max(scrapes, 1)))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
