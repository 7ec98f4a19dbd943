//go:build linux

package filter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/filter"
	"github.com/xdpio/xdpio/internal/capset"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/net/bpf"
)

// generatedExprs is the set the refusal oracle runs: the edges of every
// rule where tcpdump (libpcap) refuses an expression — shift amounts,
// divisors, port and VLAN ranges, prefix lengths, masks, protocol numbers
// and names, load offsets and sizes, number syntax, qualifier
// combinations, bare ids, nesting — and a seeded mix of valid and broken
// pieces joined by and, or, not and parentheses.
func generatedExprs() []string {
	var es []string
	add := func(format string, a ...any) { es = append(es, fmt.Sprintf(format, a...)) }
	addAll := func(list ...string) { es = append(es, list...) }

	// Shifts: libpcap refuses a right operand whose code starts with a
	// number above 31, and one its optimizer finds constant above 31
	// while the left operand is not.
	for n := 0; n <= 40; n++ {
		add("len >> %d = 1", n)
		add("len << %d = 0", n)
		add("ip[0] >> %d = 0", n)
		add("udp or 1 >> %d = 0", n)
		add("len >> (0 + %d) = 1", n)
		add("len >> (%d + len) = 1", n)
		add("udp or 1 << (%d - 0) = 0", n)
		add("len >> ip[%d] = 1", n)
		add("len >> -%d = 1", n)
		add("len >> 0x%x = 1", n)
		add("len >> 0%o = 1", n)
	}
	// Division and modulo: the same two rules for zero.
	for _, d := range []string{
		"0", "1", "(0)", "-0", "00", "0x0", "(1 - 1)", "(len * 0)", "(0 * len)", "(len & 0)", "(0 & len)",
		"(0 + len)", "(len + 0)", "(len - len)", "(0 - len)", "ip[0]", "ip[1]", "tcp-fin", "icmp-echoreply",
		"icmptype", "(2-2)", "(4 >> 3)", "(1 << 32)", "(len >> 40)", "(0 / len)", "ip[0:2] * 0", "(len << 0)",
	} {
		for _, op := range []string{"/", "%"} {
			add("len %s %s = 1", op, d)
			add("5 %s %s = 1", op, d)
		}
	}
	addAll("len"+strings.Repeat(" + ip[0]", 19)+" > 1", "len"+strings.Repeat(" + ip[0]", 17)+" = ip[0] + (ip[0] + (ip[0] + ip[0]))",
		"len = "+strings.Repeat("(ip[0] + ", 15)+"1"+strings.Repeat(")", 15), "len = "+strings.Repeat("(ip[0] + ", 16)+"1"+strings.Repeat(")", 16),
		"len >> (len - len) = 42", "len = 1 / 0", "ip[len / 0] = 1", "ip[0] / (ip[1] - ip[1]) = 1", "len - ip[1] > 0", "len >> ip[1] = 1",
		"5 / ip[1] = 1", "ip[0] + tcp[0] = 1", "ip[0] - -ip[1] = 2")

	// Constant relations: libpcap folds them, and refuses a filter that
	// then rejects every packet.
	addAll("0 = 1", "1 = 1", "not 1 = 1", "udp and 0 = 1", "udp or 0 = 1", "len * 0 = 1", "len * 0 = 0",
		"0 * len = 1", "1 > 2", "2 > 1", "1 != 1", "-1 = 0xffffffff", "1 - 2 < 0", "(1) = 1", "((1)) = 1",
		"udp and not udp", "not ip and ip[0] = 1", "tcp and udp", "ip and ip6", "len < 0", "len >= 0",
		"not (1 = 1) or udp", "(0 = 1) and udp", "(0 = 1) or (1 = 2)", "ip[0] * 0 = 1", "4 / 2 = 2",
		"ip[0] = 1 and 0 = 1", "vlan and 2 > 3", "not (udp or 1 = 1)", "1 >> 40 = 0", "1 >> (20 + 20) = 0",
		"1 = 1 or len % (len * 0) = 1", "1 = 1 or len % 0 = 1")

	// Numbers: decimal, hex, octal, too big, malformed, negative.
	for _, v := range []string{
		"0", "1", "4294967295", "4294967296", "99999999999", "0x0", "0xffffffff", "0x100000000", "0X10", "0x",
		"010", "08", "0777", "09", "00", "-1", "- 1", "--1", "1e3", "1.5", "0b101", "tcp-syn", "icmp-echo",
		"icmp6-routerrenum", "123456789012",
	} {
		add("len = %s", v)
		add("ip[%s] = 1", v)
	}

	// Load offsets and sizes.
	for _, off := range []string{"0", "1500", "65535", "65536", "70000", "0xffffffff", "4294967296", "-1", "len", "ip[0]"} {
		for _, proto := range []string{"ether", "ip", "ip6", "tcp", "udp", "icmp", "arp"} {
			add("%s[%s] = 0", proto, off)
		}
	}
	for _, size := range []string{"0", "1", "2", "3", "4", "5", "8", "-1", "0x2", "02", "2:2", "", "len", "tcp-push"} {
		add("ip[0:%s] = 1", size)
		add("ether[12:%s] = 1", size)
	}
	for _, proto := range []string{"link", "ppp", "slip", "radio", "pim", "vrrp", "igrp", "carp", "ah", "esp",
		"sctp", "igmp", "icmp6", "rarp", "tr", "fddi", "wlan"} {
		add("%s[0] = 1", proto)
	}

	// Relations.
	for _, op := range []string{"=", "==", "!=", "<", "<=", ">", ">=", "=<", "=>", "<>", "!", "==="} {
		add("len %s 60", op)
	}
	addAll("len > 70000", "len = 4294967295", "len", "len =", "= 1", "len = = 1", "len 1", "1 len = 1",
		"len = len", "len + = 1", "len + 1", "(len) = 1", "(len = 1)", "((len) + 1 = 2)", "(len + 1) * 2 = 4",
		"(udp) = 1", "- len = 1", "-(len) = 1", "len = (1)", "len = -(1)", "len - - 1 = 1", "len & & 1 = 1",
		"len && 1 = 1", "len || 1 = 1", "ip[0] & 1 != 0 and", "ip[0]", "ip[0] ip[1] = 1", "ip [0] = 1",
		"ip[ 0 ] = 1", "ip[0 : 2] = 1", "ip[(0)] = 1", "ip[0]] = 1", "ip[[0]] = 1", "ip[0 = 1", "ip 0] = 1",
		"tcp[tcpflags] & tcp-syn != 0", "tcp[13] & (tcp-syn|tcp-ack) = 0x12", "icmp[icmptype] = icmp-echo",
		"icmp6[icmp6type] = icmp6-echo", "tcp[tcpflags] = tcpflags", "len = icmptype", "len = tcp-bogus",
		"length > 100", "less 64", "greater 64", "less", "greater", "less -1", "greater 70000", "less 0x40",
		"less 064", "greater 4294967296", "less len", "less 1 = 1", "less tcp-syn")

	// Ports and port ranges, numbers and names.
	for _, p := range []string{
		"0", "1", "53", "65535", "65536", "70000", "4294967295", "4294967296", "-1", "0x50", "0120", "08",
		"0xffff", "0x10000", "http", "domain", "www", "ntp", "snmp", "https", "syslog", "nosuchservice",
		"tcp", "1.5", "", "tcp-syn", "020000000001",
	} {
		add("port %s", p)
	}
	for _, q := range []string{"port", "src port", "dst port", "tcp port", "udp dst port", "sctp port",
		"icmp port", "ip port", "ip6 port", "arp port", "ether port", "src or dst port", "src and dst port"} {
		add("%s 53", q)
	}
	for _, e := range []string{"tcp port http", "udp port http", "sctp port http", "tcp port domain", "udp port ntp",
		"tcp port ntp", "udp port www", "port http or 53", "port ntp or http"} {
		add("%s", e)
	}
	for _, r := range []string{
		"1-1024", "1024-1", "0-65535", "1-65536", "65536-70000", "53-53", "1-", "-5", "1-2-3", "http-https",
		"0x10-0x20", "010-020", "a-b", "1--2", "domain-80", "80-http", "http-ssh", "0-0", "65535-65535",
		"1 - 2", "1-0x10000", "53", "0x35", "http", "1-08",
	} {
		add("portrange %s", r)
	}
	for _, q := range []string{"tcp portrange", "udp src portrange", "icmp portrange", "ip portrange", "ip6 portrange", "ether portrange"} {
		add("%s 1-2", q)
	}
	addAll("udp portrange http-https", "tcp portrange http-ssh", "udp portrange ntp-snmp")

	// Bare ids take the qualifiers of the primitive before them.
	addAll("port 53 or 80", "port 53 or (80)", "(port 53) or 80", "port 53 or 80 or 0x10000", "port 53 and 80",
		"port 53 or 198.18.0.1", "host 198.18.0.1 or 80", "port 53 or not 80", "80", "10.1.2.3", "udp or 80",
		"len = 1 or 80", "(udp) or 80", "port 53 or (udp) or 80", "not port 53 or 80", "port 53 and not 80",
		"port 53 or (80 or 81)", "port 53 or (80 and udp)", "port 53 or (udp or 80)", "port 53 or ((80))",
		"port 53 or (not 80)", "port 53 or not (80)", "(80) = 80", "port 53 or (80) = 80", "port 53 or 80 = 80",
		"ip proto 6 or 17", "proto 6 or 17", "ether proto \\ip or \\arp", "host 198.18.0.1 or 198.18.0.2",
		"src 198.18.0.1 or 198.18.0.2", "net 10 or 198.18", "vlan 100 or 200", "port 53 or http",
		"host 198.18.0.1 or http", "tcp src 53", "tcp 53", "port 53 or vlan or 80", "less 60 or 80")

	// Networks, prefixes and masks.
	for _, n := range []string{
		"10", "10.1", "10.1.2", "10.1.2.3", "10/8", "10.0.0.0/8", "10.0.0.0/33", "10.0.0.0/32", "10.0.0.0/0",
		"10.1.2.3/8", "10.0.0.0/-1", "10.0.0.0/08", "10.0.0.0/0x8", "10.0.0.0/010", "10.0.0.0/", "10.0.0.0 / 8",
		"2001:db8::/32", "2001:db8::/128", "2001:db8::/129", "2001:db8::1/32", "::/0", "256.1.1.1",
		"1.2.3.4.5", "010.1.1.1", "010.1", "010", "0", "256", "0x0a", "10.256", "198.18/15", "198.18.0.0/15",
		"10.0.0.0 mask 255.0.0.0", "10.0.0.0 mask 255.0.255.0", "10.0.0.0 mask 255.255.255.256",
		"10.1.0.0 mask 255.0.0.0", "10.0.0.0 mask 0.0.0.0", "10 mask 255.0.0.0", "2001:db8:: mask ffff::",
		"10.0.0.0 mask", "10.0.0.0/8 mask 255.0.0.0", "10.0.0.0 mask 8", "10.1 mask 255.255", "corp",
	} {
		add("net %s", n)
	}
	for _, q := range []string{"net", "src net", "ip net", "ip6 net", "arp net", "rarp net", "tcp net", "ether net", "link net"} {
		add("%s 10.0.0.0/8", q)
		add("%s 2001:db8::/32", q)
	}

	// Hosts and MAC addresses.
	for _, h := range []string{
		"198.18.0.1", "2001:db8::1", "::ffff:198.18.0.1", "02:00:00:00:00:01", "2:0:0:0:0:1", "0200.0000.0001",
		"02-00-00-00-00-01", "02.00.00.00.00.01", "020000000001", "02:00-00:00:00:01", "02:00:00:00:00",
		"02:00:00:00:00:01:02", "256.0.0.1", "1.2.3", "10", "010.1.1.1", "198.18.0.1/32", "localhost",
		"no-such-host.invalid", "2001:db8::g", "0x0a000001", "fe80::1%eth0",
	} {
		add("host %s", h)
		add("ether host %s", h)
	}
	for _, q := range []string{"host", "src host", "dst host", "ip host", "ip6 host", "arp host", "rarp host",
		"ether host", "ether src", "ether dst", "tcp host", "udp src host", "icmp host", "sctp host",
		"src or dst host", "src and dst host", "dst or src host", "ip src", "ip6 dst", "ether src host",
		"link host", "ppp src", "wlan dst host", "fddi host"} {
		add("%s 198.18.0.1", q)
		add("%s 2001:db8::1", q)
		add("%s 02:00:00:00:00:01", q)
	}

	// Protocols by number and name.
	for _, v := range []string{"0", "1", "6", "17", "58", "255", "256", "0x11", "\\tcp", "\\udp", "\\icmp",
		"\\icmp6", "\\ipv6-icmp", "\\igmp", "\\sctp", "\\ah", "\\esp", "\\ip", "\\ip6", "\\arp", "\\rarp",
		"\\pim", "\\vrrp", "\\gre", "gre", "ospf", "\\foo", "tcp", "ip", "65535", "65536", "0x86dd", "1500",
		"1501", "-1", "08", "\\decnet", "\\atalk", "\\loopback"} {
		for _, q := range []string{"proto", "ip proto", "ip6 proto", "ether proto", "tcp proto", "arp proto", "src proto"} {
			add("%s %s", q, v)
		}
	}

	// Protocol names alone and with qualifiers that do or do not fit.
	for _, p := range []string{"ether", "ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp", "icmp", "icmp6",
		"igmp", "ah", "esp", "link", "vlan", "ppp", "pim", "vrrp", "carp", "igrp"} {
		add("%s", p)
		add("%s broadcast", p)
		add("%s multicast", p)
		add("%s src 198.18.0.1", p)
		add("%s and %s", p, p)
	}
	addAll("broadcast", "multicast", "src broadcast", "ether src broadcast", "ip6 broadcast",
		"src", "dst", "host", "net", "portrange", "src and dst", "src or dst 198.18.0.1", "src and dst 198.18.0.1",
		"dst src host 198.18.0.1", "src host src host 198.18.0.1", "ip ip6 host ::1", "tcp udp", "tcp src",
		"tcp src 53")

	// VLAN IDs.
	for _, v := range []string{"0", "1", "4095", "4096", "0xfff", "0x1000", "07777", "-1", "100 200", "and",
		"tcp", "1.5", "tcp-syn"} {
		add("vlan %s", v)
	}
	addAll("vlan 100 and vlan 200 and udp", "udp or vlan")

	// Boolean syntax.
	addAll("and", "or", "not", "!", "udp and", "and udp", "udp or", "not not", "udp not tcp", "udp udp",
		"()", "(udp", "udp)", "((udp)", "(udp))", "( )", "(not udp)", "not (udp)", "! ! udp", "udp && ! tcp",
		"udp &&& tcp", "udp || || tcp", "udp & tcp", "udp | tcp", "udp, tcp", "udp;", "'udp'", "\"udp\"",
		"UDP", "Udp", "TCP port 80", "udp AND tcp", "udp and and tcp", "not and udp", "udp and not",
		"(udp and) tcp", "(udp) (tcp)", "(udp)tcp", "udp(tcp)", "[udp]", "{udp}", "udp\tand\ntcp", "udp é")

	// Nesting: tcpdump's parser takes up to almost 10000 levels,
	// this compiler MaxDepth.
	for _, n := range []int{filter.MaxDepth, filter.MaxDepth + 1} {
		es = append(es, strings.Repeat("(", n)+"udp"+strings.Repeat(")", n))
		es = append(es, strings.Repeat("not ", n)+"udp")
		es = append(es, "len = "+strings.Repeat("-", n)+"1")
	}

	// Constructs tcpdump accepts on Ethernet that this compiler does
	// not implement.
	addAll("ip protochain 6", "gateway 198.18.0.1", "mpls", "mpls 5 and udp", "pppoes", "pppoed", "geneve",
		"inbound", "outbound", "llc", "stp", "ipx", "decnet", "atalk", "ip broadcast", "ether proto 100",
		"iso", "netbeui", "lat", "aarp", "moprc")

	// A seeded mix of pieces, valid and refused, at random. No piece
	// divides by a zero only libpcap's optimizer finds: after a constant
	// comparison it may skip such code as unreachable (see
	// tcpdumpDifferences).
	pieces := []string{
		"udp", "tcp", "ip", "ip6", "arp", "icmp", "port 53", "src port 4789", "dst host 198.18.0.2",
		"net 198.18.0.0/15", "host 2001:db8::1", "portrange 1-1024", "vlan 100", "len > 100", "ip[8] = 64",
		"tcp[tcpflags] & tcp-syn != 0", "ether broadcast", "ip proto 17", "less 64", "greater 500",
		"len >> 33 = 0", "len / 0 = 1", "port 70000", "net 10.0.0.0/33", "ip[0:3] = 1", "vlan 4096",
		"ip proto 256", "icmp port 80", "len >> ip[40] = 1", "1 = 1", "0 = 1", "80", "port http",
		"len - ip[1] > 0",
	}
	rng := uint64(0x9e3779b97f4a7c15)
	intn := func(n int) int { // xorshift64*, fixed here so the set never changes
		rng ^= rng >> 12
		rng ^= rng << 25
		rng ^= rng >> 27
		return int((rng * 2685821657736338717) >> 33 % uint64(n))
	}
	var mix func(depth int) string
	mix = func(depth int) string {
		if depth == 0 || intn(3) == 0 {
			return pieces[intn(len(pieces))]
		}
		switch intn(4) {
		case 0:
			return "not " + mix(depth-1)
		case 1:
			return "(" + mix(depth-1) + ")"
		case 2:
			return mix(depth-1) + " and " + mix(depth-1)
		}
		return mix(depth-1) + " or " + mix(depth-1)
	}
	for range 300 {
		es = append(es, mix(4))
	}
	return es
}

