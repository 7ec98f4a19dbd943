package nic

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/xdpio/xdpio/internal/ethtool"
)

// stats builds ethtool.Stats with values 1, 2, 3, … in order.
func stats(names ...string) []ethtool.Stat {
	out := make([]ethtool.Stat, len(names))
	for i, n := range names {
		out[i] = ethtool.Stat{Name: n, Value: uint64(i + 1)}
	}
	return out
}

// The per-queue strings of the drivers StatsDriver names become queues
// and counters; a device's own counters, histogram buckets among them,
// do not.
func TestDriverQueueStats(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stats []ethtool.Stat
		want  []QueueStats
	}{
		{"veth (Linux 6.18)", stats("peer_ifindex", "rx_queue_0_xdp_packets", "rx_queue_0_drops", "rx_queue_1_xdp_packets", "rx_queue_1_drops",
			"tx_queue_0_xdp_xmit", "tx_queue_1_xdp_xmit"), []QueueStats{
			{RX, 0, map[string]uint64{"rx_xdp_packets": 2, "rx_drops": 3}},
			{RX, 1, map[string]uint64{"rx_xdp_packets": 4, "rx_drops": 5}},
			{TX, 0, map[string]uint64{"tx_xdp_xmit": 6}},
			{TX, 1, map[string]uint64{"tx_xdp_xmit": 7}},
		}},
		{"mlx5 and virtio-net", stats("rx_packets", "rx0_packets", "tx0_bytes", "rx12_xdp_drop", "rx_65_to_127_bytes_phy"), []QueueStats{
			{RX, 0, map[string]uint64{"rx_packets": 2}},
			{RX, 12, map[string]uint64{"rx_xdp_drop": 4}},
			{TX, 0, map[string]uint64{"tx_bytes": 3}},
		}},
		{"i40e", stats("rx-0.packets", "rx-0.bytes", "tx-3.packets", "port.rx_bytes"), []QueueStats{
			{RX, 0, map[string]uint64{"rx_packets": 1, "rx_bytes": 2}},
			{TX, 3, map[string]uint64{"tx_packets": 3}},
		}},
		{"hns3, nfp", stats("rxq0_pktnum_rcd", "txq_2_pkts", "rx_1024_to_1518_octets"), []QueueStats{
			{RX, 0, map[string]uint64{"rx_pktnum_rcd": 1}},
			{TX, 2, map[string]uint64{"tx_pkts": 2}},
		}},
		{"a name twice keeps the first", stats("rx0_packets", "rx_queue_0_packets"), []QueueStats{
			{RX, 0, map[string]uint64{"rx_packets": 1}},
		}},
		{"device counters only", stats("rx_packets", "tx_bytes", "rx_64_bytes", "rx_65_to_127_bytes", "peer_ifindex"), nil},
		{"no strings", nil, nil},
		{"a queue number too long", stats("rx123456_packets"), nil},
	} {
		got := driverQueueStats(tc.stats)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// /proc/net/dev as Linux 6.18 writes it.
const procNetDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  1732049    7801    0    0    0     0          0         0  1732049    7801    0    0    0     0       0          0
  eth0: 18446744073709551615 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
`

func TestParseProcNetDev(t *testing.T) {
	m, found, err := parseProcNetDev([]byte(procNetDev), "eth0")
	if err != nil || !found {
		t.Fatalf("eth0: %v, found %v", err, found)
	}
	want := map[string]uint64{"rx_bytes": 1<<64 - 1, "rx_packets": 2, "rx_errs": 3, "rx_drop": 4, "rx_fifo": 5, "rx_frame": 6, "rx_compressed": 7, "rx_multicast": 8,
		"tx_bytes": 9, "tx_packets": 10, "tx_errs": 11, "tx_drop": 12, "tx_fifo": 13, "tx_colls": 14, "tx_carrier": 15, "tx_compressed": 16}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("eth0 (-want +got):\n%s", diff)
	}
	if m, found, err := parseProcNetDev([]byte(procNetDev), "lo"); err != nil || !found || m["rx_packets"] != 7801 || m["tx_bytes"] != 1732049 {
		t.Errorf("lo: %v %v %v", m, found, err)
	}
	if _, found, err := parseProcNetDev([]byte(procNetDev), "eth1"); err != nil || found {
		t.Errorf("eth1: found %v, %v; want not found, no error", found, err)
	}
	// "l" is no device, though "lo" starts with it.
	if _, found, _ := parseProcNetDev([]byte(procNetDev), "l"); found {
		t.Errorf("l: found")
	}
	for _, bad := range []string{
		"",
		"Inter-|\n",
		"Inter-|\n face bytes packets\n",
		"Inter-|\n face |bytes|\n",
		strings.Replace(procNetDev, " 16\n", "\n", 1),
		strings.Replace(procNetDev, " 16\n", " 16 17\n", 1),
		strings.Replace(procNetDev, " 16\n", " x\n", 1),
		strings.Replace(procNetDev, " 16\n", " -16\n", 1),
		strings.Replace(procNetDev, "  eth0:", "  eth0", 1),
	} {
		if m, found, err := parseProcNetDev([]byte(bad), "eth0"); err == nil && found {
			t.Errorf("%q: %v, no error", bad, m)
		}
	}
}

// FuzzParseProcNetDev: any text gives counters, "not found" or an error,
// never a panic; counters found are one per column, and written back as
// a /proc/net/dev line they parse to themselves.
func FuzzParseProcNetDev(f *testing.F) {
	f.Add([]byte(procNetDev), "lo")
	f.Add([]byte(procNetDev), "eth0")
	f.Add([]byte("a\nb|c|d\nx: 1 2\n"), "x")
	f.Add([]byte(""), "")
	f.Fuzz(func(t *testing.T, text []byte, dev string) {
		m, found, err := parseProcNetDev(text, dev)
		if err != nil || !found {
			if m != nil {
				t.Fatalf("counters %v with found %v, error %v", m, found, err)
			}
			return
		}
		if strings.ContainsAny(dev, ":\n") || strings.TrimSpace(dev) != dev {
			return // a name the kernel never gives: what matched is another
		}
		var rx, tx, vals []string
		for k := range m {
			switch {
			case strings.HasPrefix(k, "rx_"):
				rx = append(rx, k)
			case strings.HasPrefix(k, "tx_"):
				tx = append(tx, k)
			default:
				t.Fatalf("counter %q is neither rx_ nor tx_", k)
			}
		}
		if len(rx) == 0 || len(tx) == 0 {
			t.Fatalf("counters %v: want receive and transmit columns", m)
		}
		for _, k := range append(rx, tx...) {
			vals = append(vals, strconv.FormatUint(m[k], 10))
		}
		header := fmt.Sprintf("x\nface |%s|%s\n", strings.Join(trim(rx, "rx_"), " "), strings.Join(trim(tx, "tx_"), " "))
		again, found, err := parseProcNetDev([]byte(header+dev+": "+strings.Join(vals, " ")+"\n"), dev)
		if err != nil || !found || !cmp.Equal(again, m) {
			t.Fatalf("%v written back parses to %v, %v, %v", m, again, found, err)
		}
	})
}

func trim(names []string, prefix string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(n, prefix)
	}
	return out
}

// FuzzDriverQueueStats: any driver strings give queues of type RX or TX,
// each listed once, in order, with counters named rx_… or tx_… after
// their type, each from a string of that queue.
func FuzzDriverQueueStats(f *testing.F) {
	f.Add("peer_ifindex\nrx_queue_0_xdp_packets\nrx_queue_0_drops\ntx_queue_1_xdp_xmit")
	f.Add("rx0_packets\ntx0_bytes\nrx_65_to_127_bytes")
	f.Add("rx-0.packets\nrxq_2_pkts\nrxq3_x\nrx99999_y")
	f.Add("")
	f.Fuzz(func(t *testing.T, names string) {
		in := stats(strings.Split(names, "\n")...)
		qs := driverQueueStats(in)
		for i, q := range qs {
			if q.Type != RX && q.Type != TX || q.Queue < 0 || len(q.Counters) == 0 {
				t.Fatalf("queue %+v", q)
			}
			if i > 0 {
				p := qs[i-1]
				if p.Type == q.Type && p.Queue >= q.Queue || p.Type == TX && q.Type == RX {
					t.Fatalf("queues out of order: %v then %v", p, q)
				}
			}
			for k, v := range q.Counters {
				if !strings.HasPrefix(k, string(q.Type)+"_") {
					t.Fatalf("%s %d counter %q", q.Type, q.Queue, k)
				}
				if v == 0 || int(v) > len(in) {
					t.Fatalf("%s %d counter %q = %d: from no string", q.Type, q.Queue, k, v)
				}
				if s := in[v-1].Name; !strings.HasPrefix(s, string(q.Type)) || !strings.Contains(s, strconv.Itoa(q.Queue)) || !strings.HasSuffix(s, strings.TrimPrefix(k, string(q.Type)+"_")) {
					t.Fatalf("%s %d counter %q from string %q", q.Type, q.Queue, k, s)
				}
			}
		}
	})
}
