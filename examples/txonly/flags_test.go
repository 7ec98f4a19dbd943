package main

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/examples/exutil"
	"github.com/xdpio/xdpio/examples/internal/flagtest"
)

// splitArgs turns a test's or the fuzzer's string into a command line:
// arguments separated by single spaces (two make an empty argument).
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

const base = "-i veth0 -dst 198.18.0.1 "

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args  string
		check func(o options) bool
	}{
		{base, func(o options) bool {
			return o.port == 9000 && o.size == 64 && o.flows == 16 && o.Batch == 64 && !o.src.IsValid() && o.dstMAC.String() == "ff:ff:ff:ff:ff:ff"
		}},
		{base + "-port 1 -size 42 -flows 1", func(o options) bool { return o.port == 1 && o.size == 42 && o.flows == 1 }},
		{base + "-port 65535 -size 4096 -flows 55536 -q 0", func(o options) bool { return o.port == 65535 && o.size == 4096 && o.flows == 55536 }},
		{base + "-q 4095 -flows 13", func(o options) bool { return o.flows == 13 }},
		{base + "-q 0-1 -flows 27768", func(o options) bool { return o.flows == 27768 }},
		{base + "-src 198.18.0.2 -dst-mac 02:00:00:00:00:01", func(o options) bool {
			return o.src == netip.MustParseAddr("198.18.0.2") && o.dstMAC.String() == "02:00:00:00:00:01"
		}},
		{"-i veth0 -dst ::ffff:198.18.0.1", func(o options) bool { return o.dst == netip.MustParseAddr("198.18.0.1") }},
		{"-i veth0 -dst 2001:db8::1 -src 2001:db8::2 -size 62", func(o options) bool { return o.dst.Is6() && o.size == 62 }},
		{base + "-frames 64 -batch 4096 -t 1s -copy", func(o options) bool { return o.Frames == 64 && o.Batch == 4096 && o.Copy }},
	} {
		t.Run(tc.args, func(t *testing.T) {
			o, err := parseFlags(splitArgs(strings.TrimSpace(tc.args)))
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if !tc.check(o) {
				t.Fatalf("parseFlags gave %+v", o)
			}
		})
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{base + "-port 70000", "-port 70000: must be 1-65535"},
		{base + "-port -1", "-port -1: must be 1-65535"},
		{base + "-port 0", "-port 0: must be 1-65535"},
		{base + "-flows 0", "-flows 0: must be 1-55536"},
		{base + "-flows -1", "-flows -1: must be 1-55536"},
		{base + "-flows 55537", "-flows 55537: must be 1-55536"},
		{base + "-q 4095 -flows 14", "-flows 14: must be 1-13 with queues up to 4095"},
		{base + "-q 0,3 -flows 13885", "-flows 13885: must be 1-13884 with queues up to 3"},
		{base + "-batch 0", "-batch 0: must be 1-4096"},
		{base + "-batch -5", "-batch -5"},
		{base + "-batch 100000", "-batch 100000"},
		{base + "-t -1s", "-t -1s: must not be negative"},
		{"-i veth0 foo -t 1s", `unexpected argument "foo": every option is a -flag`},
		{base + "foo -t 1s", `unexpected argument "foo"`},
		{base + "-size 9000", "-size 9000: must be 42-4096 bytes"},
		{base + "-size 4097", "-size 4097"},
		{base + "-size 41", "-size 41: must be 42-4096"},
		{"-i veth0 -dst 2001:db8::1 -size 61", "-size 61: must be 62-4096 bytes: at least the Ethernet, IPv6"},
		{base + "-frames 8", "-frames 8"},
		{base + "-skb", "-skb"},
		{base + "-nap 30us", "-nap"},
		{"-i veth0", "-dst ADDR is required"},
		{"-dst 198.18.0.1", "-i IFACE is required"},
		{"-i veth0 -dst 198.18.0.256", "-dst"},
		{base + "-src 2001:db8::2", "-src 2001:db8::2 and -dst 198.18.0.1: not of the same address family"},
		{base + "-src nonsense", "-src"},
		{base + "-dst-mac 02:00:00:00:00", "-dst-mac"},
		{base + "-dst-mac 02:00:00:00:00:00:00:01", "-dst-mac 02:00:00:00:00:00:00:01: a 8-byte address"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err := parseFlags(splitArgs(tc.args))
			var ue *exutil.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseFlags: %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want it to say %q", err, tc.want)
			}
			if !strings.HasPrefix(ue.Usage, "usage: txonly -i IFACE -dst ADDR") || strings.Contains(ue.Usage, "-skb") {
				t.Errorf("usage text %q", ue.Usage)
			}
		})
	}
}

