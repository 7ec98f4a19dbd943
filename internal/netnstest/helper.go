package netnstest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartHelper runs this test binary again as the helper test named test
// (-test.run=^test$), with env added to its environment, and returns
// once the helper printed a line starting with ready (it fails tb if the
// helper prints a line starting with "error", exits, or takes over 20 s).
// The helper is killed when tb ends if it is still running; a test that
// kills it itself (a crash, on purpose) calls Process.Kill and Wait.
// The helper test reads its arguments with HelperArgs.
func StartHelper(tb testing.TB, test, ready string, env ...string) *exec.Cmd {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("start the helper %s: %v", test, err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		cancel()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, ready):
			go func() { // keep draining, so the helper never blocks on a full pipe
				for sc.Scan() {
				}
			}()
			return cmd
		case strings.HasPrefix(line, "error"):
			tb.Fatalf("helper %s: %s", test, line)
		}
	}
	tb.Fatalf("helper %s ended without printing %q", test, ready)
	return nil
}

// HelperArgs returns the fields of the environment variable env that
// StartHelper's caller set for a helper test, and skips the test when it
// is not set: the test then runs as an ordinary test of the package, not
// as a helper, and has nothing to do.
func HelperArgs(t *testing.T, env string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("skipping: a helper process, started by another test with %s set", env)
	}
	return strings.Fields(v)
}
