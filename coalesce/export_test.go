package coalesce

// SetTxStaged makes the Transmitters created after it stage frames in a
// batch of their own (v true) or put them on the TX ring at Submit, and
// returns the previous setting: the benchmark compares the two.
func SetTxStaged(v bool) bool {
	old := txStaged
	txStaged = v
	return old
}
