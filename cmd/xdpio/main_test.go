package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for xdpio where a command runs
// xdpio itself (the demo's server process).
func TestMain(m *testing.M) {
	if os.Getenv(demoServerEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
