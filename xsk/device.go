package xsk

import "sync"

// Config describes the sockets Open creates on a device. The zero value
// binds one socket to every RX queue, each with its own UMEM of 4096
// frames of 4096 bytes, RX and TX rings, need_wakeup on, auto bind and
// attach modes, and redirects every frame.
type Config struct {
	// Queues lists the queues to bind; nil means every RX queue.
	Queues []int
	// UMEM configures each socket's UMEM (or the one shared UMEM). With
	// NumFrames left 0, each queue gets 4096 frames (with SharedUMEM, the
	// region 4096 per queue), or, when the process lacks CAP_IPC_LOCK and
	// its RLIMIT_MEMLOCK is too small for that, the largest power of two
	// that fits the limit (Stats.FramesOwned tells).
	UMEM UMEMConfig
	// SharedUMEM puts all sockets on one UMEM (XDP_SHARED_UMEM), so a
	// frame received on one queue can be transmitted on another without a
	// copy.
	SharedUMEM bool
	// Socket configures every socket.
	Socket SocketConfig
	// Program configures the XDP program (filter, RX hash, attach mode).
	Program ProgramConfig
	// NoProgram loads no XDP program: for TX-only sockets, or when the
	// caller attaches its own program and registers the sockets in its
	// XSKMAP (Socket.FD).
	NoProgram bool
}

// Device holds the sockets bound to the queues of one interface, the XDP
// program that feeds them, and their UMEMs.
type Device struct {
	name    string
	ifindex int
	sockets []*Socket
	umems   []*UMEM
	prog    *Program

	// mu orders Close against the runners' look at the sockets.
	mu sync.Mutex
}

// snapshot returns the sockets, or none once the device is closed.
func (d *Device) snapshot() []*Socket {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Socket(nil), d.sockets...)
}

// Sockets returns the sockets in queue order.
func (d *Device) Sockets() []*Socket { return d.sockets }

// Program returns the attached XDP program, or nil with Config.NoProgram.
func (d *Device) Program() *Program { return d.prog }

// Ifindex returns the interface index.
func (d *Device) Ifindex() int { return d.ifindex }

// Name returns the interface name.
func (d *Device) Name() string { return d.name }

// Close detaches the program and closes the sockets and UMEMs. Sockets may
// be blocked in Wait on other goroutines: Close wakes them.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var first error
	if d.prog != nil {
		if err := d.prog.Close(); err != nil {
			first = err
		}
		d.prog = nil
	}
	// Each close waits for an RCU grace period in the kernel: close the
	// sockets at once rather than one after another.
	var wg sync.WaitGroup
	for _, s := range d.sockets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
		}()
	}
	wg.Wait()
	d.sockets = nil
	for _, u := range d.umems {
		u.Close()
	}
	d.umems = nil
	return first
}
