//go:build linux

package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/xdpio/xdpio/internal/vethpair"
)

var queuePrefix = regexp.MustCompile(`^(rx|tx)_queue_\d+_`)

// vethStats reads `ethtool -S` of h's veth (vethpair's reader) and sums
// the per-queue counters by name (rx_queue_0_drops + rx_queue_1_drops ->
// rx_drops).
func vethStats(ctx context.Context, h *vethpair.Host) (map[string]uint64, error) {
	raw, err := h.EthtoolStats(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	for k, n := range raw {
		if loc := queuePrefix.FindStringSubmatchIndex(k); loc != nil {
			k = k[loc[2]:loc[3]] + "_" + k[loc[1]:]
		}
		m[k] += n
	}
	return m, nil
}

// diff formats the non-zero differences b-a per second.
func diff(a, b map[string]uint64, secs float64) string {
	var keys []string
	for k := range b {
		if b[k] != a[k] && k != "peer_ifindex" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.2fM/s", k, float64(b[k]-a[k])/secs/1e6))
	}
	return strings.Join(parts, " ")
}
