//go:build linux

package xsk

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// BenchmarkFilterProgram times the redirect program alone in the kernel's
// test run (BPF_PROG_RUN with repeat; the kernel reports the time per
// run), for a UDP frame every filter matches: no filter, the hand-built
// rule, the same rule as an expression, and a 10-clause expression. No
// socket is registered, so the program ends in XDP_PASS after the map
// lookup. Needs root.
func BenchmarkFilterProgram(b *testing.B) {
	netnstest.RequirePriv(b)
	frame := benchFrame()
	for _, bc := range []struct {
		name string
		cfg  ProgramConfig
	}{
		{"all", ProgramConfig{}},
		{"rule", ProgramConfig{Filter: []Rule{UDPPort(9000)}}},
		{"expr", ProgramConfig{Expr: "udp dst port 9000"}},
		{"expr10", ProgramConfig{Expr: "not arp and not icmp and not tcp port 22 and not port 53 and not ip6 and " +
			"not ether broadcast and len >= 60 and ip[8] != 0 and not src net 203.0.113.0/24 and udp dst port 9000"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg // b.Run calls this again with a larger b.N
			prog, err := checkProgramConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			cfg.BPF = prog
			xsks, err := newXSKMap(1)
			if err != nil {
				b.Fatal(err)
			}
			defer xsks.Close()
			insns, err := buildInstructions(progMaps{xsks: xsks}, cfg, build{noSocket: xdpTX})
			if err != nil {
				b.Fatal(err)
			}
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, Instructions: insns, License: "Dual MIT/GPL"})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ret, per, err := p.Benchmark(frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ret != xdpTX {
				b.Fatalf("the program returned %d, not the match verdict", ret)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/run")
		})
	}
}

// benchFrame is a 64-byte IPv4 UDP frame to port 9000, TTL 64.
func benchFrame() []byte {
	f := make([]byte, 64)
	f[0], f[6] = 0x02, 0x02
	f[12], f[13] = 0x08, 0x00
	f[14], f[22], f[23] = 0x45, 64, 17
	f[16], f[17] = 0, 50
	src, dst := netip.MustParseAddr("198.18.0.1").As4(), netip.MustParseAddr("198.18.0.2").As4()
	copy(f[26:], src[:])
	copy(f[30:], dst[:])
	f[34], f[35], f[36], f[37] = 0x9c, 0x40, 0x23, 0x28 // 40000 -> 9000
	return f
}
