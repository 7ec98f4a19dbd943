//go:build linux

package vethpair

import (
	"fmt"
	"net/netip"
	"os"
)

// NewPair creates two fresh network namespaces joined by a veth pair. The
// caller must call Close, also on the error paths of its own setup;
// namespaces left behind by a process that was killed are swept by the
// next NewPair.
func NewPair(cfg Config) (*Pair, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("vethpair: create pair: %w", ErrNotPrivileged)
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
		return nil, fmt.Errorf("vethpair: %w", err)
	}
	return p, nil
}
