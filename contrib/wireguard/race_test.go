//go:build race

package wireguard_test

// raceEnabled: the race detector slows the transfers several times;
// they are shortened under it.
const raceEnabled = true
