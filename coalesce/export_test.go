package coalesce

// SetHoldP lets receivers keep their P through short sleeps (true, the
// default) or not, and returns the previous setting: the benchmark
// measures what holding the P saves.
func SetHoldP(v bool) bool { return !noHold.Swap(!v) }
