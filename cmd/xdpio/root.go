package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/internal/nsdo"
)

// globals holds the flags every subcommand shares.
type globals struct {
	json   bool   // --json: machine-readable output on stdout
	netns  string // --netns NAME: run inside that network namespace
	stdout io.Writer
	stderr io.Writer

	running bool // the command line was accepted and the command started
}

// subcommands lists the constructors of the top-level commands. Each file
// that adds a command appends to it from an init function, so commands can
// be developed side by side without touching this file.
var subcommands []func(g *globals) *cobra.Command

// usageError marks a bad invocation: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit status 2).
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "xdpio",
		Short:         "AF_XDP packet I/O toolkit: NIC tuning, benchmark, software offloads",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Cobra validates the command line (command names, argument
		// counts) before it runs this hook: an error before it is a usage
		// error, one after it comes from the operation.
		PersistentPreRun: func(*cobra.Command, []string) { g.running = true },
	}
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON on stdout")
	root.PersistentFlags().StringVar(&g.netns, "netns", "", "run the command inside the named network namespace")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w\n%s", err, c.UsageString())}
	})
	for _, mk := range subcommands {
		root.AddCommand(mk(g))
	}
	return root
}

// run parses args and runs the selected command. Errors from flag parsing
// and argument counts are usage errors.
func run(ctx context.Context, args []string) error {
	g := &globals{stdout: os.Stdout, stderr: os.Stderr}
	return runWith(ctx, g, args)
}

func runWith(ctx context.Context, g *globals, args []string) error {
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	_, err := root.ExecuteContextC(ctx)
	var ue *usageError
	if err != nil && !g.running && !errors.As(err, &ue) {
		return &usageError{err}
	}
	return err
}

// inNetns runs fn on a locked OS thread inside the namespace named by
// --netns, or directly when the flag is empty. Sockets and netlink handles fn
// opens stay in that namespace.
func (g *globals) inNetns(fn func() error) error {
	if g.netns == "" {
		return fn()
	}
	return nsdo.DoNamed(g.netns, fn)
}
