package bench_test

import (
	"fmt"

	"github.com/xdpio/xdpio/bench"
)

// TCP mode is chosen by name, as the CLI's --mode flag takes it; a Client
// in that mode with TSO set cuts 64 KB writes with offload.SegmentPayload.
func ExampleParseMode() {
	for _, s := range []string{"udp", "tcp", "sctp"} {
		m, err := bench.ParseMode(s)
		fmt.Println(m, err)
	}
	c := bench.Client{Mode: bench.ModeTCP, TSO: true}
	fmt.Println(c.Mode, c.TSO)
	// Output:
	// udp <nil>
	// tcp <nil>
	//  invalid mode "sctp": must be udp or tcp
	// tcp true
}
