// Package faults injects faults on the real kernel into the programs a
// user runs: the examples rxdrop, txonly and l2fwd, and `xdpio bench
// server` on its AF_XDP data plane with a real iperf3 client. It holds no
// code of its own, only tests (Linux, root).
//
// Each program is built once per test binary run and started as a
// subprocess inside namespace B of a fresh netnstest pair (4-queue veth),
// with a bounded -t and a context timeout; traffic comes from A (an XDP
// live-frames generator, or iperf3) and is counted on A (an XDP counter)
// where the program sends. Every program meets every fault, in subtests
// named program/fault:
//
//   - link-down: B's veth goes down for 2 s and comes up again. The
//     program keeps running and traffic flows again after link-up; it
//     exits 0 at its -t.
//   - device-deleted: B's veth is deleted (`ip link del`, which takes A's
//     end with it). The examples exit 1 within a second, naming the
//     device error. The bench server keeps running: the test ends at once,
//     reported failed with the device error, and the server serves on.
//   - netns-deleted: `ip netns del` of B while the program runs. The
//     process (and the test's own handle) keep the namespace and its veth
//     alive: the program goes on receiving or sending and exits 0 at -t.
//   - channels: `ethtool -L veth-b rx 2 tx 2` under sockets bound to all 4
//     queues. The kernel refuses it; the program keeps working.
//   - sigkill: kill -9. The XDP program, attached through a bpf_link,
//     is gone from the interface within a second, and a new instance
//     binds the same queues at once.
//   - memlock: RLIMIT_MEMLOCK of 8 MiB without CAP_IPC_LOCK (prlimit,
//     setpriv). The default UMEM is sized to fit and the program works
//     (the bench server serves a clean test); an explicit -frames 4096 on
//     4 queues exits 1 naming RLIMIT_MEMLOCK.
//
// Every run is checked for a hang (the context timeout must never fire),
// for an XDP program left on the interface after the program exited, and
// for frame accounting where the program prints it: rxdrop's received +
// kernel dropped + lost in veth = frames the generator sent; txonly's
// submitted = sent + not completed, and the peer's count at least what was
// sent less what veth dropped; l2fwd forwarded no more than it was sent,
// and the peer counted what it forwarded less what veth dropped. Each
// subtest logs one row of a summary table, and the whole table is logged
// at the end. The one case that mostly waits (the bench server's device
// deleted, about 16 s) runs in TestFaultsSlow, in parallel with
// TestFaults.
//
// TestOpenCloseKeepsFDs opens and closes all 4 queues of a veth up to 500
// times in the test process (for 10 s by default: a cycle takes about
// 140 ms; XDPIO_FAULTS_FD_CYCLES=500 runs all of them, about 70 s) and
// checks that no file descriptor and no XDP program is left behind.
package faults
