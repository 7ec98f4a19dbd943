package rss_test

import (
	"fmt"

	"github.com/xdpio/xdpio/rss"
)

// Spread a 16-entry indirection table equally over 4 queues, and by
// weights 3:1 over 2 queues, as `ethtool -X DEV equal 4` and
// `ethtool -X DEV weight 3 1` would.
func ExampleWeights() {
	eq, _ := rss.Equal(4, 16)
	fmt.Println(eq)
	w, _ := rss.Weights(16, 3, 1)
	fmt.Println(w)
	// Output:
	// [0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3]
	// [0 0 0 0 0 0 0 0 0 0 0 0 1 1 1 1]
}