// checkSize with the interface's MTU: the frame must fit the MTU plus the
// Ethernet header, and a UMEM frame.
func TestCheckSize(t *testing.T) {
	for _, tc := range []struct {
		size int
		v6   bool
		mtu  int
		want string // "" accepted
	}{
		{1514, false, 1500, ""},
		{1515, false, 1500, "-size 1515: must be 42-1514 bytes on veth0: at least the Ethernet, IPv4 and UDP headers, at most what its MTU 1500 lets through (1514 with the 14-byte Ethernet header) and what a UMEM frame holds (4096)"},
		{9000, false, 9000, "-size 9000: must be 42-4096 bytes on veth0"},
		{4096, false, 9000, ""},
		{4096, false, 65536, ""},
		{4097, false, 65536, "MTU 65536"},
		{42, false, 68, ""},
		{82, false, 68, ""}, // 68 + 14: fits exactly
		{83, false, 68, "-size 83: must be 42-82 bytes on veth0"},
		{61, true, 1500, "-size 61: must be 62-1514 bytes on veth0: at least the Ethernet, IPv6"},
		{62, true, 1280, ""},
		{1295, true, 1280, "MTU 1280"},
		{9000, false, 0, "-size 9000: must be 42-4096 bytes: at least"}, // MTU unknown: the frame alone
	} {
		err := checkSize(tc.size, tc.v6, "veth0", tc.mtu)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkSize(%d, v6 %v, MTU %d) = %v, want %q", tc.size, tc.v6, tc.mtu, err, tc.want)
		}
	}
}

