package netnstest

import (
	"fmt"
	"os"
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
