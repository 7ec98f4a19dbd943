// Package offload does in software what NICs offload in hardware, on plain
// Ethernet frames held in []byte (Ethernet II, optional 802.1Q/802.1ad
// tags, IPv4 or IPv6): the Internet checksum and pseudo-header sums, RX
// checksum verdicts from one CHECKSUM_COMPLETE-style sum, TX checksum fill,
// TCP segmentation (TSO), UDP segmentation (USO) and receive coalescing
// (GRO).
//
// It knows nothing of sockets and needs no privilege, so it serves any
// packet source: AF_XDP frames from package xsk, a pcap file, a test.
//
// # Checksums
//
// [Checksum] is the RFC 1071 sum (vectorised on amd64), [Fold] and
// [Combine] build sums from parts, [Update16] and [Update32] patch a
// checksum after a field changed (RFC 1624), [PseudoHeaderIPv4] and
// [PseudoHeaderIPv6] sum the pseudo-headers. Sums are "folded, not
// complemented": the value stored in a header is the complement.
//
// On receive, [VerifyRX] returns an [RXResult]: a [Verdict] for the IPv4
// header checksum and one for the TCP, UDP, UDP-Lite, ICMP or ICMPv6
// checksum, with a [Reason] when a frame is malformed (truncated headers,
// inconsistent lengths: never reported as a bad checksum), when the
// transport checksum cannot be checked (fragments, ESP) or when there is
// none (UDP checksum 0 over IPv4). A caller that has a complete sum from
// the NIC (Linux CHECKSUM_COMPLETE) passes it to [VerifyRXComplete], which
// derives the transport check from it without reading the payload again.
//
// On transmit, [FillChecksum] writes the IPv4 header and transport
// checksums of a frame (NETIF_F_HW_CSUM in software). [PreparePartial] and
// [FillPartial] split the same work the way Linux CHECKSUM_PARTIAL and
// AF_XDP TX metadata (csum_start, csum_offset) do: the pseudo-header sum is
// seeded in the checksum field, then the device — or FillPartial — sums
// from csum_start to the end of the frame and stores the complement.
//
// # Segmentation and coalescing
//
// [Segment] cuts a TCP super-packet (up to 64 KB of payload behind one set
// of headers) into MSS-sized frames the way Linux GSO does: headers copied,
// sequence numbers advanced, the IPv4 ID incremented (or kept, with
// SegmentOptions.FixedID), lengths fixed up, CWR on the first segment only,
// FIN and PSH on the last only, and every IPv4 and TCP checksum computed
// while the payload is copied. [SegmentInto] and [SegmentFunc] write into
// caller-provided buffers (UMEM frames) without allocating;
// [SegmentPayload] takes a header template and a separate payload, as a
// driver's TSO does. [SegmentUDP] is UDP segmentation (USO): every segment
// a full datagram with its own length and checksum. [GRO] is the inverse of
// Segment: it merges in-order segments of one flow under the kernel's
// tcp_gro_receive rules and flushes on any exception.
//
// # Parsing and building frames
//
// [Parse] is the module's one frame parser: it walks the Ethernet header,
// VLAN tags (802.1Q, 802.1ad), IPv4 (options) or IPv6 (extension headers)
// and returns a [Layout] with the offsets of the L3, L4 and payload, the
// transport protocol and what stands in the way of a checksum, or a
// [Reason] why the frame is malformed. Everything in this package that
// reads a frame starts with it, and so do package rss's dispatch and
// package xdpnet, each adding its own rules on top (xdpnet takes no VLAN
// tags, Segment no fragments). [Headers] is the one builder: Ethernet,
// IPv4 or IPv6, then UDP ([Headers.BuildUDP], [Headers.BuildUDPPartial])
// or TCP ([Headers.BuildTCP]), every checksum right, summed while the
// payload is copied.
//
// Every function that parses a frame returns an error wrapping
// [ErrMalformed] for a frame it cannot parse, and never panics.
//
// Header views ([Ethernet], [VLAN], [IPv4], [IPv6], [TCP], [UDP], [ICMP])
// read and write fields in place, gVisor style; they do not check bounds:
// take them at the offsets of a Layout, which Parse checked.
//
// Functions in this package do not keep references to the frames they are
// given and do not allocate on success. Frames from a UMEM are valid only
// until their descriptor goes back to a ring.
package offload
