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
// sctp, icmp, icmp6, igmp, ah, esp; ip/ip6/ether proto; ether host,
// broadcast and multicast; ip and ip6 multicast; vlan [ID] (which, as in
// libpcap, moves every later primitive past the tag); len, less, greater;
// loads such as tcp[tcpflags] & tcp-syn != 0 or ip[6:2] & 0x3fff != 0 with
// libpcap's arithmetic and named constants; and, or, not with parentheses
// (and and or have the same precedence and associate left to right, as in
// tcpdump). vlan matches tags present in the frame: a NIC with VLAN
// stripping on (ethtool -k: rx-vlan-offload) removes them before XDP
// runs. Anything else — host names, gateway, protochain, mpls,
// pppoes, geneve, inbound, ... — is refused with an *Error that names the
// construct and wraps ErrUnsupported: never a filter that silently
// matches more or less than tcpdump.
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
