package exutil_test

import (
	"fmt"
	"os"

	"github.com/xdpio/xdpio/examples/exutil"
)

// A program's command line: the common flags next to its own, checked
// before anything is opened; Exit turns the outcome into the exit status
// (here printed instead of exiting).
func Example() {
	var f exutil.Flags
	fs := exutil.NewFlagSet("prog", "prog -i IFACE [-port 9000] [flags]")
	f.Register(fs, "skb") // a program without an XDP program has no -skb
	port := fs.Int("port", 9000, "UDP port, 1-65535")
	check := func() error {
		if *port < 1 || *port > 65535 {
			return fmt.Errorf("-port %d: must be 1-65535", *port)
		}
		return nil
	}

	err := f.Parse(fs, []string{"-i", "veth0", "-q", "0-1", "-port", "7"}, check)
	cfg, _ := f.Config()
	fmt.Println(exutil.Exit(os.Stdout, "prog", err), f.Iface, cfg.Queues, *port)

	err = f.Parse(fs, []string{"-i", "veth0", "-port", "0"}, check)
	fmt.Println("status", exutil.Exit(os.Stdout, "prog", err))
	// Output:
	// 0 veth0 [0 1] 7
	// prog: -port 0: must be 1-65535
	// usage: prog -i IFACE [-port 9000] [flags]
	//
	// flags:
	//   -batch int
	//     	descriptors per batch, 1-4096: at most the 4096 frames of a default UMEM; the rings hold 2048 by default, so a larger batch never fills (default 64)
	//   -copy
	//     	force copy mode (default: zero-copy when the driver has it)
	//   -frames int
	//     	UMEM frames per queue (xsk.UMEMConfig.NumFrames), 16-1048576, of 4096 bytes each; 0 is the library's default, 4096 (16 MiB). Without CAP_IPC_LOCK the UMEMs of all queues must fit RLIMIT_MEMLOCK, often 8 MiB: at most 2048 frames on one queue
	//   -i string
	//     	interface to bind to (required)
	//   -nap duration
	//     	while packets flow, nap this long on a timer before polling the socket (xsk.SocketConfig.RXNap, e.g. 30us), not negative: fewer wake-ups, more packets/s, up to this much more latency
	//   -port int
	//     	UDP port, 1-65535 (default 9000)
	//   -q string
	//     	queues: all, or a list such as 0,1,3 or 0-3 (queue numbers 0-4095) (default "all")
	//   -t duration
	//     	stop after this long once the sockets are open (e.g. 10s), not negative; 0 runs until Ctrl-C
	// status 2
}