// A difference from tcpdump this compiler makes on purpose.
type difference struct {
	// weRefuse: Compile refuses what tcpdump compiles; otherwise the
	// other way round.
	weRefuse bool
	// unsupported: Compile's refusal is an *Error wrapping
	// ErrUnsupportedConstruct.
	unsupported bool
	reason      string
	exprs       []string
}

// tcpdumpDifferences lists every expression of the generated set on which
// Compile and tcpdump differ, and why. Besides these, any expression
// tcpdump refuses with "expression rejects all packets" may compile when
// tcpdump -O (no optimizer) compiles it and Compile's program matches no
// frame of the set: which filters libpcap's optimizer proves empty depends
// on how far it gets (it refuses len * 0 = 1 but not ip[0] * 0 = 1), so
// Compile refuses only those whose comparisons are between numbers.
var tcpdumpDifferences = []difference{
	{weRefuse: true, unsupported: true, reason: "host names need name resolution, which the compiler does not do",
		exprs: []string{"host localhost"}},
	{weRefuse: true, unsupported: true, reason: "libpcap reads a host given as one number or an abbreviated address " +
		"(host 10 is 0.0.0.10, host 1.2.3 the network 1.2.3.0/24), rarely what was meant: refused, naming what libpcap does",
		exprs: []string{"host 1.2.3", "host 10", "host 0x0a000001", "host 198.18.0.1 or 80"}},
	{weRefuse: true, unsupported: true, reason: "libpcap reads only the leading numbers of a port range (1-0x10000 is 0-1 to it)",
		exprs: []string{"portrange 1-2-3", "portrange 1-0x10000"}},
	{weRefuse: true, unsupported: true, reason: "loads relative to pim, vrrp, igrp and carp are not implemented (their protocol names alone are)",
		exprs: []string{"pim[0] = 1", "vrrp[0] = 1", "igrp[0] = 1", "carp[0] = 1"}},
	{weRefuse: true, unsupported: true, reason: "ether proto of 1500 or less means an 802.3 length with LLC, not implemented",
		exprs: []string{"ether proto 0", "ether proto 1", "ether proto 6", "ether proto 17", "ether proto 58",
			"ether proto 255", "ether proto 256", "ether proto 0x11", "ether proto 1500", "ether proto 100"}},
	{weRefuse: true, unsupported: true, reason: "atalk and aarp, which libpcap also matches in 802.2 SNAP frames, are not implemented",
		exprs: []string{"ether proto \\atalk"}},
	{weRefuse: true, unsupported: true, reason: "ip broadcast needs the interface's netmask",
		exprs: []string{"ip broadcast"}},
	{weRefuse: true, unsupported: true, reason: "protocols and link types other than Ethernet, IPv4, IPv6, ARP, TCP, UDP, SCTP, ICMP, IGMP, AH and ESP are not implemented",
		exprs: []string{"ip protochain 6", "mpls", "mpls 5 and udp", "pppoes", "pppoed", "geneve", "llc", "stp",
			"ipx", "decnet", "atalk", "iso", "netbeui", "lat", "aarp", "moprc"}},
	{weRefuse: true, unsupported: true, reason: "nesting deeper than filter.MaxDepth (tcpdump's parser stops near 10000)",
		exprs: []string{
			strings.Repeat("(", filter.MaxDepth+1) + "udp" + strings.Repeat(")", filter.MaxDepth+1),
			strings.Repeat("not ", filter.MaxDepth+1) + "udp",
			"len = " + strings.Repeat("-", filter.MaxDepth+1) + "1",
		}},
	{weRefuse: true, reason: "a division by zero or too long a shift that libpcap's optimizer finds (len % (len * 0)) " +
		"is refused also where a constant comparison before it makes it unreachable, which libpcap's optimizer may notice first",
		exprs: []string{"1 = 1 or len % (len * 0) = 1"}},
	{reason: "libpcap's optimizer proves these match nothing and tcpdump refuses them (expression rejects all packets); " +
		"Compile refuses only filters whose comparisons are between numbers",
		exprs: []string{"len * 0 = 1", "0 * len = 1", "udp and not udp", "not ip and ip[0] = 1", "tcp and udp",
			"ip and ip6", "ip6[ip[0]] = 0", "arp[ip[0]] = 0"}},
}

