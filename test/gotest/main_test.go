package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gotest on a package with a passing, a failing and two skipped tests
// (go test itself produces the events): go test's exit status, the
// failure's output, no passing test's output, and the skips with their
// reasons, on stdout and in -skips' file.
func TestGotestFixture(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	cmd := exec.Command("go", "run", ".", "-skips", skips, "-count=1", "./testdata/fixture")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1 (a test failed)\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{"--- FAIL: TestFails", "the failure's message", "FAIL\tgithub.com/xdpio/xdpio/test/gotest/testdata/fixture",
		"2 tests skipped", "fixture TestSkipsWithReason: needs a NIC this machine lacks", "fixture TestSkipsBare: (no reason given)"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "passing output") || strings.Contains(s, "=== RUN") {
		t.Errorf("output shows a passing test's lines:\n%s", s)
	}
	b, err := os.ReadFile(skips)
	if err != nil || strings.Count(string(b), "\n") != 2 {
		t.Errorf("-skips file: %q, %v; want the 2 skips", b, err)
	}
}
