//go:build !linux

package exutil

// attachOf returns "unknown attach": only Linux has XDP.
func attachOf(string) string { return "unknown attach" }
