// Package capset generates the edge-case Ethernet frames the filter
// tests compare against tcpdump: IPv4 with options and fragments, IPv6
// with extension headers and fragments, VLAN and QinQ tags, ARP, TCP with
// every flag, UDP, ICMP, ICMPv6, SCTP, IGMP, and frames truncated inside
// each header. It also writes and reads them as pcap files.
package capset
