package netnstest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

func TestNewPairPingAndClose(t *testing.T) {
	netnstest.RequirePriv(t)
	p, err := netnstest.NewPair(netnstest.Config{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ping", "-c", "1", "-W", "2", p.B.IPv4.String()).CombinedOutput(); err != nil {
		t.Fatalf("ping %s: %v\n%s", p.B.IPv4, err, out)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, n := range []string{p.A.NS, p.B.NS} {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); !os.IsNotExist(err) {
			t.Errorf("namespace %s still exists after Close (stat err %v)", n, err)
		}
	}
}
