package iperf3

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// UDP stream setup messages. iperf3 writes them as a native unsigned int
// (write(s, &buf, 4)) and compares them the same way, so on the wire they
// are in the host's byte order: on x86 the client's 0x36373839 is the
// bytes "9876" and the server's 0x39383736 the bytes "6789".
const (
	UDPConnectMsg         uint32 = 0x36373839
	UDPConnectReply       uint32 = 0x39383736
	legacyUDPConnectReply uint32 = 987654321
)

// ConnectBytes returns the 4 bytes of v in native order.
func ConnectBytes(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

// IsConnectReply reports whether a datagram is a server's reply to the
// stream setup message (current or legacy value, in the host's order as
// iperf3 compares it; the other order of the reply would be the message).
func IsConnectReply(b []byte) bool {
	return isConnect(b, UDPConnectReply) || isConnect(b, legacyUDPConnectReply)
}

// IsConnectMsg reports whether a datagram is a client's stream setup
// message.
func IsConnectMsg(b []byte) bool { return isConnect(b, UDPConnectMsg) }

func isConnect(b []byte, v uint32) bool {
	if len(b) != 4 {
		return false
	}
	return binary.NativeEndian.Uint32(b) == v
}

// UDP payload header lengths: seconds, microseconds and a 32-bit or
// (with the udp_counters_64bit parameter) 64-bit sequence number, all big
// endian.
const (
	UDPHeaderLen32 = 12
	UDPHeaderLen64 = 16
)

// ErrShortDatagram is returned for a datagram too short for the UDP header.
var ErrShortDatagram = errors.New("datagram shorter than the iperf3 UDP header")

// ErrBadHeader is returned for a UDP header with impossible values.
var ErrBadHeader = errors.New("invalid iperf3 UDP header")

// UDPHeader is the start of every iperf3 UDP datagram: the sender's clock
// when it sent the datagram and the datagram's sequence number (from 1).
type UDPHeader struct {
	Sec, Usec uint32
	Seq       uint64
}

// HeaderLen returns the header length for the counter width.
func HeaderLen(counters64 bool) int {
	if counters64 {
		return UDPHeaderLen64
	}
	return UDPHeaderLen32
}

// Time returns the send time the header carries.
func (h UDPHeader) Time() time.Time {
	return time.Unix(int64(h.Sec), int64(h.Usec)*1000)
}

// Put writes h at the start of b, which must hold HeaderLen(counters64)
// bytes. With 32-bit counters the sequence is truncated as iperf3 does.
func (h UDPHeader) Put(b []byte, counters64 bool) {
	binary.BigEndian.PutUint32(b[0:], h.Sec)
	binary.BigEndian.PutUint32(b[4:], h.Usec)
	if counters64 {
		binary.BigEndian.PutUint64(b[8:], h.Seq)
	} else {
		binary.BigEndian.PutUint32(b[8:], uint32(h.Seq))
	}
}

// ParseUDPHeader reads the header of a received datagram.
func ParseUDPHeader(b []byte, counters64 bool) (UDPHeader, error) {
	n := HeaderLen(counters64)
	if len(b) < n {
		return UDPHeader{}, fmt.Errorf("parse UDP header: %d bytes, need %d: %w", len(b), n, ErrShortDatagram)
	}
	h := UDPHeader{Sec: binary.BigEndian.Uint32(b[0:]), Usec: binary.BigEndian.Uint32(b[4:])}
	if counters64 {
		h.Seq = binary.BigEndian.Uint64(b[8:])
	} else {
		h.Seq = uint64(binary.BigEndian.Uint32(b[8:]))
	}
	if h.Usec >= 1e6 {
		return UDPHeader{}, fmt.Errorf("parse UDP header: microseconds %d >= 1000000: %w", h.Usec, ErrBadHeader)
	}
	return h, nil
}

// RecvCounters are a receiving stream's counters, computed as iperf3's
// iperf_udp_recv does.
type RecvCounters struct {
	Bytes      uint64  // payload bytes received
	Datagrams  int64   // datagrams received
	Packets    int64   // highest sequence number seen (iperf3's packet_count)
	Lost       int64   // sequence gaps not filled later (iperf3's cnt_error)
	OutOfOrder int64   // datagrams whose sequence went backwards
	Jitter     float64 // RFC 1889 running estimate, seconds
	Malformed  int64   // datagrams too short or with an invalid header
}

// RecvStats accumulates RecvCounters datagram by datagram. The zero value
// is ready. Not safe for concurrent use.
type RecvStats struct {
	RecvCounters
	prevTransit int64 // ns
}

// Add accounts one received datagram of n payload bytes with header h,
// arrived at arrival.
//
// Loss and reordering follow iperf3: a sequence above the highest seen
// counts the gap as lost; one at or below it is out of order and takes
// one back from the losses. Jitter is J += (|D| - J)/16 where D is the
// change of transit time (arrival minus send time) between consecutive
// datagrams; the clocks of the two ends need not agree.
func (s *RecvStats) Add(n int, h UDPHeader, arrival time.Time) {
	first := s.Datagrams == 0
	s.Bytes += uint64(n)
	s.Datagrams++
	seq := int64(h.Seq)
	if seq >= s.Packets+1 {
		if seq > s.Packets+1 {
			s.Lost += seq - 1 - s.Packets
		}
		s.Packets = seq
	} else {
		s.OutOfOrder++
		if s.Lost > 0 {
			s.Lost--
		}
	}
	transit := arrival.UnixNano() - (int64(h.Sec)*1e9 + int64(h.Usec)*1e3)
	if first {
		s.prevTransit = transit
	}
	d := transit - s.prevTransit
	if d < 0 {
		d = -d
	}
	s.prevTransit = transit
	s.Jitter += (float64(d)/1e9 - s.Jitter) / 16
}

// AddMalformed accounts a datagram that could not be parsed.
func (s *RecvStats) AddMalformed(n int) {
	s.Malformed++
}
