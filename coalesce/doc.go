// Package coalesce batches packet delivery on AF_XDP sockets the way NIC
// interrupt coalescing does, in software. A device's hardware coalescing
// (`ethtool -c/-C`) is package nic's (Device.Coalesce, SetCoalesce).
//
// # Software coalescing on AF_XDP sockets
//
// A Receiver wraps one xsk.Socket (one RX queue) and hands its frames to
// the application in batches, with the parameters of `ethtool -C`: a batch
// goes out when RXFrames frames are there or RXUsecs microseconds passed
// since its first frame was seen, whichever comes first; RXUsecs 0 (or
// RXFrames 1) delivers at once. No frame waits longer than RXUsecs (plus
// the kernel's wake-up latency): that is the bound the application buys
// its CPU savings with.
//
// How it waits decides what it costs. Idle, the receiver sleeps in the
// kernel (ppoll on the socket, with a nanosecond timeout) and is woken by
// the first frame. With a batch open it sleeps on a timer (ppoll with a
// nanosecond timeout on an eventfd that only Close writes)
// rather than on the socket, which would wake it for every frame: until
// the deadline, or less when the measured rate says RXFrames will be there
// sooner. Under steady traffic it sleeps a whole window at a time without
// waiting for a first frame, like a NIC's coalescing timer re-armed under
// load: one wake-up per window. When not even one more frame is expected
// before the deadline, the batch goes at once.
//
// What a wake-up costs is mostly the kernel's (scheduling, the timer, and
// on a virtual machine the hypervisor: tens of microseconds of CPU each on
// this project's test machine), so the CPU per packet falls with the
// frames each wake-up collects and with what a wake-up costs. Three
// things help: the timed sleeps ask for whole windows (a frame waits
// rx-usecs plus the wake-up latency, which RXStats.SleepLateness shows),
// they keep the goroutine's P instead of handing it to another thread for
// each window (xsk.Socket.SleepShort; as long as one P of GOMAXPROCS stays
// free for the rest of the program, so give the process one P more than
// it has receiving goroutines), and the receiver reads the clock once per
// look at the ring (without a vDSO clock, each read is a syscall).
//
// A GroupReceiver is a Receiver for the sockets of several queues owned by
// one goroutine: one policy, one timer and one kernel wait (xsk.Poller)
// for all of them. Where every queue has a CPU to itself, a goroutine per
// queue is the usual shape; with fewer CPUs than busy threads, one thread
// that wakes once per window for all the queues costs less and waits less
// for a CPU. In this package's benchmark (2 CPUs, a sender pacing on one,
// a 2-queue receiver) it took rx-usecs 50 from 0.45–0.56 to 0.35–0.39 of
// the CPU per packet of batching off, and cut the frames later than
// rx-usecs + 100µs by about half.
//
// A Transmitter batches the other way: frames submitted one by one wait
// until TXFrames are pending or TXUsecs passed since the oldest, then go
// to the TX ring together with one kick (made only when the kernel asks,
// need_wakeup); completions are reclaimed in batches; Flush sends now.
//
// With Params.Adaptive, the receiver chooses its rx-usecs from the table
// Profiles(RXUsecs, RXFrames) the way the kernel's net_dim does: every 64
// batches (and 50ms at least) it compares packet rate and wake-ups per packet with the
// previous sample, keeps a step that helped, turns back from one that did
// not, and parks on the best profile until the traffic changes.
// RXStats.Profile shows its choice.
//
// RXStats and TXStats count batches, frames per batch (a histogram),
// wake-ups, timer expiries, flushes and the time each frame waited (a
// histogram); the socket's xsk.Stats counts the kicks. Together they show
// what a setting costs and what it saves.
// The waits use a Clock, which tests replace to check batch boundaries and
// the bound exactly. Call LockThread in the goroutine that owns the socket
// to lower its timer slack (50µs by default) to 1ns.
package coalesce
