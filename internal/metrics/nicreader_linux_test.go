//go:build linux

package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/metrics"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
)

// run runs a command inside h's namespace and returns its output.
func run(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", name, args, h.NS, err, out)
	}
	return string(out)
}

// ethtoolS is `ethtool -S` of h's link: the oracle of veth's counters.
func ethtoolS(t *testing.T, h *netnstest.Host) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := h.EthtoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sample is one sample of a Set, by family name and labels.
type sample struct {
	name   string
	labels string // "device=vb,queue=0"
}

func samples(s *metrics.Set) map[sample]float64 {
	m := map[sample]float64{}
	for i := range s.Len() {
		f, v, l := s.At(i)
		var kv []string
		for j, n := range f.Labels {
			kv = append(kv, n+"="+l[j])
		}
		m[sample{f.Name, strings.Join(kv, ",")}] = v
	}
	return m
}

// readOutside reads r from a goroutine of its own, not in r's namespace,
// and fails t if the read takes over 5 s.
func readOutside(t *testing.T, r *metrics.NICReader) (*metrics.Set, error) {
	t.Helper()
	s := new(metrics.Set)
	done := make(chan error, 1)
	go func() { done <- r.Read(s) }()
	select {
	case err := <-done:
		return s, err
	case <-time.After(5 * time.Second):
		t.Fatalf("Read of %s took over 5 s", r.Name())
	}
	return nil, nil
}

var perQueueString = regexp.MustCompile(`^(rx|tx)_queue_([0-9]+)_(.+)$`)

