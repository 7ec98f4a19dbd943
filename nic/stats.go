package nic

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// driverQueueStat matches the per-queue strings drivers give their
// `ethtool -S` counters: rx_queue_3_drops (veth, ixgbe, ice), rx3_packets
// (mlx5, virtio-net), rxq3_packets and rxq_3_packets (hns3, nfp),
// rx-3.packets (i40e). Not rx_65_to_127_bytes: a histogram bucket of the
// whole device.
var driverQueueStat = regexp.MustCompile(`^(rx|tx)(?:_queue_|q_|q|-|)([0-9]{1,5})[_.](.+)$`)

// driverQueueStats picks the per-queue counters out of a driver's
// `ethtool -S` counters, named as StatsDriver says, RX queues first, each
// type by queue number. Counters of the whole device are left out; a name
// that comes twice for the same queue keeps its first value.
func driverQueueStats(stats []ethtool.Stat) []QueueStats {
	byQueue := map[[2]any]*QueueStats{}
	var out []*QueueStats
	for _, st := range stats {
		m := driverQueueStat.FindStringSubmatch(st.Name)
		if m == nil {
			continue
		}
		id, _ := strconv.Atoi(m[2])
		typ := RX
		if m[1] == "tx" {
			typ = TX
		}
		q := byQueue[[2]any{typ, id}]
		if q == nil {
			q = &QueueStats{Type: typ, Queue: id, Counters: map[string]uint64{}}
			byQueue[[2]any{typ, id}] = q
			out = append(out, q)
		}
		name := m[1] + "_" + m[3]
		if _, dup := q.Counters[name]; !dup {
			q.Counters[name] = st.Value
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type == RX
		}
		return out[i].Queue < out[j].Queue
	})
	qs := make([]QueueStats, len(out))
	for i, q := range out {
		qs[i] = *q
	}
	return qs
}

// parseProcNetDev returns device dev's counters from the text of
// /proc/net/dev: two header lines, whose second names the columns of the
// receive and the transmit half ("face |bytes packets …|bytes packets
// …"), then one line per device ("  eth0: 1234 5 …"). Counters are named
// rx_ or tx_ and the column's name. It reports found false when no line
// names dev.
func parseProcNetDev(text []byte, dev string) (counters map[string]uint64, found bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	var cols []string
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case n == 1:
			continue
		case n == 2:
			halves := strings.Split(line, "|")
			if len(halves) != 3 {
				return nil, false, fmt.Errorf("/proc/net/dev: header %q: want face|receive columns|transmit columns", line)
			}
			for i, dir := range []string{"rx_", "tx_"} {
				f := strings.Fields(halves[i+1])
				if len(f) == 0 {
					return nil, false, fmt.Errorf("/proc/net/dev: header %q names no %scolumns", line, dir)
				}
				for _, c := range f {
					cols = append(cols, dir+c)
				}
			}
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, false, fmt.Errorf("/proc/net/dev: line %d %q: no device name", n, line)
		}
		if strings.TrimSpace(name) != dev {
			continue
		}
		vals := strings.Fields(rest)
		if len(vals) != len(cols) {
			return nil, false, fmt.Errorf("/proc/net/dev: %s has %d values, the header %d columns", dev, len(vals), len(cols))
		}
		counters = make(map[string]uint64, len(cols))
		for i, v := range vals {
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, false, fmt.Errorf("/proc/net/dev: %s %s %q: not a counter", dev, cols[i], v)
			}
			counters[cols[i]] = x
		}
		return counters, true, nil
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("/proc/net/dev: %w", err)
	}
	if cols == nil {
		return nil, false, fmt.Errorf("/proc/net/dev: no header")
	}
	return nil, false, nil
}
