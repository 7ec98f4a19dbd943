package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
)

// runCLI runs xdpio in-process and returns stdout, stderr and the error.
func runRSSHashCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := runWith(context.Background(), &globals{stdout: &out, stderr: &errb}, args)
	return out.String(), errb.String(), err
}

// msRow is one row of Microsoft's RSS verification suite, read from the
// rss package's copy (which cites the source: "Verifying the RSS Hash
// Calculation", also in Intel's 82599 datasheet 7.1.2.8.3).
type msRow struct {
	dst, dport, src, sport string
	l3, l4                 uint32
}

func readMSRows(t *testing.T) []msRow {
	t.Helper()
	f, err := os.Open("../../rss/testdata/microsoft_rss_vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []msRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		l3, err1 := strconv.ParseUint(fs[4], 0, 32)
		l4, err2 := strconv.ParseUint(fs[5], 0, 32)
		if len(fs) != 6 || err1 != nil || err2 != nil {
			t.Fatalf("bad vector line %q", sc.Text())
		}
		rows = append(rows, msRow{fs[0], fs[1], fs[2], fs[3], uint32(l3), uint32(l4)})
	}
	if len(rows) != 8 {
		t.Fatalf("%d vectors", len(rows))
	}
	return rows
}

func TestRSSHashMicrosoftVectors(t *testing.T) {
	for _, r := range readMSRows(t) {
		t.Run(r.src+">"+r.dst, func(t *testing.T) {
			out, _, err := runRSSHashCLI(t, "rss", "hash", "--src", r.src, "--dst", r.dst)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("hash:  0x%08x\n", r.l3); !strings.Contains(out, want) {
				t.Errorf("addresses only: output\n%s\nwant a line %q", out, want)
			}
			out, _, err = runRSSHashCLI(t, "rss", "hash", "--src", r.src, "--dst", r.dst, "--sport", r.sport, "--dport", r.dport, "--queues", "4")
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("hash:  0x%08x\n", r.l4); !strings.Contains(out, want) {
				t.Errorf("with ports: output\n%s\nwant a line %q", out, want)
			}
			// Equal table of 128 entries over 4 queues, low seven bits.
			if want := fmt.Sprintf("queue: %d (entry %d ", (r.l4&127)%4, r.l4&127); !strings.Contains(out, want) {
				t.Errorf("output\n%s\nwant %q", out, want)
			}

			out, _, err = runRSSHashCLI(t, "--json", "rss", "hash", "--src", r.src, "--dst", r.dst, "--sport", r.sport, "--dport", r.dport, "--queues", "3", "--key", colonKey(rss.DefaultKey())) // ethtool's colon form
			if err != nil {
				t.Fatal(err)
			}
			var j rssHashJSON
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatalf("%v in %s", err, out)
			}
			if j.HashValue != r.l4 || j.Hash != fmt.Sprintf("0x%08x", r.l4) || j.Queue == nil || *j.Queue != int((r.l4&127)%3) || j.TableSize != 128 || j.Queues != 3 {
				t.Errorf("json %s, want hash %#08x queue %d", out, r.l4, (r.l4&127)%3)
			}
		})
	}
}

