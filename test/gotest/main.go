// Command gotest runs go test with -json and prints what go test prints
// without -v — each package's result, and the whole output of every test
// that failed — followed by every test that was skipped and why. make test
// runs it, so that a CI log lists its skips: under XDPIO_REQUIRE_PRIV=1 a
// skip must name the reason this kernel or machine cannot run the test.
//
//	go run ./test/gotest [-skips FILE] [go test flags and packages]
//
// Its exit status is go test's. -skips also writes the skips, one per
// line, "package test: reason", to FILE.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

func main() {
	args := os.Args[1:]
	skipsFile := ""
	if len(args) >= 2 && args[0] == "-skips" {
		skipsFile, args = args[1], args[2:]
	}
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	s := newSummary(os.Stdout)
	if err := s.read(out); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
	}
	err = cmd.Wait()
	s.printSkips(os.Stdout)
	if skipsFile != "" {
		if werr := os.WriteFile(skipsFile, []byte(s.skipLines()), 0o644); werr != nil {
			fmt.Fprintln(os.Stderr, "gotest:", werr)
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
}

// event is one line of go test -json (test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// skip is a skipped test and the reason its output gave.
type skip struct{ pkg, test, reason string }

// summary turns the events into go test's terse output as they come,
// keeping each running test's output until it ends (printed if it failed)
// and the skips for the end.
type summary struct {
	w       io.Writer
	pending map[string][]string // package + test → output lines
	skips   []skip
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, pending: map[string][]string{}}
}

// read consumes go test -json's output until it ends.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(s.w, sc.Text()) // not an event: build output, say
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		if e.Test == "" {
			// A package's own lines: its result, its build errors, and
			// what go test prints without -v.
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- PASS") &&
				!strings.HasPrefix(e.Output, "--- SKIP") && e.Output != "PASS\n" {
				io.WriteString(s.w, e.Output)
			}
			return
		}
		s.pending[key] = append(s.pending[key], e.Output)
	case "fail":
		if e.Test != "" {
			for _, l := range s.pending[key] {
				if !strings.HasPrefix(l, "=== ") {
					io.WriteString(s.w, l)
				}
			}
		}
		delete(s.pending, key)
	case "skip":
		if e.Test != "" {
			s.skips = append(s.skips, skip{e.Package, e.Test, reason(s.pending[key])})
		}
		delete(s.pending, key)
	case "pass":
		delete(s.pending, key)
	}
}

// reason finds the message of a skipped test's output: the lines after
// its "=== RUN" and before its "--- SKIP", without file:line prefixes.
func reason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		if i := strings.Index(t, ".go:"); i > 0 && !strings.Contains(t[:i], " ") {
			if j := strings.Index(t[i:], ": "); j > 0 {
				t = t[i+j+2:]
			}
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " / ")
}

// skipLines lists the skips, sorted, one per line.
func (s *summary) skipLines() string {
	sort.Slice(s.skips, func(i, j int) bool {
		a, b := s.skips[i], s.skips[j]
		return a.pkg+" "+a.test < b.pkg+" "+b.test
	})
	var b strings.Builder
	for _, k := range s.skips {
		fmt.Fprintf(&b, "%s %s: %s\n", k.pkg, k.test, k.reason)
	}
	return b.String()
}

// printSkips prints how many tests were skipped, and each with its reason.
func (s *summary) printSkips(w io.Writer) {
	fmt.Fprintf(w, "%d tests skipped\n", len(s.skips))
	io.WriteString(w, s.skipLines())
}
