//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestPcapVerifyTcpdump captures real traffic with tcpdump -i any (Linux
// cooked SLL2 frames) in namespace B while the kernel in A sends pings and
// UDP with transmit checksum offload off, then runs `pcap verify` on the
// capture: every frame must verify ok.
func TestPcapVerifyTcpdump(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	netnstest.RequireTool(t, "tcpdump")
	netnstest.RequireTool(t, "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := pair.A.Command(ctx, "ethtool", "-K", pair.A.Link, "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K %s tx off: %v\n%s", pair.A.Link, err, out)
	}
	path := filepath.Join(t.TempDir(), "any.pcap")
	// -Q in: B's own transmissions leave with offloaded (partial)
	// checksums, as on any sender; capture what B receives.
	dump := pair.B.Command(ctx, "tcpdump", "-i", "any", "-Q", "in", "-n", "--immediate-mode", "-U", "-c", "200", "-w", path,
		"src", "host", pair.A.IPv4.String(), "or", "src", "host", pair.A.IPv6.String())
	stderr, err := dump.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.Start(); err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	defer dump.Process.Kill()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "listening on") {
	}
	go func() {
		for sc.Scan() {
		}
	}()

	for _, dst := range []string{pair.B.IPv4.String(), pair.B.IPv6.String()} {
		if out, err := pair.A.Command(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "2", dst).CombinedOutput(); err != nil {
			t.Fatalf("ping %s: %v\n%s", dst, err, out)
		}
	}
	err = pair.A.Do(func() error {
		// Unconnected, so B's port unreachable replies do not fail the
		// later writes.
		c, err := net.ListenPacket("udp", ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		for _, dst := range []string{pair.B.IPv4.String(), pair.B.IPv6.String()} {
			for _, n := range []int{1, 100, 1001} {
				if _, err := c.WriteTo(make([]byte, n), &net.UDPAddr{IP: net.ParseIP(dst), Port: 9}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	dump.Process.Signal(syscall.SIGINT)
	dump.Wait()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no capture written: %v", err)
	}

	out, _, err := runCLI(t, "--json", "pcap", "verify", path)
	if err != nil {
		t.Fatalf("pcap verify on tcpdump's capture: %v\n%s", err, out)
	}
	var doc struct {
		Frames  []verifyFrameJSON `json:"frames"`
		Summary verifySummary     `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// 6 echo requests and 6 UDP datagrams.
	if doc.Summary.OK < 12 || doc.Summary.UnsupportedLink != 0 {
		t.Fatalf("summary %+v, want ≥ 12 ok frames of a supported link type", doc.Summary)
	}
	t.Logf("tcpdump -i any capture: %+v", doc.Summary)
}
