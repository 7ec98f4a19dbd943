package flagtest

import (
	"testing"

	"github.com/xdpio/xdpio/examples/exutil"
)

// Given reads back what a command line said, bare booleans as "true".
func TestGiven(t *testing.T) {
	var f exutil.Flags
	fs := exutil.NewFlagSet("ex", "ex")
	f.Register(fs)
	given, rest, err := Given(fs, []string{"-batch", "0x10", "-copy", "-t=1s", "-batch", "8", "x", "-q", "1"})
	if err != nil || given["batch"] != "8" || given["copy"] != "true" || given["t"] != "1s" || given["q"] != "" || len(rest) != 3 {
		t.Fatalf("Given = %v, %q, %v", given, rest, err)
	}
	if n, err := GivenInt(map[string]string{"batch": "0x10"}, "batch", 64); n != 16 || err != nil {
		t.Fatalf("GivenInt(0x10) = %d, %v", n, err)
	}
}
