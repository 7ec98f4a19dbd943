package offload

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// tsharkStatus runs tshark with checksum validation on over a capture and
// returns, per frame, its IPv4 header and transport checksum status ("1"
// good, "0" bad, "" not judged).
func tsharkStatus(t *testing.T, path string) (l3, l4 []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tshark", "-n", "-r", path,
		"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-o", "udplite.check_checksum:TRUE", "-o", "udplite.ignore_checksum_coverage:FALSE",
		"-T", "fields", "-E", "separator=|",
		"-e", "frame.number", "-e", "ip.checksum.status", "-e", "tcp.checksum.status",
		"-e", "udp.checksum.status", "-e", "icmp.checksum.status", "-e", "icmpv6.checksum.status")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 6 {
			t.Fatalf("tshark line %q", line)
		}
		if n, _ := strconv.Atoi(f[0]); n != len(l3)+1 {
			t.Fatalf("tshark frame numbers out of step at %q", line)
		}
		// Tunnels or ICMP errors can carry several values; the first is
		// the outer header's.
		first := func(s string) string { v, _, _ := strings.Cut(s, ","); return v }
		l3 = append(l3, first(f[1]))
		l4 = append(l4, first(f[2]+f[3]+f[4]+f[5]))
	}
	return l3, l4
}

// TestFillVerifyTshark writes frames to a pcap — filled by FillChecksum,
// some then corrupted — and has tshark, with checksum validation on, judge
// every IPv4 header and TCP/UDP/UDP-Lite/ICMP/ICMPv6 checksum: its verdict
// must match VerifyRX's, and filled frames must have no bad checksum.
func TestFillVerifyTshark(t *testing.T) {
	netnstest.RequireTool(t, "tshark")
	rng := rand.New(rand.NewPCG(51, 52))
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	const n = 800
	var results []RXResult
	for i := 0; i < n; i++ {
		o := randomOpts(rng, true)
		o.payload %= 3000
		fr := buildFrame(rng, o)
		if _, err := FillChecksum(fr); err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 1: // corrupt the transport segment
			lo, _ := Parse(fr)
			fr[lo.L4+rng.IntN(lo.End-lo.L4)] ^= byte(1 + rng.IntN(255))
		case 2: // corrupt the IP source address (IPv4 header and pseudo-header)
			lo, _ := Parse(fr)
			src := lo.L3 + 12
			if lo.IPv6 {
				src = lo.L3 + 8
			}
			fr[src+rng.IntN(4)] ^= 0x10
		}
		results = append(results, VerifyRX(fr))
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1000), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l3, l4 := tsharkStatus(t, path)
	if len(l3) != n {
		t.Fatalf("tshark read %d frames, want %d", len(l3), n)
	}
	judged := map[string]int{}
	for i, r := range results {
		if r.Malformed() {
			continue // a corrupted length field; tshark flags those differently
		}
		if l3[i] != "" {
			judged["l3-"+l3[i]]++
			if want := map[bool]string{true: "1", false: "0"}[r.L3 == VerdictOK]; l3[i] != want {
				t.Errorf("frame %d: IPv4 header %v, tshark status %s", i+1, r.L3, l3[i])
			}
		}
		if l4[i] != "" {
			judged["l4-"+l4[i]]++
			if want := map[bool]string{true: "1", false: "0"}[r.L4 == VerdictOK]; l4[i] != want {
				t.Errorf("frame %d: %v, tshark transport status %s", i+1, r, l4[i])
			}
		}
		if i%4 == 0 && (r.Bad() || l3[i] == "0" || l4[i] == "0") {
			t.Errorf("frame %d filled but judged bad: %v, tshark %q/%q", i+1, r, l3[i], l4[i])
		}
	}
	t.Logf("tshark judged: %v", judged)
	for _, k := range []string{"l3-1", "l3-0", "l4-1", "l4-0"} {
		if judged[k] < 50 {
			t.Errorf("tshark judged only %d frames %s: the comparison means little", judged[k], k)
		}
	}
}
