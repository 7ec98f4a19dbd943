// Package filter compiles tcpdump (pcap-filter) expressions to classic BPF
// in pure Go, and translates classic BPF to eBPF for XDP programs.
//
// Compile parses an expression such as
//
//	udp dst port 4789 and not src net 198.18.1.0/24
//
// for Ethernet frames and returns []bpf.Instruction (golang.org/x/net/bpf)
// that behave as `tcpdump -d` would: host, net (CIDR, mask, abbreviated),
// port, portrange with src/dst qualifiers; ip, ip6, arp, rarp, tcp, udp,
// sctp, icmp, icmp6, igmp, ah, esp, pim, vrrp, carp, igrp; ip/ip6/ether
// proto; ether host, broadcast and multicast (link, ppp, slip, fddi, tr
// and wlan are ether, as in libpcap); ip and ip6 multicast; vlan [ID]
// (which, as in libpcap, moves every later primitive past the tag); len,
// less, greater; loads such as tcp[tcpflags] & tcp-syn != 0 or
// ip[6:2] & 0x3fff != 0 with libpcap's arithmetic and named constants;
// and, or, not with parentheses (and and or have the same precedence and
// associate left to right, as in tcpdump). vlan matches tags present in
// the frame: a NIC with VLAN stripping on (ethtool -k: rx-vlan-offload)
// removes them before XDP runs. Anything else — host names, gateway,
// protochain, mpls, pppoes, geneve, inbound, ... — is refused with an
// *Error that names the construct and wraps ErrUnsupportedConstruct: never a
// filter that silently matches more or less than tcpdump.
//
// # Limits
//
// The parser reads every token once, without backtracking, so its work
// grows linearly with the expression's length. An expression may nest
// parentheses, brackets, not and unary minus MaxDepth (1000) levels deep,
// far more than people write (tcpdump's own parser stops near 10000); it
// may be MaxLength (128 KiB) long, the longest single argument Linux
// passes to a program. Beyond either, Compile returns an *Error that names
// the limit (and, for depth, the offset of the level too many), wrapping
// ErrUnsupportedConstruct.
//
// # What is refused, as tcpdump refuses it
//
// tcpdump is the oracle (filter's tests run it over a generated set of
// expressions): what it refuses, Compile refuses.
//
//   - A shift by more than 31 bits, a division or modulus by zero: libpcap
//     refuses them where the right operand's code starts by loading such a
//     number (len >> 40, len >> (40 + len), len / ip[0], whose code starts
//     with the index 0), and where its optimizer finds the right operand
//     constant and the left one not (len >> (20 + 20), len % (len * 0)).
//   - A filter whose comparisons between numbers make it match nothing
//     (udp and 0 = 1): tcpdump says it rejects all packets.
//   - An id without qualifiers, other than right after and or or, where it
//     takes those of the primitive before (host A or B; port 53 or 80):
//     "80" alone, "udp or 80" and "(port 53) or 80" are refused. Inside
//     parentheses that start with such an id only ids may follow
//     (port 53 or (80 or 81)).
//   - Protocol names that are keywords without a backslash (proto \tcp,
//     not proto tcp), and names libpcap does not know (icmp6 is not an IP
//     protocol name; ipv6-icmp is).
//   - A service name used with a protocol /etc/services does not list it
//     for (udp port http); unqualified, it matches only the protocols it
//     is listed for (port http is TCP only, port domain TCP and UDP).
//   - Numbers that do not fit 32 bits, octal numbers with an 8 or 9, port
//     numbers above 65535, VLAN IDs above 4095, loads of sizes other than
//     1, 2 and 4, prefix lengths above 32 (128 for IPv6), network
//     addresses with bits set outside the prefix or mask, 10/8 (a prefix
//     needs a dotted address: 10.0.0.0/8 or 10/8 written as net 10), MAC
//     addresses that mix separators.
//
// Numbers are read as libpcap reads them: 0x hex, a leading 0 octal, but
// the numbers of a port range and of a dotted address decimal
// (portrange 010-020 is 10-20, 010.1.1.1 is 10.1.1.1). As in libpcap, an
// arithmetic operation keeps the protocol check of its left operand only:
// len - ip[0] > 0 tests non-IP frames too.
//
// # Where Compile differs from tcpdump on purpose
//
//   - It refuses, as unsupported: host and network names (it does no name
//     resolution), service and protocol names beyond a few well-known ones
//     (it does not read /etc/services or /etc/protocols, whose contents
//     vary between hosts), a host given as one number or an abbreviated
//     address (libpcap reads host 10 as 0.0.0.10 and host 1.2.3 as the
//     network 1.2.3.0/24), a port range with more after its second number
//     (libpcap reads 1-0x10000 as 0-1), ether proto values of 1500 or less
//     (802.3 lengths, LLC), ip broadcast (it needs the interface's
//     netmask), loads relative to pim, vrrp, carp and igrp, and nesting
//     deeper than MaxDepth.
//   - It refuses a division or shift libpcap's optimizer would refuse also
//     where a constant comparison before it makes it unreachable and the
//     optimizer may notice that first (1 = 1 or len % (len * 0) = 1).
//   - It compiles filters that libpcap's optimizer proves match nothing
//     (udp and not udp, len * 0 = 1) and tcpdump then refuses: what that
//     optimizer proves depends on how far it gets (it refuses
//     len * 0 = 1 but not ip[0] * 0 = 1), so Compile refuses only filters
//     whose comparisons are between numbers.
//
// github.com/packetcap/go-pcap has a pure-Go compiler too, but its filter
// package compiles "tcp[13] & 2 != 0" to plain "tcp", "portrange 1-100"
// and "icmp" to programs matching every frame, and cannot parse vlan or
// len; this package does not use it.
//
// XDP translates classic BPF (compiled here, or by libpcap) into eBPF
// instructions (github.com/cilium/ebpf/asm) for an XDP program: A and X in
// registers, the scratch memory M[] on the stack, every packet load
// checked against data_end as the verifier wants, and the program's
// verdict turned into jumps to two labels. Package xsk uses it to
// redirect matching frames to AF_XDP sockets (xsk.ProgramConfig.Expr and
// BPF) and to pass the rest to the kernel.
package filter