// tcpdumpResult is what tcpdump made of an expression: its verdict per
// frame, or its error message.
type tcpdumpResult struct {
	verdicts []bool
	err      error
}

// TestTcpdumpRefusals runs every generated expression through tcpdump
// (reading a capture of the filter test frames, so that no interface is
// needed) and through Compile: both refuse it; or both compile it and
// Compile's program (in golang.org/x/net/bpf's VM) gives every frame the
// verdict of tcpdump's program with or without libpcap's optimizer (which
// changes verdicts on frames too short for a load it moves or removes);
// or it is one of tcpdumpDifferences.
func TestTcpdumpRefusals(t *testing.T) {
	tcpdump := netnstest.RequireTool(t, "tcpdump")
	frames := capset.Frames()
	dir := t.TempDir()
	capFile := filepath.Join(dir, "set.pcap")
	var buf bytes.Buffer
	if err := capset.WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capFile, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	listed := map[string]difference{}
	for _, d := range tcpdumpDifferences {
		for _, e := range d.exprs {
			listed[e] = d
		}
	}

	var exprs []string
	seen := map[string]bool{}
	for _, e := range generatedExprs() {
		if !seen[e] {
			seen[e] = true
			exprs = append(exprs, e)
		}
	}
	for e := range listed {
		if !seen[e] {
			t.Errorf("%.80q is listed as a difference but not generated", e)
		}
	}
	// tcpdump, two at a time.
	results := make([]tcpdumpResult, len(exprs))
	var wg sync.WaitGroup
	work := make(chan int)
	for w := range 2 {
		wg.Go(func() {
			out := filepath.Join(dir, fmt.Sprintf("out%d.pcap", w))
			for i := range work {
				v, err := tcpdumpRun(tcpdump, capFile, out, exprs[i], len(frames), false)
				results[i] = tcpdumpResult{v, err}
			}
		})
	}
	for i := range exprs {
		work <- i
	}
	close(work)
	wg.Wait()

	var stats struct{ bothRefuse, bothAccept, weRefuse, tcpdumpRefuses, rejectsAll int }
	for i, expr := range exprs {
		td := results[i]
		prog, err := filter.Compile(expr)
		var fe *filter.Error
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("%.80q: %T %v, want an *Error", expr, err, err)
		}
		d, isListed := listed[expr]
		switch {
		case td.err != nil && err != nil:
			stats.bothRefuse++
			if isListed {
				t.Errorf("%.80q is listed as a difference (%s) but both refuse it: %v; tcpdump: %v", expr, d.reason, err, td.err)
			}
		case td.err == nil && err != nil:
			stats.weRefuse++
			switch {
			case !isListed || !d.weRefuse:
				t.Errorf("%.80q: tcpdump compiles it, Compile refuses it: %v", expr, err)
			case d.unsupported != errors.Is(err, filter.ErrUnsupportedConstruct):
				t.Errorf("%.80q: refused as listed (%s), but ErrUnsupportedConstruct is %v: %v", expr, d.reason, !d.unsupported, err)
			}
		case td.err != nil && err == nil:
			stats.tcpdumpRefuses++
			if isListed && d.weRefuse {
				t.Errorf("%.80q is listed as refused by Compile (%s), but only tcpdump refuses it: %v", expr, d.reason, td.err)
			}
			if !strings.Contains(td.err.Error(), "expression rejects all packets") {
				t.Errorf("%.80q: tcpdump refuses it (%v), Compile compiles it", expr, td.err)
				continue
			}
			stats.rejectsAll++
			if _, err := tcpdumpRun(tcpdump, capFile, filepath.Join(dir, "out.pcap"), expr, len(frames), true); err != nil {
				t.Errorf("%.80q: tcpdump refuses it (%v), also without its optimizer (%v), Compile compiles it", expr, td.err, err)
			}
			if n := matches(t, expr, prog, frames); n > 0 {
				t.Errorf("%.80q: tcpdump finds that it rejects all packets, Compile's program matches %d frames", expr, n)
			}
		default:
			stats.bothAccept++
			if isListed {
				t.Errorf("%.80q is listed as a difference (%s) but both compile it", expr, d.reason)
			}
			compareVerdicts(t, tcpdump, capFile, dir, expr, prog, frames, td.verdicts)
		}
	}
	t.Logf("%d expressions: %d refused by both, %d compiled by both with the same verdicts, %d refused only by Compile (listed), %d only by tcpdump (%d as rejecting all packets)",
		len(exprs), stats.bothRefuse, stats.bothAccept, stats.weRefuse, stats.tcpdumpRefuses, stats.rejectsAll)
	if stats.bothRefuse < 500 || stats.bothAccept < 500 {
		t.Errorf("the generated set does not exercise both sides: %+v", stats)
	}
}

