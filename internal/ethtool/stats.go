package ethtool

// Stat is one of a driver's own counters, as `ethtool -S` prints it: the
// driver's name for it ("rx_queue_0_xdp_packets") and its value.
type Stat struct {
	Name  string
	Value uint64
}
