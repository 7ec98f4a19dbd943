// Package xsk gives a Go program one AF_XDP socket per RX queue of a
// network interface: packets skip the kernel's network stack and land in
// memory the program shares with the kernel.
//
// The lifecycle, in five lines (the rings are the kernel's):
//
//	UMEM      one memory region, split into frames, shared with the kernel
//	RX        fill ring (frames we lend) → kernel writes a packet → RX ring (frames we get back)
//	TX        TX ring (frames we send) → kernel sends → completion ring (frames free again)
//	Program   an XDP program redirects each frame of queue q to socket q (or to the kernel stack)
//	Socket    one per queue, owned by one goroutine; Batch moves frames between rings and the app
//
// Open does all of it for a device, and Device.Receive runs the receive
// loop the package recommends:
//
//	dev, err := xsk.Open("eth0", xsk.Config{
//		Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}},
//	})
//	...
//	defer dev.Close()
//	err = dev.Receive(ctx, xsk.RunConfig{}, func(s *xsk.Socket, b *xsk.Batch) {
//		for i := range b.Len() {
//			handle(b.Frame(i)) // valid until the handler returns
//		}
//	})
//
// # The runner
//
// Device.Receive and Device.Send (the runner) are the loops to start from.
// They pick the shape from the CPUs the process may use (GOMAXPROCS and
// its CPU set) and deal the sockets to that many goroutines, each locked
// to its thread and waiting on its share at once through a Poller: a
// receiver takes two CPUs per goroutine (one for the goroutine, one for
// the kernel's softirq work that fills its rings), a sender one (in copy
// mode its kicks do the kernel's work in its own syscalls). On 2 CPUs, 4
// queues are received by one goroutine and sent by two. RunConfig.Shape
// overrides it: ShapePerQueue, ShapeOne.
//
// A receiver that finds its rings empty naps NAPI style (Napper): while
// frames arrive fast enough that a nap of up to RunConfig.Nap (100 µs by
// default) gathers at least NapMinFrames of them, it sleeps on a timer
// and takes them in one batch; below that rate it waits in poll and wakes
// for each frame, so a lone packet waits no longer than with a plain poll
// loop. A nap never lasts longer than a quarter of the RX ring takes to
// fill. The runner's threads ask for timers without slack (1 ns instead
// of 50 µs), so a nap ends on time. Stats.Naps counts the naps.
//
// The sender reclaims completions before every allocation, kicks the
// kernel once per batch (raising the socket's TX budget to the batch in
// copy mode), waits out a link that is down (RunConfig.LinkChange tells)
// and stops on a device that is gone. Both stop on ctx and return the
// first error a socket meets. The raw calls below stay for loops of one's
// own.
//
// # Frame ownership
//
// A frame is in exactly one place: a socket's free pool, a ring the kernel
// owns (fill, RX in flight, TX, completion), or a Batch the application
// holds. Receive and Alloc move frames into a Batch; Release (to the fill
// ring), Transmit (to the TX ring) and Free (to the pool) move them out and
// empty the batch, so a frame cannot be reached through it afterwards. The
// slices Batch.Frame and Batch.Buffer return alias the UMEM and are valid
// only until then: copy what must live longer. Socket.Stats reports how
// many frames are in each place, and their sum is constant.
//
// # Who feeds the fill ring
//
// The kernel receives only into frames lent to it through the fill ring,
// and the library keeps that ring fed; the application never has to:
//
//   - Release puts the released frames on the fill ring, and tops it up
//     from the pool in the same submission.
//   - Receive, Wait (for RX), Poller.WaitRX and Complete first lend the
//     fill ring what it has room for from the pool.
//
// So frames that come back to the pool any other way — completed
// transmissions (a forwarder transmits what it received), Free, frames
// that did not fit the fill ring at Release — are lent to the kernel again
// at the next of those calls, whatever mix of Release, Transmit and
// Complete the application makes. The fill ring holds at most
// SocketConfig.FillRingSize frames. On a socket with both an RX and a TX
// ring, half of its frames stay in the pool for Alloc: the pool never
// lends below that, so a sender always finds frames, even under an RX
// flood or with a UMEM smaller than the fill ring. (Released frames still
// go to the fill ring first: a forwarder's frames go round.)
// SocketConfig.TXFrames instead sets TX frames apart in a pool of their
// own, which the fill ring never takes from.
//
// Stats.TXFrames counts a frame as sent when the kernel completed it
// (it came back through the completion ring), not when it was put on the
// TX ring (Stats.TXSubmitted); the difference is on its way (FramesTX).
//
// # Faults
//
//   - The device goes away (deleted; a namespace removed while no process
//     keeps it alive): the kernel unbinds the socket. Wait, Poller.WaitRX
//     and the TX calls return an error matching ErrNoDevice within a
//     quarter second, and so does Socket.Err; Receive finds nothing more.
//     Close still works.
//   - The link goes down: receiving just stops, and resumes when it is up.
//     Transmit, Flush and Kick return an error matching ErrLinkDown at
//     once, and leave the frames on the TX ring; they leave when the link
//     is up and a later call wakes the kernel, so a sender that retries
//     after a pause resumes by itself.
//
// # Concurrency
//
// One goroutine owns a socket and its rings; no locks are taken on the hot
// path. Ring indices shared with the kernel are read and written with
// sync/atomic, once per batch, with cached copies in between (as libxdp
// does). Close may be called from another goroutine to wake a blocked Wait.
// Stats may be read from any goroutine.
//
// # Modes
//
// Zero-copy needs driver support; copy mode works everywhere (veth has
// native XDP, copy mode). BindAuto asks for zero-copy and accepts copy;
// Socket.ZeroCopy tells what the kernel granted, and BindZeroCopy fails
// with ErrNotSupported where it cannot be had. Whether a device offers it
// is in netdev's dev-get (nic.Device.XDPFeatures: ZeroCopy, ZCMaxSegs;
// `xdpio queues show DEV` prints it).
//
// Drivers xdpio has been granted zero-copy on, in its hardware lab
// (test/lab): virtio-net on Linux 7.3 (Debian's trixie-backports kernel),
// with qemu's device offering VIRTIO_F_ACCESS_PLATFORM (iommu_platform=on;
// without it the driver's queues have no DMA device and the bind fails
// with EINVAL), RX and TX, aligned and unaligned chunks, a shared UMEM
// across queues; one segment only (xdp-zc-max-segs 1), so multi-buffer
// zero-copy is refused. virtio-net on 6.12 has part of the code but does
// not advertise xsk-zerocopy; veth and netdevsim have no zero-copy. In
// zero-copy mode the frames the socket lends the kernel are what the
// device's RX queue is filled from: give the fill ring more room than the
// device's RX ring (`ethtool -g`), and keep frames flowing back, because
// virtio-net recovers only in part once its fill ring ran dry (the lab
// reports how much). With need_wakeup (the
// default) the library makes a syscall only when the kernel asks for one.
// Alone on an interface, the XDP program is attached through a bpf_link,
// so it disappears from the interface when the process exits or is killed.
//
// # Choosing the frames
//
// ProgramConfig selects what the program redirects: hand-built rules
// (Filter), a tcpdump expression (Expr, compiled in pure Go by package
// filter), or classic BPF (BPF, e.g. from libpcap); frames that do not
// match go to the kernel stack. Verdicts runs frames through that program
// in the kernel's test run, attaching nothing. A program of the caller's
// own can make the decision instead (UserProgram), redirecting into an
// XSKMAP xdpio fills (UserMap: key the RX queue, value the socket); with
// UserMap alone xdpio only fills the map of a program attached by someone
// else.
//
// # Sharing the interface with other XDP programs
//
// Alone on an interface, xdpio attaches its program through a bpf_link.
// Where libxdp's multi-program dispatcher is attached (xdp-loader,
// xdp-filter, or any libxdp user loaded it), Open joins it as one more
// program (ProgramConfig.Share, ShareAuto by default), following libxdp's
// documented protocol: a new dispatcher with one more slot, xdpio's
// program loaded as an freplace extension of its slot, everything pinned
// in bpffs (/sys/fs/bpf/xdp, or $LIBXDP_BPFFS), and an atomic replace of
// the old dispatcher under libxdp's lock. `xdp-loader status` lists it as
// xdpio_redirect; programs run in order of ProgramConfig.Priority (libxdp's
// default 50; xdp-filter's is 10, so its rules apply first); frames
// xdpio's program does not take go on (XDP_PASS) to the next program. libxdp's tools may add and remove their programs while xdpio's
// sockets run, and Close takes xdpio's program out again. ShareDispatcher
// creates a dispatcher when none is attached, so that libxdp users can
// join xdpio later; ShareExclusive never joins. Two Devices (in one
// process or two) can split an interface's queues (Config.Queues) when
// both use ShareDispatcher: a queue takes one socket, and a frame of a
// queue the first Device has no socket for passes its program on to the
// second's. Any other program already
// attached makes Open fail with ErrBusy naming it (id, name, mode).
//
// What a dispatcher cannot do: RX hash metadata (RXHash) needs a
// device-bound program and is refused in one; a device-bound dispatcher
// (libxdp's XDP_ATTACH_DEVBIND) is refused; multi-buffer frames reach the
// sockets only when every program in the dispatcher is frags-aware
// (libxdp then loads the dispatcher with BPF_F_XDP_HAS_FRAGS, as xdpio
// does). Joining needs a kernel that loads freplace (BPF_PROG_TYPE_EXT)
// programs: some restricted kernels refuse them even to root, and then no
// libxdp dispatcher works (libxdp falls back to a single program), which
// the error says. A process killed before Close leaves its program pinned
// in the dispatcher; with its sockets gone it passes every frame on.
// `xdp-loader unload DEV -i ID` removes it.
//
// # Waiting for packets
//
// At high packet rates the cost of a receiver is mostly how it waits, not
// Receive and Release (a few nanoseconds per packet). A goroutine blocked
// in Wait sits on the socket's wait queue, and then every driver flush to
// the socket takes the wait-queue lock and wakes it. Two options change
// that:
//
//   - SocketConfig.RXNap: while packets flow, Wait sleeps on a timer, off
//     the wait queue, and polls only when a nap found nothing. It trades up
//     to RXNap of latency for far fewer wake-ups; in cmd/xskbench on veth
//     it cut the receiver's CPU per packet by about half.
//   - SocketConfig.BusyPoll: the receiving goroutine runs the driver's NAPI
//     itself. It needs a driver whose XDP receive queues carry a NAPI ID
//     (Socket.NAPIID tells, after the first packet); veth's do not, and there
//     the library makes no busy-poll syscalls at all.
//
// One goroutine may own the sockets of several queues and wait on all of
// them at once with a Poller (package coalesce's GroupReceiver does): on a
// machine with fewer CPUs than queues that costs fewer wake-ups than a
// goroutine per queue.
//
// Batching policies that hold a batch open for a few microseconds (package
// coalesce) sleep with Socket.SleepShort: a timer wait that keeps the
// goroutine's P and that Close interrupts; longer waits go through Sleep.
//
// A receiving goroutine that locks its OS thread (as benchmarks and
// pinned workers do) spends its waits in system calls; when there are
// fewer Ps (GOMAXPROCS) than such goroutines plus the rest of the program,
// the runtime hands Ps around on every wake-up. Give it at least one P per
// locked receiver plus one.
//
// # Checksums on veth
//
// Frames sent by the local kernel over veth usually carry a partial UDP or
// TCP checksum (CHECKSUM_PARTIAL: only the pseudo-header sum), because
// veth offers TX checksum offload and never computes it. Reflecting such a
// frame back with AF_XDP sends a wrong checksum. Turn tx-checksumming off on
// the sending side (`ethtool -K veth0 tx off`) or fill the checksum with
// package offload.
package xsk
