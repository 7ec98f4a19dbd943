//go:build race

package xdpnet_test

// raceEnabled: the race detector allocates on its own; allocation counts
// mean nothing under it.
const raceEnabled = true
