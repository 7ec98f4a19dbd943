// Package exutil holds what the example programs (rxdrop, txonly, l2fwd,
// udpecho) share: the common flags and their checks, queue lists, exit
// statuses, signal handling, the line that says a program is ready
// (Ready: scripts wait for it before they send) and the once-a-second
// per-queue report.
//
// It is part of the examples, not of xdpio's API, and it is public so
// that a program copied out of examples/ still builds in another module:
// it imports github.com/xdpio/xdpio/examples/exutil like any other
// package. Copy the package too if you would rather not depend on it.
//
// A program registers the common flags next to its own, parses, and hands
// its error to Exit, which gives every example the same behaviour: -h
// prints the usage and exits 0, a bad command line prints the error and
// the usage and exits 2, a failure prints the error and exits 1.
//
//	var f exutil.Flags
//	fs := exutil.NewFlagSet("prog", "prog -i IFACE [flags]")
//	f.Register(fs)
//	err := f.Parse(fs, os.Args[1:], nil)
//	...
//	os.Exit(exutil.Exit(os.Stderr, "prog", err))
package exutil