// A NICReader opened in a namespace and read from another thread reads
// veth's per-queue ethtool -S counters (the oracle: ethtool itself, before
// and after), its NAPI settings (the oracle: the sysfs files that set
// them) and queues (sysfs's queues directory); lo's totals match the
// kernel's rtnetlink statistics (ip -s link). A deleted device reads as
// scrape_success 0 at once; one created by the same name is read again.
func TestNICReaderVeth(t *testing.T) {
	netnstest.RequirePriv(t)
	netnstest.RequireTool(t, "ethtool")
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	dev := p.B.Link
	// veth counts a frame per queue when its NAPI takes it: GRO on at the
	// receiver, TSO off at the sender. GRO on also gives it NAPIs.
	run(t, p.B, "ethtool", "-K", dev, "gro", "on")
	run(t, p.A, "ethtool", "-K", p.A.Link, "tso", "off")
	// Deferral the kernel applies to every NAPI of the device.
	run(t, p.B, "sh", "-c", fmt.Sprintf("echo 3 > /sys/class/net/%s/napi_defer_hard_irqs && echo 20000 > /sys/class/net/%[1]s/gro_flush_timeout", dev))

	var r, rlo *metrics.NICReader
	err := p.B.Do(func() (err error) {
		if r, err = metrics.OpenNICReader(dev); err != nil {
			return err
		}
		rlo, err = metrics.OpenNICReader("lo")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer rlo.Close()

	err = p.A.Do(func() error {
		c, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range 50 {
			if _, err := c.WriteToUDP([]byte(strconv.Itoa(i)), &net.UDPAddr{IP: p.B.IPv4.AsSlice(), Port: 9}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets"); n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ethtool -S did not count the 50 datagrams in 5 s")
		}
	}

	lo := ethtoolS(t, p.B)
	s, err := readOutside(t, r)
	hi := ethtoolS(t, p.B)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	got := samples(s)
	for _, part := range []string{"stats", "napi", "queues"} {
		if v, ok := got[sample{"xdpio_nic_scrape_success", "device=" + dev + ",part=" + part}]; !ok || v != 1 {
			t.Errorf("scrape_success of %s: %v %v", part, v, ok)
		}
	}
	if got[sample{"xdpio_nic_stats_source", "device=" + dev + ",source=driver"}] != 1 {
		t.Errorf("source is not the driver's ethtool -S: %v", got)
	}
	counters := 0
	for name, v := range lo {
		m := perQueueString.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		counters++
		k := sample{metrics.NICCounterName(m[1] + "_" + m[3]), "device=" + dev + ",queue=" + m[2]}
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("ethtool -S %s is not exported as %v", name, k)
		case g < float64(v) || g > float64(hi[name]):
			t.Errorf("%v = %v; ethtool -S %s read %d before, %d after", k, g, name, v, hi[name])
		}
	}
	if counters != 2*7+2*2 {
		t.Errorf("ethtool -S has %d per-queue counters, want veth's 7 per RX and 2 per TX queue", counters)
	}
	if n, _ := netnstest.SumStats(hi, "rx_queue_", "_xdp_packets"); got[sample{"xdpio_nic_rx_xdp_packets_total", "device=" + dev + ",queue=0"}]+got[sample{"xdpio_nic_rx_xdp_packets_total", "device=" + dev + ",queue=1"}] > float64(n) || n < 50 {
		t.Errorf("rx_xdp_packets: exported more than ethtool -S counted after, or fewer than 50 sent")
	}

	napis := 0
	for k, v := range got {
		switch k.name {
		case "xdpio_nic_napi_defer_hard_irqs":
			napis++
			if v != 3 {
				t.Errorf("%v = %v, sysfs set 3", k, v)
			}
		case "xdpio_nic_napi_gro_flush_timeout_seconds":
			if v != 20e-6 {
				t.Errorf("%v = %v, sysfs set 20000 ns", k, v)
			}
		}
	}
	if napis != 2 {
		t.Errorf("%d NAPIs exported, want veth's 2 (one per RX queue, GRO on)", napis)
	}
	// The queues, against sysfs (ip netns exec mounts the namespace's).
	sysQueues := strings.Fields(run(t, p.B, "ls", "/sys/class/net/"+dev+"/queues"))
	for _, q := range sysQueues {
		typ, id, _ := strings.Cut(q, "-")
		if got[sample{"xdpio_nic_queue_af_xdp", "device=" + dev + ",type=" + typ + ",queue=" + id}] != 0 {
			t.Errorf("queue %s: an AF_XDP socket is bound, says the reader", q)
		}
		found := false
		for k := range got {
			found = found || k.name == "xdpio_nic_queue_info" && strings.HasPrefix(k.labels, "device="+dev+",type="+typ+",queue="+id+",")
		}
		if !found {
			t.Errorf("sysfs queue %s not exported", q)
		}
	}
	if len(sysQueues) != 4 {
		t.Errorf("sysfs has queues %v", sysQueues)
	}
	promtoolCheck(t, text(t, s))

	// lo keeps only device totals: against rtnetlink's (ip -s link).
	before := ipStats(t, p.B, "lo")
	run(t, p.B, "ping", "-c", "3", "-i", "0.01", "-W", "1", "127.0.0.1")
	slo, err := readOutside(t, rlo)
	after := ipStats(t, p.B, "lo")
	if err != nil {
		t.Fatalf("Read lo: %v", err)
	}
	glo := samples(slo)
	if glo[sample{"xdpio_nic_stats_source", "device=lo,source=device"}] != 1 {
		t.Errorf("lo: source is not the device's totals: %v", glo)
	}
	for _, c := range []struct{ metric, ip string }{{"rx_packets", "rx.packets"}, {"tx_packets", "tx.packets"}, {"rx_bytes", "rx.bytes"}, {"tx_bytes", "tx.bytes"}} {
		v := glo[sample{metrics.NICCounterName(c.metric), "device=lo,queue="}]
		if v < before[c.ip] || v > after[c.ip] || after[c.ip] < before[c.ip]+6 {
			t.Errorf("lo %s = %v; ip -s link %s read %v before, %v after (a ping of 3 between)", c.metric, v, c.ip, before[c.ip], after[c.ip])
		}
	}

	// The device goes away: success 0 for every part, no counter, at once.
	run(t, p.B, "ip", "link", "del", dev)
	for range 2 { // the failed read, then the reopen that finds nothing
		s, err = readOutside(t, r)
		if err == nil {
			t.Fatal("Read of a deleted device: no error")
		}
		got = samples(s)
		for _, part := range []string{"stats", "napi", "queues"} {
			if v, ok := got[sample{"xdpio_nic_scrape_success", "device=" + dev + ",part=" + part}]; !ok || v != 0 {
				t.Errorf("deleted: scrape_success of %s: %v %v", part, v, ok)
			}
		}
		for k := range got {
			if k.name != "xdpio_nic_scrape_success" && k.name != "xdpio_nic_scrape_duration_seconds" {
				t.Errorf("deleted device: %v exported", k)
			}
		}
	}
	t.Logf("deleted: %v", err)
	// One by that name comes: it is read.
	run(t, p.B, "ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	s, err = readOutside(t, r)
	got = samples(s)
	if err != nil || got[sample{"xdpio_nic_scrape_success", "device=" + dev + ",part=stats"}] != 1 ||
		got[sample{"xdpio_nic_rx_xdp_packets_total", "device=" + dev + ",queue=0"}] != 0 {
		t.Errorf("created again: %v\n%v", err, got)
	}
}

// ipStats returns `ip -s -j link show dev` statistics, as "rx.packets".
func ipStats(t *testing.T, h *netnstest.Host, dev string) map[string]float64 {
	t.Helper()
	var links []struct {
		Stats map[string]map[string]float64 `json:"stats64"`
	}
	out := run(t, h, "ip", "-s", "-j", "link", "show", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s -j link show %s: %v\n%s", dev, err, out)
	}
	m := map[string]float64{}
	for dir, c := range links[0].Stats {
		for k, v := range c {
			m[dir+"."+k] = v
		}
	}
	return m
}

func text(t *testing.T, s *metrics.Set) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A reader made in this namespace reads without entering any (the common
// case: no setns per scrape); an interface that does not exist is an
// error at open.
func TestNICReaderHere(t *testing.T) {
	netnstest.RequirePriv(t)
	if _, err := metrics.OpenNICReader("nosuchdev0"); err == nil {
		t.Fatal("OpenNICReader of a missing device: no error")
	}
	r, err := metrics.OpenNICReader("lo")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := new(metrics.Set)
	if err := r.Read(s); err != nil {
		t.Fatal(err)
	}
	if samples(s)[sample{"xdpio_nic_stats_source", "device=lo,source=device"}] != 1 {
		t.Errorf("lo: %v", samples(s))
	}
	// After Close: every part fails, with ErrClosed.
	r.Close()
	s.Reset()
	if err := r.Read(s); !errors.Is(err, nic.ErrClosed) || samples(s)[sample{"xdpio_nic_scrape_success", "device=lo,part=stats"}] != 0 {
		t.Errorf("Read after Close: %v, %v", err, samples(s))
	}
}
