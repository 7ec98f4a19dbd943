//go:build linux

package asavieplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	asavie "github.com/asavie/xdp"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/asaviefix"
	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/nexthop"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xsk"
)

// DataPlane carries a test's UDP streams over AF_XDP sockets of
// github.com/asavie/xdp v0.3.3, the Go AF_XDP library xdpio is compared
// with. It has the shape of xskplane.DataPlane, so the two run the same tests
// side by side: one asavie socket (with its own UMEM) per RX queue of
// Iface, received frames checked and parsed, and replies built, by the
// same checks as xskplane.DataPlane's (package offload's parser, checksum
// verdicts and builder, accepting the same unfinished checksums), and the next
// hop from the kernel's route and neighbour tables (package
// internal/nexthop, as xdpnet's).
//
// The sockets are driven the way asavie's documentation shows: Fill the
// fill ring with GetDescs, Receive, Transmit descriptors from GetDescs,
// Complete, and poll the socket's FD when there is nothing to do. It is
// made as fair as the library allows: the same ring sizes, UMEM size and
// batch (64 descriptors) as xskplane.DataPlane's defaults, the fill ring topped
// up once a batch of slots is free rather than before every receive, and
// poll only when every ring is empty.
//
// The XDP program is xdpio's (xsk.NewProgram), with asavie's sockets put
// into its XSKMAP: asavie's own program (asavie.NewProgram) redirects
// every frame of a queue, the iperf3 control connection, ARP and
// neighbour discovery included, which would break the test; the filtering
// variant of its examples matches on the IP protocol only. It also
// attaches through the legacy netlink call after removing whatever
// program the interface had. With the same program in front of both
// backends, the comparison measures the socket libraries alone; the
// program is attached through a bpf_link, so it goes away with the
// process.
//
// asavie/xdp v0.3.3 leaves its rings mapped when a socket is closed;
// Close releases them with package internal/asaviefix. It also leaks the
// rings (and the UMEM's pinned pages) of a socket whose bind fails, which
// asaviefix.NewSocket cleans up.
type DataPlane struct {
	// Iface is the interface to bind to.
	Iface string
	// Do, if set, runs the socket setup (for example inside a network
	// namespace). Nil runs it directly.
	Do func(func() error) error
	// Options are asavie's per-socket options. Zero fields take
	// xskplane.DataPlane's defaults: 4096 frames of 4096 bytes and rings of 2048
	// descriptors.
	Options asavie.SocketOptions
	// Batch is the most descriptors taken from the RX ring or put on the
	// TX ring at once, and the number of free fill-ring slots that
	// triggers a refill. Default 64, the engine's batch.
	Batch int
	// Attach chooses where the XDP program runs (xsk.AttachAuto: driver
	// mode, else generic).
	Attach xsk.AttachMode
	// OnClose, if set, is called when a server endpoint or the client's
	// shared sockets close, with what each RX queue's socket received
	// (from asavie's Stats: frames taken from the RX ring, and the
	// kernel's rx_dropped + rx_ring_full), in queue order.
	OnClose func([]plane.QueueCount)
	// Placer, if set, chooses each dialled stream's source port (within
	// the client's block of 256) so it lands on a chosen RX queue of the
	// server's NIC, as xskplane.DataPlane.Placer does.
	Placer plane.Placer

	cmu    sync.Mutex
	client *asavieShared
}

func (d *DataPlane) options() (asavie.SocketOptions, int, error) {
	o := d.Options
	def := func(v *int, n int) {
		if *v == 0 {
			*v = n
		}
	}
	def(&o.NumFrames, 4096)
	def(&o.FrameSize, 4096)
	def(&o.FillRingNumDescs, 2048)
	def(&o.CompletionRingNumDescs, 2048)
	def(&o.RxRingNumDescs, 2048)
	def(&o.TxRingNumDescs, 2048)
	batch := d.Batch
	if batch == 0 {
		batch = plane.BatchSize
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"fill ring", o.FillRingNumDescs}, {"completion ring", o.CompletionRingNumDescs}, {"RX ring", o.RxRingNumDescs}, {"TX ring", o.TxRingNumDescs}} {
		if f.v < 0 || f.v&(f.v-1) != 0 {
			return o, 0, fmt.Errorf("asavie: %s size %d: must be a power of two: %w", f.name, f.v, errs.ErrNotSupported)
		}
	}
	if o.FrameSize < 2048 || o.FrameSize > os.Getpagesize() || o.FrameSize&(o.FrameSize-1) != 0 {
		return o, 0, fmt.Errorf("asavie: frame size %d: must be a power of two from 2048 to the page size: %w", o.FrameSize, errs.ErrNotSupported)
	}
	if o.NumFrames < o.FillRingNumDescs+batch {
		return o, 0, fmt.Errorf("asavie: %d frames: need at least the fill ring (%d) plus a batch (%d): %w", o.NumFrames, o.FillRingNumDescs, batch, errs.ErrNotSupported)
	}
	if batch <= 0 || batch > o.RxRingNumDescs || batch > o.TxRingNumDescs {
		return o, 0, fmt.Errorf("asavie: batch %d: must be between 1 and the RX and TX ring sizes: %w", batch, errs.ErrNotSupported)
	}
	return o, batch, nil
}

