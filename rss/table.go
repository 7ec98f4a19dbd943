package rss

import "fmt"

// maxIndirSize bounds the tables Equal and Weights build (as large as the
// kernel's u32-entry ETHTOOL_A_RSS_INDIR in one netlink attribute allows).
const maxIndirSize = 1 << 13

// Equal returns an indirection table of size entries that spreads hashes
// evenly over queues RX queues 0..queues-1, as `ethtool -X DEV equal N`
// does: entry i is queue i % queues.
func Equal(queues, size int) ([]uint32, error) {
	if queues <= 0 {
		return nil, fmt.Errorf("equal indirection table: %d queues: need at least 1", queues)
	}
	if size <= 0 || size > maxIndirSize {
		return nil, fmt.Errorf("indirection table size %d: must be between 1 and %d", size, maxIndirSize)
	}
	t := make([]uint32, size)
	for i := range t {
		t[i] = uint32(i % queues)
	}
	return t, nil
}

// Weights returns an indirection table of size entries that gives queue q
// a share of the entries proportional to w[q], as `ethtool -X DEV weight
// W0 W1 …` does: the entries are filled in queue order, and entry i goes to
// the first queue whose cumulative weight boundary size*(w0+…+wq)/sum lies
// beyond i. A zero weight gives a queue no entries.
func Weights(size int, w ...uint32) ([]uint32, error) {
	if size <= 0 || size > maxIndirSize {
		return nil, fmt.Errorf("indirection table size %d: must be between 1 and %d", size, maxIndirSize)
	}
	var sum uint64
	for _, x := range w {
		sum += uint64(x)
	}
	if sum == 0 {
		return nil, fmt.Errorf("weighted indirection table: weights %v: at least one must be positive", w)
	}
	t := make([]uint32, size)
	q, cum := 0, uint64(w[0])
	for i := range t {
		for uint64(i) >= uint64(size)*cum/sum {
			q++
			cum += uint64(w[q])
		}
		t[i] = uint32(q)
	}
	return t, nil
}
