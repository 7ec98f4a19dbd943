//go:build race

package coalesce_test

// raceEnabled: the race detector slows every goroutine several times, so
// timing-dependent comparisons (how much batching adds over a receiver
// that is already late) do not hold.
const raceEnabled = true
