//go:build !race

package xdpquic_test

const raceEnabled = false
