// Command xdpio tunes a NIC for AF_XDP (channels, rings, RSS, coalescing,
// features), runs the iperf-like benchmark, and processes captures with the
// software offloads. Run `xdpio --help` for the command list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdpio:", err)
		os.Exit(exitStatus(err))
	}
}

// exitStatus is the process's exit status after err: 0 for none, 2 for a
// usage error (as ethtool and iperf3 scripts expect), 1 for a failed
// operation.
func exitStatus(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}