// asavieSock is one asavie socket and what this package keeps about it.
// mu serialises every use of s: asavie's frame bookkeeping is shared by
// its RX and TX paths and not safe for concurrent use.
type asavieSock struct {
	s     *asavie.Socket
	fd    int
	queue int
	batch int
	txMax int

	mu sync.Mutex
	// rx holds the descriptors of the last Receive; next of them have
	// been handed out. asavie counts a frame free as soon as Receive
	// returns it, so frames in rx are kept out of Fill (by refilling only
	// before the next Receive) and out of TX (by skipping them).
	rx    []asavie.Desc
	next  int
	bytes uint64
}

// receive tops the fill ring up and takes up to max frames from the RX
// ring. The caller holds a.mu and has handed out all of a.rx.
func (a *asavieSock) receive(max int) {
	if free := a.s.NumFreeFillSlots(); free >= a.batch {
		a.s.Fill(a.s.GetDescs(free))
	}
	a.rx = append(a.rx[:0], a.s.Receive(max)...)
	a.next = 0
	for _, d := range a.rx {
		a.bytes += uint64(d.Len)
	}
}

// receiving reports whether frame addr is one of a.rx's.
func (a *asavieSock) receiving(addr uint64, frameSize uint64) bool {
	for _, d := range a.rx {
		if d.Addr/frameSize == addr/frameSize {
			return true
		}
	}
	return false
}

// send builds up to len(msgs) frames with build and transmits them, a
// batch at a time; it returns how many were queued for the kernel. The
// caller holds a.mu.
func (a *asavieSock) send(n int, frameSize uint64, build func(i int, frame []byte) (int, error)) (sent int, err error) {
	defer func() {
		// asavie panics when sendto fails with anything but EINTR,
		// EAGAIN or EBUSY.
		if p := recover(); p != nil {
			err = fmt.Errorf("asavie transmit on queue %d: %v", a.queue, p)
		}
	}()
	if c := a.s.NumCompleted(); c > 0 {
		a.s.Complete(c)
	}
	for sent < n {
		k := min(n-sent, a.batch, a.s.NumFreeTxSlots())
		if k == 0 {
			return sent, plane.ErrBackpressure
		}
		descs := a.s.GetDescs(k + len(a.rx))
		j := 0
		for _, d := range descs {
			if j < k && (len(a.rx) == 0 || !a.receiving(d.Addr, frameSize)) {
				descs[j] = d
				j++
			}
		}
		descs = descs[:j]
		if len(descs) == 0 {
			return sent, plane.ErrBackpressure // every frame is in flight
		}
		for i := range descs {
			l, err := build(sent+i, a.s.GetFrame(descs[i]))
			if err != nil {
				return sent, err
			}
			descs[i].Len = uint32(l)
		}
		// Transmit kicks once; in copy mode a kick sends at most the
		// kernel's TX budget (32 frames). Kick on while the kernel takes
		// frames, so that the batch leaves now: with one kick per batch
		// (xsk.Socket.Transmit's behaviour without TXBudget) the rest
		// waits for the next send, which a paced sender makes late and
		// the last batch of a test makes too late for the peer (it
		// arrives after iperf3 closed its socket), and a sender at full
		// speed fills the TX ring and backs off.
		done := a.s.Transmit(descs)
		a.kick()
		sent += done
		if done < len(descs) {
			return sent, plane.ErrBackpressure
		}
	}
	return sent, nil
}

