package cpustat_test

import (
	"fmt"

	"github.com/xdpio/xdpio/internal/cpustat"
)

// Two readings of /proc/stat give each core's share of the time between
// them, the average over all cores first.
func ExampleStat_Since() {
	a, err := cpustat.Parse([]byte("cpu  100 0 50 800 0 0 50 0 0 0\ncpu0 50 0 25 400 0 0 25 0 0 0\ncpu1 50 0 25 400 0 0 25 0 0 0\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := cpustat.Parse([]byte("cpu  220 0 90 1000 0 0 90 0 0 0\ncpu0 170 0 65 400 0 0 65 0 0 0\ncpu1 50 0 25 600 0 0 25 0 0 0\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	cores, busy := b.Since(a, 100)
	for _, c := range cores {
		fmt.Printf("cpu %s busy %.0f%%\n", c.CPU, c.Busy())
	}
	fmt.Printf("busy %.1f s\n", busy)
	// Output:
	// cpu all busy 50%
	// cpu 0 busy 100%
	// cpu 1 busy 0%
	// busy 2.0 s
}
