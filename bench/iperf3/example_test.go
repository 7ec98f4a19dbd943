package iperf3_test

import (
	"fmt"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
)

// A receiver accounts datagrams as iperf3 does: a gap in the sequence is
// loss until the missing datagram turns up late.
func ExampleRecvStats() {
	var s iperf3.RecvStats
	sent := time.Unix(1700000000, 0)
	for _, seq := range []uint64{1, 2, 4, 5, 3, 8} {
		b := make([]byte, 100)
		iperf3.UDPHeader{Sec: uint32(sent.Unix()), Seq: seq}.Put(b, true)
		h, err := iperf3.ParseUDPHeader(b, true)
		if err != nil {
			fmt.Println(err)
			return
		}
		s.Add(len(b), h, sent.Add(time.Millisecond))
	}
	fmt.Printf("received %d, highest %d, lost %d, out of order %d\n", s.Datagrams, s.Packets, s.Lost, s.OutOfOrder)
	// Output: received 6, highest 8, lost 2, out of order 1
}
