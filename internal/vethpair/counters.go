package vethpair

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Counters returns the kernel's SNMP counters of h's namespace: every
// counter of /proc/net/snmp and /proc/net/netstat, keyed by table and name
// ("UdpInCsumErrors", "TcpExtTCPTimeouts", "IpExtInCsumErrors"), and every
// counter of /proc/net/snmp6 under its own name ("Udp6InCsumErrors").
func (h *Host) Counters() (map[string]int64, error) {
	var m map[string]int64
	err := h.Do(func() (err error) {
		m, err = ReadCounters()
		return err
	})
	return m, err
}

// ReadCounters is Counters for the namespace of the calling thread (lock
// the thread, or call it inside Host.Do).
func ReadCounters() (map[string]int64, error) {
	m := map[string]int64{}
	for _, file := range []string{"snmp", "netstat"} {
		b, err := os.ReadFile("/proc/thread-self/net/" + file)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(keys) == 0 || len(keys) != len(vals) || keys[0] != vals[0] {
				return nil, fmt.Errorf("/proc/net/%s: unexpected lines %q / %q", file, lines[i], lines[i+1])
			}
			table := strings.TrimSuffix(keys[0], ":")
			for j := 1; j < len(keys); j++ {
				v, err := strconv.ParseInt(vals[j], 10, 64)
				if err != nil {
					return nil, fmt.Errorf("/proc/net/%s: %s %s=%q: %w", file, table, keys[j], vals[j], err)
				}
				m[table+keys[j]] = v
			}
		}
	}
	b, err := os.ReadFile("/proc/thread-self/net/snmp6")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/snmp6: %s=%q: %w", f[0], f[1], err)
			}
			m[f[0]] = v
		}
	}
	return m, nil
}

// EthtoolStats returns the driver's statistics of h's link, as
// `ethtool -S` prints them. It runs ethtool from a thread inside h's
// namespace (not through `ip netns exec`), so it works after the
// namespace's name was deleted too.
func (h *Host) EthtoolStats(ctx context.Context) (map[string]uint64, error) {
	var out []byte
	err := h.Do(func() (err error) {
		out, err = exec.CommandContext(ctx, "ethtool", "-S", h.Link).Output()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: %w", h.Link, err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue // the header line
		}
		m[k] = x
	}
	return m, nil
}

// SumStats sums the statistics of m whose names start with prefix and end
// with suffix ("tx_queue_", "_xdp_xmit_errors"), and reports whether there
// were any.
func SumStats(m map[string]uint64, prefix, suffix string) (uint64, bool) {
	var n uint64
	found := false
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) {
			n += v
			found = true
		}
	}
	return n, found
}

// XDPXmitErrors sums veth's tx_queue_N_xdp_xmit_errors of h's link, as
// `ethtool -S` shows them: frames sent with XDP_TX or XDP_REDIRECT that the
// peer's ring had no room for (its NAPI was held off, as on a loaded
// machine). A frame the generator counted as sent but the peer never saw
// is counted here.
func (h *Host) XDPXmitErrors(ctx context.Context) (uint64, error) {
	m, err := h.EthtoolStats(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := SumStats(m, "tx_queue_", "_xdp_xmit_errors")
	if !ok {
		return 0, fmt.Errorf("ethtool -S %s has no tx_queue_N_xdp_xmit_errors", h.Link)
	}
	return n, nil
}
