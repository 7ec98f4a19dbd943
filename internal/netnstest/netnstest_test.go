package netnstest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

func TestPairPing(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{Queues: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, dst := range []string{p.B.IPv4.String(), p.B.IPv6.String()} {
		out, err := p.A.Command(ctx, "ping", "-c", "1", "-W", "2", dst).CombinedOutput()
		if err != nil {
			t.Fatalf("ping %s from %s: %v\n%s", dst, p.A.NS, err, out)
		}
	}
	// Queue counts are visible in sysfs inside the namespace.
	err := p.B.Do(func() error {
		h, err := p.B.Handle()
		if err != nil {
			return err
		}
		defer h.Close()
		l, err := h.LinkByIndex(p.B.Ifindex)
		if err != nil {
			return err
		}
		if got := l.Attrs().NumRxQueues; got != 4 {
			t.Errorf("veth-b has %d RX queues, want 4", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPairRemovedOnCleanup(t *testing.T) {
	var names []string
	t.Run("inner", func(t *testing.T) {
		p := netnstest.New(t, netnstest.Config{})
		names = []string{p.A.NS, p.B.NS}
	})
	for _, n := range names {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); !os.IsNotExist(err) {
			t.Errorf("namespace %s still exists after cleanup (stat err %v)", n, err)
		}
	}
}

// Counters reads the namespace's own SNMP counters: a ping from A raises
// B's Icmp InEchos by exactly one, and nothing in the root namespace.
func TestCounters(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{})
	before, err := p.B.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"UdpInCsumErrors", "IpExtInCsumErrors", "Udp6InCsumErrors", "TcpInSegs"} {
		if _, ok := before[k]; !ok {
			t.Errorf("no counter %s", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ping", "-c", "1", "-W", "2", p.B.IPv4.String()).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	after, err := p.B.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if d := after["IcmpInEchos"] - before["IcmpInEchos"]; d != 1 {
		t.Fatalf("B's IcmpInEchos rose by %d after one ping, want 1", d)
	}
}

// The pair's namespaces stay removable after `ip netns add` (iproute2)
// runs while they exist: iproute2 bind-mounts /run/netns over itself the
// first time, which would hide mounts made before it.
func TestPairSurvivesIPNetnsAdd(t *testing.T) {
	netnstest.RequireTool(t, "ip")
	p := netnstest.New(t, netnstest.Config{})
	// The pair made /run/netns a shared mount point of its own, so that
	// iproute2 has no reason to bind it again.
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	shared := false
	for _, l := range strings.Split(string(info), "\n") {
		if f := strings.Fields(l); len(f) > 6 && f[4] == "/run/netns" && strings.Contains(l, "shared:") {
			shared = true
		}
	}
	if !shared {
		t.Errorf("/run/netns is not a shared mount point after New:\n%s", info)
	}
	name := netnstest.Prefix + "iproute2-check"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	if err := p.Close(); err != nil {
		t.Fatalf("Close after ip netns add: %v", err)
	}
	for _, h := range []*netnstest.Host{p.A, p.B} {
		if _, err := os.Stat("/run/netns/" + h.NS); !os.IsNotExist(err) {
			t.Errorf("%s still in /run/netns after Close (%v)", h.NS, err)
		}
	}
}