// compareVerdicts checks Compile's program against tcpdump's verdicts
// (want): on each frame it must agree with tcpdump's program, or with
// tcpdump's program built without libpcap's optimizer (tcpdump -O).
func compareVerdicts(t *testing.T, tcpdump, capFile, dir, expr string, prog []bpf.Instruction, frames [][]byte, want []bool) {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Errorf("%.80q: %v", expr, err)
		return
	}
	var unopt []bool
	bad := 0
	for i, f := range frames {
		n, err := vm.Run(f)
		got := err == nil && n != 0
		if got == want[i] {
			continue
		}
		if unopt == nil {
			if unopt, err = tcpdumpRun(tcpdump, capFile, filepath.Join(dir, "out.pcap"), expr, len(frames), true); err != nil {
				t.Errorf("%.80q: tcpdump -O: %v", expr, err)
				return
			}
		}
		if got != unopt[i] {
			if bad++; bad <= 2 {
				t.Errorf("%.80q, frame %d (% x): Compile's program match=%v, tcpdump's %v (with and without its optimizer)", expr, i, f, got, want[i])
			}
		}
	}
}

// matches counts the frames prog matches.
func matches(t *testing.T, expr string, prog []bpf.Instruction, frames [][]byte) int {
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Errorf("%.80q: %v", expr, err)
		return 0
	}
	n := 0
	for _, f := range frames {
		if v, err := vm.Run(f); err == nil && v != 0 {
			n++
		}
	}
	return n
}

// tcpdumpRun runs tcpdump -r over the capture, writing what matches to
// out, and returns its verdict per frame, or its own error message when it
// refuses the expression. noOpt runs it without libpcap's optimizer.
func tcpdumpRun(tcpdump, capFile, out, expr string, n int, noOpt bool) ([]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := []string{"-r", capFile, "-w", out}
	if noOpt {
		args = append(args, "-O")
	}
	msg, err := exec.CommandContext(ctx, tcpdump, append(args, "--", expr)...).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(msg)), "\n")
		return nil, fmt.Errorf("%s (%v)", lines[len(lines)-1], err)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, idx, err := capset.ReadPcap(f)
	if err != nil {
		return nil, err
	}
	v := make([]bool, n)
	for _, i := range idx {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("tcpdump wrote a frame stamped %d", i)
		}
		v[i] = true
	}
	return v, nil
}
