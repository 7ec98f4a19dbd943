package offload

// SegmentUDP splits the UDP super-datagram frame (Ethernet II, optional
// VLAN tags, IPv4 or IPv6 with extension headers, UDP) into datagrams of at
// most opts.MSS payload bytes each, as Linux UDP GSO (UDP_SEGMENT,
// __udp_gso_segment) does, and appends them to dst. Every output frame is a
// complete datagram: the input's headers with its own UDP length, UDP
// checksum (a computed zero is sent as 0xffff), IPv4 total length or IPv6
// payload length, IPv4 header checksum, and an IPv4 ID incremented per
// datagram unless opts.FixedID. The input's UDP length must match its IP
// length. Reuse of dst and errors are as for Segment.
func SegmentUDP(dst [][]byte, frame []byte, opts SegmentOptions) ([][]byte, error) {
	return appendSegments(dst, frame, opts, ipProtoUDP, "segment UDP")
}

// SegmentUDPInto is SegmentUDP writing into caller-provided buffers, as
// SegmentInto does for TCP. It never allocates.
func SegmentUDPInto(bufs [][]byte, frame []byte, opts SegmentOptions) (int, error) {
	return segmentCore(frame, opts, ipProtoUDP, "segment UDP", func(i, size int) []byte {
		if i >= len(bufs) || cap(bufs[i]) < size {
			return nil
		}
		bufs[i] = bufs[i][:size]
		return bufs[i]
	})
}

// SegmentUDPFunc is SegmentUDP writing into buffers obtained from next, as
// SegmentFunc does for TCP.
func SegmentUDPFunc(frame []byte, opts SegmentOptions, next func(size int) []byte) (int, error) {
	return segmentCore(frame, opts, ipProtoUDP, "segment UDP", func(_, size int) []byte { return next(size) })
}

// SegmentUDPCount returns how many datagrams SegmentUDP would produce from
// frame and the length of the largest of them.
func SegmentUDPCount(frame []byte, opts SegmentOptions) (frames, maxLen int, err error) {
	p, err := planSegments(frame, opts, ipProtoUDP, "segment UDP")
	return p.n, p.maxLen(), err
}
