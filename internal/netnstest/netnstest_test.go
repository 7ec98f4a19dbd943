package netnstest_test

import (
	"context"
	"os"
	"path/filepath"
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
