package coalesce_test

import (
	"fmt"

	"github.com/xdpio/xdpio/coalesce"
)

// The profile table adaptive moderation moves along, for a bound of 50µs
// and batches of up to 64 frames.
func ExampleProfiles() {
	for i, p := range coalesce.Profiles(50, 64) {
		fmt.Printf("%d: rx-usecs %d rx-frames %d\n", i, p.Usecs, p.Frames)
	}
	// Output:
	// 0: rx-usecs 0 rx-frames 64
	// 1: rx-usecs 8 rx-frames 64
	// 2: rx-usecs 16 rx-frames 64
	// 3: rx-usecs 32 rx-frames 64
	// 4: rx-usecs 50 rx-frames 64
}
