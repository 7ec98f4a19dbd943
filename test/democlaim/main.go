// Command democlaim writes README.md's claim about the demo from the
// demo itself: it builds xdpio from this checkout, runs `xdpio bench demo
// --json` -runs times (as `make demo` runs it), and rewrites the sentence
// between the README's <!-- demo-claim --> and <!-- /demo-claim -->
// markers with the median and range of what the runs measured: xsk's
// received packets/s and machine CPU time per packet over the kernel
// socket's, xsk's loss in the steady state, and in how many runs the
// sender was the limit (all as the demo computed them). It prints the
// claim before and after. `make demo-claim` runs it with 5 runs; run it
// on a quiet machine, as root.
//
// -from FILE... takes recorded --json outputs instead of running the
// demo; -n prints the new claim without writing the README.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "democlaim:", err)
		os.Exit(1)
	}
}

func run() error {
	runs := flag.Int("runs", 5, "how many times to run the demo")
	readme := flag.String("readme", "README.md", "the README whose claim to rewrite")
	dry := flag.Bool("n", false, "print the new claim, do not write the README")
	from := flag.Bool("from", false, "read the demo's --json outputs from the files named as arguments instead of running it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	old, err := os.ReadFile(*readme)
	if err != nil {
		return err
	}
	if _, _, err := findClaim(string(old)); err != nil {
		return fmt.Errorf("%s: %w", *readme, err)
	}
	var outputs [][]byte
	if *from {
		if flag.NArg() == 0 {
			return errors.New("-from: name the --json files")
		}
		for _, f := range flag.Args() {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			outputs = append(outputs, b)
		}
	} else {
		if *runs < 1 || *runs > 50 || flag.NArg() > 0 {
			return errors.New("usage: democlaim [-runs 1-50] [-readme FILE] [-n], or democlaim -from FILE [FILE ...]")
		}
		if outputs, err = runDemo(ctx, *runs); err != nil {
			return err
		}
	}
	var rs []measure
	for i, out := range outputs {
		r, err := parseRun(out)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "democlaim: run %d: xsk %.2f× the socket's packets/s, %.2f× its CPU per packet, %.1f%% lost in the steady state (startup left out: %v), sender the limit: %v\n",
			i+1, r.Ratio, r.CPU, r.Lost, r.StartupExcluded, r.SenderLimit)
		rs = append(rs, r)
	}
	c, err := summariseRuns(rs)
	if err != nil {
		return err
	}
	updated, before, err := replaceClaim(string(old), c.text())
	if err != nil {
		return err
	}
	fmt.Printf("before: %s\nafter:  %s\n", bytes.Join(bytes.Fields([]byte(before)), []byte(" ")), c.text())
	if *dry {
		return nil
	}
	if updated == string(old) {
		fmt.Printf("%s unchanged\n", *readme)
		return nil
	}
	if err := os.WriteFile(*readme, []byte(updated), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s rewritten\n", *readme)
	return nil
}

// runDemo builds xdpio from the module this runs in and runs its demo n
// times, returning each run's --json output. The demo's progress goes to
// stderr.
func runDemo(ctx context.Context, n int) ([][]byte, error) {
	dir, err := os.MkdirTemp("", "democlaim")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "xdpio")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xdpio")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/xdpio (run from the repository's root): %w", err)
	}
	var outs [][]byte
	for i := 1; i <= n; i++ {
		fmt.Fprintf(os.Stderr, "democlaim: run %d of %d\n", i, n)
		var out bytes.Buffer
		demo := exec.CommandContext(ctx, bin, "bench", "demo", "--json")
		demo.Stdout, demo.Stderr = &out, os.Stderr
		if err := demo.Run(); err != nil {
			return nil, fmt.Errorf("xdpio bench demo, run %d: %w\n%s", i, err, out.Bytes())
		}
		outs = append(outs, out.Bytes())
	}
	return outs, nil
}
