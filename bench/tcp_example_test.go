package bench_test

import (
	"fmt"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/bench/iperf3"
)

// A Client in TCP mode (iperf3.ModeTCP, as the CLI's --mode flag names
// it) with TSO set cuts 64 KB writes with offload.SegmentPayload.
func ExampleClient_tcp() {
	c := bench.Client{Mode: iperf3.ModeTCP, TSO: true}
	fmt.Println(c.Mode, c.TSO)
	// Output:
	// tcp true
}
