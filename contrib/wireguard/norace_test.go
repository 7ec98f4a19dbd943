//go:build !race

package wireguard_test

const raceEnabled = false