// kick has the kernel send what is on the TX ring. In copy mode one
// sendto sends at most a budget of frames (32 by default) and asavie's
// Transmit kicks once: without more kicks the rest of a batch would wait
// for the next Transmit. Transmit of no descriptors is asavie's kick.
func (a *asavieSock) kick() {
	for free := a.s.NumFreeTxSlots(); free < a.txMax; {
		a.s.Transmit(nil)
		now := a.s.NumFreeTxSlots()
		if now == free {
			return // the device is busy; the next send kicks again
		}
		free = now
	}
}

// openAsavie opens one asavie socket per RX queue of iface and xdpio's XDP
// program with filter, registering the sockets in its XSKMAP. The caller
// runs it in the interface's namespace.
func (d *DataPlane) openAsavie(ifi *net.Interface, filter []xsk.Rule) (_ *asavieSet, err error) {
	opts, batch, err := d.options()
	if err != nil {
		return nil, err
	}
	nq, err := nic.RXQueues(ifi.Name)
	if err != nil {
		return nil, err
	}
	set := &asavieSet{frameSize: uint64(opts.FrameSize)}
	defer func() {
		if err != nil {
			set.close()
		}
	}()
	for q := 0; q < nq; q++ {
		s, err := openAsavieSocket(ifi.Index, q, &opts)
		if err != nil {
			return nil, fmt.Errorf("asavie socket on queue %d: %w", q, err)
		}
		set.socks = append(set.socks, &asavieSock{s: s, fd: s.FD(), queue: q, batch: batch, txMax: opts.TxRingNumDescs})
		// Frames for the kernel to receive into before the first read.
		s.Fill(s.GetDescs(s.NumFreeFillSlots()))
	}
	set.prog, err = xsk.NewProgram(ifi.Index, xsk.ProgramConfig{Filter: filter, Attach: d.Attach})
	if err != nil {
		return nil, err
	}
	set.xsks, err = xskMapOf(set.prog)
	if err != nil {
		return nil, err
	}
	for _, a := range set.socks {
		if err := set.xsks.Put(uint32(a.queue), uint32(a.fd)); err != nil {
			return nil, fmt.Errorf("register asavie socket of queue %d in the XSKMAP: %w", a.queue, err)
		}
	}
	return set, nil
}

// openAsavieSocket is asavie.NewSocket (through asaviefix, which cleans up
// after a failed call), retried for up to 3 s while bind says EBUSY: the
// kernel releases the previous socket on the queue (of another backend,
// or of Check, just before) from a work queue, which a loaded machine
// runs late. Each attempt maps, populates and registers a whole UMEM, so
// the waits double from 20 ms. asavie formats its errors with %v, so the
// errno is only in the text: a refused privilege becomes
// xsk.ErrPermission, a queue that stays busy xsk.ErrBusy, here and
// nowhere else.
func openAsavieSocket(ifindex, queue int, opts *asavie.SocketOptions) (*asavie.Socket, error) {
	deadline := time.Now().Add(3 * time.Second)
	wait := 20 * time.Millisecond
	for {
		s, err := asaviefix.NewSocket(ifindex, queue, opts)
		if err == nil {
			return s, nil
		}
		text := err.Error()
		switch {
		case strings.Contains(text, unix.EPERM.Error()), strings.Contains(text, unix.EACCES.Error()):
			return nil, fmt.Errorf("%w: %w", xsk.ErrPermission, err)
		case strings.Contains(text, unix.EBUSY.Error()):
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("another AF_XDP socket holds the queue: %w: %w", xsk.ErrBusy, err)
			}
			time.Sleep(min(wait, time.Until(deadline)+time.Millisecond))
			wait = min(2*wait, 500*time.Millisecond)
		default:
			return nil, err
		}
	}
}

// xskMapOf returns the XSKMAP of a loaded program, as the kernel lists the
// program's maps. (xsk.Program registers only xsk.Sockets.)
func xskMapOf(p *xsk.Program) (*ebpf.Map, error) {
	id, err := p.ProgramID()
	if err != nil {
		return nil, fmt.Errorf("XDP program ID: %w", err)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("XDP program %d: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("XDP program %d info: %w", id, err)
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return nil, fmt.Errorf("map %d of XDP program %d: %w", mid, id, err)
		}
		if m.Type() == ebpf.XSKMap {
			return m, nil
		}
		m.Close()
	}
	return nil, fmt.Errorf("XDP program %d has no XSKMAP", id)
}

// asavieSet is the sockets of all queues and the program feeding them.
type asavieSet struct {
	socks     []*asavieSock
	prog      *xsk.Program
	xsks      *ebpf.Map
	frameSize uint64
}

