package offload_test

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/xdpio/xdpio/offload"
)

// tcpSuperPacket builds an Ethernet + IPv4 + TCP frame carrying n payload
// bytes, as a TCP stack with TSO hands it to the NIC. Segment computes every
// checksum itself, so none is filled in here.
func tcpSuperPacket(n int) []byte {
	f := make([]byte, offload.EthernetLen+offload.IPv4MinLen+offload.TCPMinLen+n)
	offload.Ethernet(f).SetType(offload.EtherTypeIPv4)
	ip := offload.IPv4(f[offload.EthernetLen:])
	ip[0] = 0x45
	ip.SetTotalLength(uint16(len(ip)))
	ip.SetID(100)
	ip[6] = 0x40                        // don't fragment
	ip[8], ip[9] = 64, offload.ProtoTCP // TTL, protocol
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	tcp := offload.TCP(ip[offload.IPv4MinLen:])
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	tcp.SetSeq(1)
	tcp[12] = 5 << 4          // data offset
	tcp.SetFlags(0x10 | 0x08) // ACK, PSH
	binary.BigEndian.PutUint16(tcp[14:], 512)
	for i := range tcp[offload.TCPMinLen:] {
		tcp[offload.TCPMinLen+i] = byte(i)
	}
	return f
}

func ExampleSegment() {
	super := tcpSuperPacket(4000)
	segs, err := offload.Segment(nil, super, offload.SegmentOptions{MSS: 1448})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range segs {
		ip := offload.IPv4(s[offload.EthernetLen:])
		tcp := offload.TCP(ip[ip.HeaderLength():])
		fmt.Printf("%d bytes, ID %d, seq %d, flags %#02x, IPv4 checksum ok: %v\n",
			len(s), ip.ID(), tcp.Seq(), tcp.Flags(), ip.ChecksumValid())
	}
	// Output:
	// 1502 bytes, ID 100, seq 1, flags 0x10, IPv4 checksum ok: true
	// 1502 bytes, ID 101, seq 1449, flags 0x10, IPv4 checksum ok: true
	// 1158 bytes, ID 102, seq 2897, flags 0x18, IPv4 checksum ok: true
}

// ExampleSegmentInto writes the segments straight into preallocated frames,
// as into UMEM frames of an AF_XDP socket: no allocation per call.
func ExampleSegmentInto() {
	super := tcpSuperPacket(4000)
	opts := offload.SegmentOptions{MSS: 1448}
	n, maxLen, err := offload.SegmentCount(super, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = make([]byte, 2048) // e.g. UMEM frames
	}
	n, err = offload.SegmentInto(frames, super, opts)
	fmt.Println(n, "segments, largest", maxLen, "bytes, error:", err)
	fmt.Println(len(frames[0]), len(frames[1]), len(frames[2]))
	// Output:
	// 3 segments, largest 1502 bytes, error: <nil>
	// 1502 1502 1158
}

// ExampleGRO merges the segments back into the super-packet they came from.
func ExampleGRO() {
	super := tcpSuperPacket(4000)
	segs, _ := offload.Segment(nil, super, offload.SegmentOptions{MSS: 1448})
	g, err := offload.NewGRO(offload.GROOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var out [][]byte
	for _, s := range segs {
		out = g.Feed(out, s) // the short, PSH-flagged last segment ends the merge
	}
	out = g.Flush(out) // at the end of a receive batch
	fmt.Println(len(out), "frame of", len(out[0]), "bytes")
	ip := offload.IPv4(out[0][offload.EthernetLen:])
	fmt.Println("payload restored:", bytes.Equal(out[0][offload.EthernetLen+40:], super[offload.EthernetLen+40:]), "IPv4 checksum ok:", ip.ChecksumValid())
	// Output:
	// 1 frame of 4054 bytes
	// payload restored: true IPv4 checksum ok: true
}

// ExampleSegmentPayload segments application data behind a per-connection
// header template, as a TX path with TSO in software would, writing each
// segment into a frame taken from a pool.
func ExampleSegmentPayload() {
	template := tcpSuperPacket(0) // Ethernet + IPv4 + TCP headers only
	data := make([]byte, 3000)
	pool := make([][]byte, 4)
	for i := range pool {
		pool[i] = make([]byte, 2048) // e.g. free UMEM frames
	}
	used := 0
	n, err := offload.SegmentPayload(template, data, offload.SegmentOptions{MSS: 1448}, func(size int) []byte {
		f := pool[used][:size]
		used++
		return f
	})
	fmt.Println(n, "segments, error:", err)
	for _, f := range pool[:n] {
		tcp := offload.TCP(f[offload.EthernetLen+offload.IPv4MinLen:])
		fmt.Println("seq", tcp.Seq(), "total length", offload.IPv4(f[offload.EthernetLen:]).TotalLength())
	}
	// Output:
	// 3 segments, error: <nil>
	// seq 1 total length 1488
	// seq 1449 total length 1488
	// seq 2897 total length 144
}
