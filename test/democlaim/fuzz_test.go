package main

import (
	"math"
	"strings"
	"testing"
)

// parseClaim never panics, and what it takes is exactly what its figures
// make, whitespace aside.
func FuzzParseClaim(f *testing.F) {
	f.Add("On a 2-core machine, over 1 run of the demo (`make demo-claim`: median, and range), xsk at both ends received 1.74× the kernel socket's packets/s at 0.57× the machine's CPU time per packet, and lost 12.5% of what it was sent in the steady state; the sender was the limit in 0 of 1 run.")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseClaim(s)
		if err != nil {
			return
		}
		if got := c.text(); got != strings.Join(strings.Fields(s), " ") {
			t.Fatalf("took %q as %+v, which makes %q", s, c, got)
		}
	})
}

// parseRun never panics, and a run it takes has figures to claim: finite
// ratios above 0, a loss of 0-100%, a core.
func FuzzParseRun(f *testing.F) {
	f.Add([]byte(`{"results":[{"backend":"xsk","packets_per_second":2,"cpu_ns_per_packet":1,"steady":{"lost_percent":0,"limit":"sender"},"cores":[{"cpu":"all"},{"cpu":"0"}]},{"backend":"socket","packets_per_second":1,"cpu_ns_per_packet":2}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseRun(data)
		if err != nil {
			return
		}
		if !(m.Ratio > 0) || !(m.CPU > 0) || math.IsInf(m.Ratio, 0) || math.IsInf(m.CPU, 0) || m.Lost < 0 || m.Lost > 100 || m.Cores < 1 {
			t.Fatalf("took %q as %+v", data, m)
		}
	})
}