// checkFlows against the number of queues -q all finds: the highest
// queue's last source port is 65535 at most.
func TestCheckFlows(t *testing.T) {
	for _, tc := range []struct {
		flows, maxQueue int
		ok              bool
	}{
		{16, 0, true}, {16, 3470, true}, {16, 3471, false}, {13, 4095, true}, {14, 4095, false},
		{55536, 0, true}, {55537, 0, false}, {0, 0, false}, {-1, 7, false}, {1, 4095, true},
	} {
		err := checkFlows(tc.flows, tc.maxQueue)
		if (err == nil) != tc.ok {
			t.Errorf("checkFlows(%d, %d) = %v, want ok %v", tc.flows, tc.maxQueue, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "-flows") {
			t.Errorf("checkFlows(%d, %d) = %q: does not name -flows", tc.flows, tc.maxQueue, err)
		}
		if last := basePort + tc.maxQueue*tc.flows + tc.flows - 1; err == nil && last > 65535 {
			t.Errorf("checkFlows(%d, %d) accepted a last source port of %d", tc.flows, tc.maxQueue, last)
		}
	}
}

// FuzzParseFlags: any command line is options within their documented
// ranges, each the value the command line gave, that build the frame they
// describe, or a usage error; never a panic, never a flag silently ignored
// after a stray argument, never a source port that wraps around.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{
		base + "-port 9000", base + "-port 70000", base + "-port -1", base + "-port 0",
		base + "-flows 0", base + "-flows -1", base + "-flows 55536", base + "-q 4095 -flows 13", base + "-q 4095 -flows 14",
		base + "-batch 0", base + "-batch -5", base + "-batch 100000", base + "-t -1s", "-i veth0 foo -t 1s",
		base + "-size 9000", base + "-size 4096", base + "-size 41", "-i veth0 -dst 2001:db8::1 -size 61",
		"-i veth0 -dst 2001:db8::1 -src 198.18.0.2", base + "-dst-mac 02:00:00:00:00:00:00:01", base + "-skb",
		"-i veth0 -dst fe80::1%veth0", "-i veth0 -dst ::ffff:198.18.0.1 -src 198.18.0.2", "-h", "", base,
	} {
		f.Add(strings.TrimSpace(s))
	}
	srcMAC := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	f.Fuzz(func(t *testing.T, line string) {
		args := splitArgs(line)
		o, err := parseFlags(args)
		if err != nil {
			var ue *exutil.UsageError
			if !errors.As(err, &ue) || !strings.HasPrefix(ue.Usage, "usage: txonly") {
				t.Fatalf("parseFlags(%q): %v is not a usage error with the usage", args, err)
			}
			return
		}
		given, rest, err := flagtest.Given(flagSet(new(options)), args)
		if err != nil || len(rest) > 0 {
			t.Fatalf("parseFlags(%q) accepted what reads as %v, arguments %q left over", args, err, rest)
		}
		if err := flagtest.CheckGiven(&o.Flags, given); err != nil {
			t.Fatalf("parseFlags(%q): %v", args, err)
		}
		if o.Iface == "" || !o.dst.IsValid() || len(o.dstMAC) != 6 || o.src.IsValid() && o.src.Is4() != o.dst.Is4() {
			t.Fatalf("parseFlags(%q): -i %q -dst %v -src %v -dst-mac %v", args, o.Iface, o.dst, o.src, o.dstMAC)
		}
		if want, err := netip.ParseAddr(given["dst"]); err != nil || want.Unmap().WithZone("") != o.dst {
			t.Fatalf("parseFlags(%q): -dst %q gave %v", args, given["dst"], o.dst)
		}
		port, err := flagtest.GivenInt(given, "port", 9000)
		if err != nil || o.port != port || port < 1 || port > 65535 {
			t.Fatalf("parseFlags(%q): -port %q gave %d", args, given["port"], o.port)
		}
		flows, err := flagtest.GivenInt(given, "flows", 16)
		if err != nil || o.flows != flows || flows < 1 || flows > portSpace {
			t.Fatalf("parseFlags(%q): -flows %q gave %d", args, given["flows"], o.flows)
		}
		size, err := flagtest.GivenInt(given, "size", 64)
		lo := 14 + 20 + 8
		if o.dst.Is6() {
			lo = 14 + 40 + 8
		}
		if err != nil || o.size != size || size < lo || size > frameRoom {
			t.Fatalf("parseFlags(%q): -size %q gave %d", args, given["size"], o.size)
		}
		// The frame is what the flags say, and no queue's source port
		// wraps around (txonly's templates: old + uint16(queue*flows+i)).
		maxQueue := 0
		if qs, _ := exutil.ParseQueues(o.Queues); qs != nil {
			maxQueue = slices.Max(qs)
		}
		if last := basePort + maxQueue*o.flows + o.flows - 1; last > 65535 || int(uint16(basePort)+uint16(maxQueue*o.flows+o.flows-1)) != last {
			t.Fatalf("parseFlags(%q): -flows %d on queue %d reaches source port %d", args, o.flows, maxQueue, last)
		}
		src := o.src
		if !src.IsValid() {
			src = netip.MustParseAddr("198.18.0.2")
			if o.dst.Is6() {
				src = netip.MustParseAddr("2001:db8::2")
			}
		}
		frame, err := BuildUDP(srcMAC, o.dstMAC, src, o.dst, basePort, uint16(o.port), o.size)
		if err != nil {
			t.Fatalf("parseFlags(%q) accepted, BuildUDP fails: %v", args, err)
		}
		l4 := lo - 8
		if len(frame) != size || int(binary.BigEndian.Uint16(frame[l4+2:])) != port || string(frame[:6]) != string(o.dstMAC) {
			t.Fatalf("parseFlags(%q): frame of %d bytes to port %d, MAC %x", args, len(frame), binary.BigEndian.Uint16(frame[l4+2:]), frame[:6])
		}
		// On an interface of any MTU, the frame is accepted exactly when it
		// fits MTU + 14.
		for _, mtu := range []int{68, 1280, 1500, 9000} {
			if err := checkSize(o.size, o.dst.Is6(), "veth0", mtu); (err == nil) != (o.size <= mtu+14) {
				t.Fatalf("checkSize(%d, MTU %d) = %v", o.size, mtu, err)
			}
		}
	})
}

// -h prints the usage and exits 0, a bad flag exits 2, as in every example.
func TestHelp(t *testing.T) { flagtest.CheckHelp(t, "txonly", run) }
