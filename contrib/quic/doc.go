// Package xdpquic runs quic-go over AF_XDP: Conn adapts an
// xdpnet.UDPConn to what quic-go's Transport looks for in a
// net.PacketConn, so that a QUIC endpoint's UDP datagrams skip the
// kernel's network stack.
//
//	c, err := xdpquic.Listen("eth0", netip.MustParseAddrPort("198.18.0.2:443"), xdpnet.Config{})
//	tr := &quic.Transport{Conn: c}
//	ln, err := tr.Listen(tlsConf, quicConf)
//
// What quic-go gets:
//   - batch reads: Conn has ReadBatch, so quic-go reads up to 8 datagrams
//     per call from xdpnet's ReadBatch, not one by one;
//   - GSO writes: quic-go's UDP_SEGMENT control message becomes
//     xdpnet.Message.SegSize, one write for a train of packets, which
//     xdpnet cuts into datagrams in place in the UMEM;
//   - ECN: the ECN bits of received datagrams come as the IP_TOS and
//     IPV6_TCLASS control messages quic-go parses, and the marks it asks
//     for are set on sent ones;
//   - DF and path MTU discovery: xdpnet never fragments and fails an
//     oversized write with EMSGSIZE, which quic-go's DPLPMTUD expects.
//
// What falls back: packet info (IP_PKTINFO, the local address of a
// datagram) is not reported, and the source address of a reply is the
// conn's address or the kernel route's preferred one. Listen on a
// specific address where that matters (a host with several addresses
// on the interface). The descriptor quic-go sets socket options on
// (buffer sizes, DF, ECN reporting) is the kernel UDP socket the conn
// holds on its port, which carries only what reaches the kernel.
//
// It is a separate Go module, so that xdpio's own module does not pull in
// quic-go.
package xdpquic
