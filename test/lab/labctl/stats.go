package labctl

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Stats runs `ethtool -S dev` (the real ethtool, the oracle of the
// driver's counters) and returns its counters by name.
func Stats(dev string) (map[string]uint64, error) {
	out, err := exec.Command("ethtool", "-S", dev).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: %w: %s", dev, err, out)
	}
	return ParseStats(out)
}

// ParseStats parses `ethtool -S` output ("     name: value" lines after a
// "NIC statistics:" header).
func ParseStats(out []byte) (map[string]uint64, error) {
	m := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, val, ok := strings.Cut(line, ":")
		if !ok || val == "" {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse ethtool -S line %q: %w", line, err)
		}
		m[strings.TrimSpace(name)] = v
	}
	return m, sc.Err()
}

// rxQueueStat matches the per-RX-queue packet counters drivers name in
// `ethtool -S`: virtio-net's "rx0_packets" (Linux 6.x),
// "rx_queue_0_packets" (older virtio-net, veth and others).
var rxQueueStat = regexp.MustCompile(`^rx_?(?:queue_)?(\d+)_packets$`)

// RXQueuePackets returns the per-RX-queue packet counters of `ethtool -S
// dev` (rxN_packets or rx_queue_N_packets), indexed by queue.
func RXQueuePackets(dev string, queues int) ([]uint64, error) {
	m, err := Stats(dev)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, queues)
	found := make([]bool, queues)
	for name, v := range m {
		sm := rxQueueStat.FindStringSubmatch(name)
		if sm == nil {
			continue
		}
		q, _ := strconv.Atoi(sm[1])
		if q < queues {
			out[q], found[q] = v, true
		}
	}
	for q, ok := range found {
		if !ok {
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("ethtool -S %s: no packet counter of RX queue %d among %s", dev, q, strings.Join(names, " "))
		}
	}
	return out, nil
}