// counts returns each queue's counts. No socket may be in use.
func (set *asavieSet) counts() []plane.QueueCount {
	var qs []plane.QueueCount
	for _, a := range set.socks {
		st, err := a.s.Stats()
		if err != nil {
			continue
		}
		qs = append(qs, plane.QueueCount{Queue: a.queue, Packets: st.Received, Bytes: a.bytes,
			Dropped: st.KernelStats.Rx_dropped + st.KernelStats.Rx_ring_full})
	}
	return qs
}

// drain kicks the kernel until everything transmitted has completed, or
// for at most 100 ms. The TX ring being empty is not enough: in copy mode
// the kernel may have taken a frame off the ring into an skb that the
// device refused for now (veth with a full peer ring answers busy), which
// it sends at the next kick; closing the socket first loses that frame
// without a trace in any counter.
func (a *asavieSock) drain() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("asavie transmit on queue %d: %v", a.queue, p)
		}
	}()
	done := func() bool {
		if c := a.s.NumCompleted(); c > 0 {
			a.s.Complete(c)
		}
		st, err := a.s.Stats()
		return err != nil || st.Completed >= st.Transmitted
	}
	for deadline := time.Now().Add(100 * time.Millisecond); !done() && time.Now().Before(deadline); {
		a.s.Transmit(nil) // a kick
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// close sends what is left on the TX rings, detaches the program and
// closes the sockets. No socket may be in use.
func (set *asavieSet) close() error {
	var errs []error
	for _, a := range set.socks {
		errs = append(errs, a.drain())
	}
	if set.prog != nil {
		errs = append(errs, set.prog.Close())
	}
	if set.xsks != nil {
		errs = append(errs, set.xsks.Close())
	}
	for _, a := range set.socks {
		errs = append(errs, asaviefix.Close(a.s))
	}
	return errors.Join(errs...)
}

// Check opens the asavie sockets and the XDP program on Iface once and
// closes them again, so that a missing interface, privilege or kernel
// feature, or queues held by another program, is reported when a server
// starts rather than when its first test arrives. Between the two, UDP to
// the discard port (9) of Iface goes to the sockets.
func (d *DataPlane) Check() error {
	err := link.Run(d.Do, func() error {
		ifi, err := link.InterfaceByName(d.Iface)
		if err != nil {
			return err
		}
		set, err := d.openAsavie(ifi, []xsk.Rule{xsk.UDPPort(9)})
		if err != nil {
			return err
		}
		return set.close()
	})
	if err != nil {
		return fmt.Errorf("asavie on %s: %w", d.Iface, err)
	}
	return nil
}

// newResolver opens a next-hop resolver for ifi in the calling thread's
// namespace.
func newResolver(ifi *net.Interface) (*nexthop.Resolver, error) {
	r, err := nexthop.New(ifi.Index, nexthop.Options{})
	if err != nil {
		return nil, fmt.Errorf("next-hop resolver for %s: %w", ifi.Name, err)
	}
	return r, nil
}

// asavieHop returns the cached hop to dst, or asks the kernel for it.
func asavieHop(r *nexthop.Resolver, dst netip.Addr) (nexthop.Hop, error) {
	if hop, ok := r.Lookup(dst); ok {
		return hop, nil
	}
	return r.Resolve(context.Background(), dst) // bounded by the resolver's ResolveTimeout
}

// Client ports of the asavie data plane: a block of asaviePorts below
// Linux's default ephemeral range (32768-60999), so the XDP filter does
// not take the kernel's own sockets' replies. (xskplane.DataPlane's client has
// xdpnet pick and reserve its block.)
const (
	asaviePortLow  = 20000
	asaviePortHigh = 32000
	asaviePorts    = 256
)

// pollIn waits up to d for any of fds to become readable.
func pollIn(fds []unix.PollFd, d time.Duration) error {
	for i := range fds {
		fds[i].Events, fds[i].Revents = unix.POLLIN, 0
	}
	ts := unix.NsecToTimespec(int64(d))
	if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	return nil
}

// readWait is how long a ReadBatch may wait in poll before it looks again:
// at most most, and no later than deadline (zero: none). A deadline that
// has passed gives os.ErrDeadlineExceeded.
func readWait(deadline time.Time, most time.Duration) (time.Duration, error) {
	if deadline.IsZero() {
		return most, nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return min(most, left), nil
}
