package netnstest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
)

// ErrNotPrivileged is returned by NewPair when the process is not root.
var ErrNotPrivileged = errors.New("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN and CAP_BPF) to create namespaces and attach XDP")

// NewPair creates the same test network as New, for programs that have no
// testing.TB (benchmarks, demos). The caller must call Close, also on the
// error paths of its own setup; namespaces left behind by a process that was
// killed are swept by the next New or NewPair.
func NewPair(cfg Config) (*Pair, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("netnstest: create pair: %w", ErrNotPrivileged)
	}
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if cfg.MTU <= 0 {
		cfg.MTU = 1500
	}
	sweep()
	n := counter.Add(1)
	base := fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), n)
	p := &Pair{
		A:      &Host{NS: base + "-a", Link: "veth-a", IPv4: netip.MustParseAddr("198.18.0.1"), IPv6: netip.MustParseAddr("2001:db8::1")},
		B:      &Host{NS: base + "-b", Link: "veth-b", IPv4: netip.MustParseAddr("198.18.0.2"), IPv6: netip.MustParseAddr("2001:db8::2")},
		Queues: cfg.Queues,
		MTU:    cfg.MTU,
	}
	if err := p.build(); err != nil {
		p.Close()
		return nil, fmt.Errorf("netnstest: %w", err)
	}
	return p, nil
}
