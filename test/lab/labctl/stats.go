package labctl

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
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

// RXQueuePackets returns the per-RX-queue packet counters of virtio-net's
// `ethtool -S` (rx_queue_N_packets), indexed by queue.
func RXQueuePackets(dev string, queues int) ([]uint64, error) {
	m, err := Stats(dev)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, queues)
	for q := range out {
		v, ok := m[fmt.Sprintf("rx_queue_%d_packets", q)]
		if !ok {
			return nil, fmt.Errorf("ethtool -S %s: no rx_queue_%d_packets counter", dev, q)
		}
		out[q] = v
	}
	return out, nil
}