// colonKey writes a key the way `ethtool -x` prints it: "6d:5a:…".
func colonKey(k []byte) string {
	s := make([]string, len(k))
	for i, b := range k {
		s[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(s, ":")
}

func TestRSSHashSymmetric(t *testing.T) {
	a, _, err := runRSSHashCLI(t, "--json", "rss", "hash", "--src", "198.18.0.1", "--dst", "198.19.0.9", "--sport", "40000", "--dport", "443", "--symmetric")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := runRSSHashCLI(t, "--json", "rss", "hash", "--src", "198.19.0.9", "--dst", "198.18.0.1", "--sport", "443", "--dport", "40000", "--symmetric=xor")
	if err != nil {
		t.Fatal(err)
	}
	var ja, jb rssHashJSON
	if json.Unmarshal([]byte(a), &ja) != nil || json.Unmarshal([]byte(b), &jb) != nil {
		t.Fatalf("bad json:\n%s\n%s", a, b)
	}
	if ja.Hash != jb.Hash || ja.Symmetric != "symmetric-xor" {
		t.Errorf("symmetric-xor: %s one way, %s the other (%s)", ja.Hash, jb.Hash, ja.Symmetric)
	}
	// The transformed input is what the kernel documents: addresses and
	// ports XORed, each twice.
	// c6120001^c6130009 and 0x9c40^0x01bb, each twice.
	if want := "00010008" + "00010008" + "9dfb" + "9dfb"; ja.Input != want {
		t.Errorf("input %s, want %s", ja.Input, want)
	}
}

func TestRSSHashUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--dst", "198.18.0.1"},
		{"--src", "198.18.0.1"},
		{"--src", "198.18.0.1", "--dst", "2001:db8::1"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.300"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "70000", "--dport", "1"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--key", "6d5a"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--key", "xyz0000000"},
		{"--src", "2001:db8::1", "--dst", "2001:db8::2", "--key", "6d5a56da255b0ec24167253d43a38fb0"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--queues", "0"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--queues", "4", "--table-size", "100"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--queues", "4", "--index", "crc"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "--symmetric=both"},
		{"--src", "198.18.0.1", "--dst", "198.18.0.2", "extra"},
	} {
		_, _, err := runRSSHashCLI(t, append([]string{"rss", "hash"}, args...)...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: error %v, want a usage error (exit 2)", args, err)
		}
	}
	// The error about a table the low bits cannot index says what to
	// give, in flags, not the library's option names.
	if _, _, err := runRSSHashCLI(t, "rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--queues", "4", "--table-size", "100"); err == nil ||
		!strings.Contains(err.Error(), "--index modulo") || strings.Contains(err.Error(), "IndexModulo") {
		t.Errorf("--table-size 100: %v, want it to point to --index modulo", err)
	}
	// Non-power-of-two tables work with the modulo rule.
	out, _, err := runRSSHashCLI(t, "rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--queues", "4", "--table-size", "100", "--index", "modulo")
	if err != nil || !strings.Contains(out, "% 100") {
		t.Errorf("modulo over 100 entries: %v\n%s", err, out)
	}
}

// TestRSSHashDev predicts with a device's own RSS configuration. The test
// network's veth has no RSS table: ethtool -x (the oracle) refuses it, and
// so must rss hash --dev, with exit status 1 and ErrNotSupported.
func TestRSSHashDev(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	ethtoolOut, ethtoolErr := pair.A.Command(context.Background(), "ethtool", "-x", pair.A.Link).CombinedOutput()
	_, _, err := runRSSHashCLI(t, "--netns", pair.A.NS, "rss", "hash", "--dev", pair.A.Link,
		"--src", pair.B.IPv4.String(), "--dst", pair.A.IPv4.String(), "--sport", "40000", "--dport", "5201")
	var ue *usageError
	if errors.As(err, &ue) {
		t.Fatalf("--dev on a device: usage error %v", err)
	}
	t.Logf("ethtool -x: %v\n%s\nrss hash --dev: %v", ethtoolErr, ethtoolOut, err)
	if ethtoolErr != nil || strings.Contains(string(ethtoolOut), "not supported") {
		if !errors.Is(err, nic.ErrNotSupported) {
			t.Fatalf("ethtool -x fails (%v: %s), rss hash --dev: %v; want ErrNotSupported", ethtoolErr, ethtoolOut, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("ethtool -x works:\n%s\nrss hash --dev: %v", ethtoolOut, err)
	}
}

func TestRSSHashDevUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--dev", "x0", "--queues", "4"},
		{"--dev", "x0", "--table-size", "64"},
		{"--context", "1"},
	} {
		_, _, err := runRSSHashCLI(t, append([]string{"rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2"}, args...)...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: error %v, want a usage error", args, err)
		}
	}
}
