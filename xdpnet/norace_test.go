//go:build !race

package xdpnet_test

const raceEnabled = false
