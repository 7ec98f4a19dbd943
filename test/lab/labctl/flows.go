package labctl

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/rss"
)

// Flows returns n distinct flows of protocol proto (ProtoTCP or ProtoUDP)
// towards the guest, IPv6 when v6: random source addresses in the lab's
// ranges (198.18.0.0/15, 2001:db8:1ab::/48), random source ports from
// 1024, destination ports from dport to dport+63.
func Flows(rng *rand.Rand, n int, proto uint8, v6 bool, dport uint16) []Flow {
	seen := map[Flow]bool{}
	out := make([]Flow, 0, n)
	for len(out) < n {
		f := Flow{Proto: proto, SPort: uint16(1024 + rng.IntN(60000)), DPort: dport + uint16(rng.IntN(64))}
		if v6 {
			var a [16]byte
			copy(a[:], PeerIP6.AsSlice()[:6])
			for i := 6; i < 16; i++ {
				a[i] = byte(rng.Uint32())
			}
			f.Src, f.Dst = netip.AddrFrom16(a), GuestIP6
		} else {
			x := rng.Uint32()
			f.Src = netip.AddrFrom4([4]byte{198, 18 + byte(x>>24&1), byte(x >> 8), byte(x)})
			f.Dst = GuestIP4
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// HashesPorts asks the real ethtool whether dev's RSS hash of flow type
// ft ("tcp4", "udp4", "tcp6", "udp6") covers the L4 ports
// (`ethtool -n DEV rx-flow-hash FT`, the ETHTOOL_GRXFH ioctl).
func HashesPorts(dev, ft string) (bool, error) {
	out, err := exec.Command("ethtool", "-n", dev, "rx-flow-hash", ft).CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("ethtool -n %s rx-flow-hash %s: %w: %s", dev, ft, err, out)
	}
	s := string(out)
	src := strings.Contains(s, "L4 bytes 0 & 1")
	dst := strings.Contains(s, "L4 bytes 2 & 3")
	if src != dst {
		return false, fmt.Errorf("ethtool -n %s rx-flow-hash %s: only one port hashed: %s", dev, ft, s)
	}
	return src, nil
}

// FlowKey returns the flow key dev's RSS hashes for f: with the ports
// when the real ethtool says the device hashes them for f's flow type
// (HashesPorts, asked once per flow type: ports caches the answers).
func FlowKey(tb testing.TB, dev string, f Flow, ports map[string]bool) rss.FlowKey {
	tb.Helper()
	ft := f.FlowType()
	p, ok := ports[ft]
	if !ok {
		var err error
		if p, err = HashesPorts(dev, ft); err != nil {
			tb.Fatal(err)
		}
		ports[ft] = p
	}
	return rss.FlowKey{Src: f.Src, Dst: f.Dst, SrcPort: f.SPort, DstPort: f.DPort, Proto: f.Proto, Ports: p}
}

// FlowType names the ethtool flow type of f ("tcp4", "udp6", …).
func (f Flow) FlowType() string {
	p := "udp"
	if f.Proto == ProtoTCP {
		p = "tcp"
	}
	if f.Src.Is4() {
		return p + "4"
	}
	return p + "6"
}

// Ethtool runs the real ethtool with args and returns its combined output.
func Ethtool(args ...string) (string, error) {
	out, err := exec.Command("ethtool", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ethtool %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
