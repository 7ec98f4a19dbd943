//go:build linux

package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xsk"
)

// cPeerSource is the C peer: rxdrop and txonly with raw AF_XDP syscalls
// and libxdp-style rings, the same loops, rings and UMEM as xdpio's.
//
//go:embed c/xskpeer.c
var cPeerSource []byte

// buildCPeer compiles the C peer into dir with the system's C compiler.
// It fails (and the benchmark skips the "c" backend) when there is no
// compiler or no kernel uapi headers (linux/if_xdp.h, from the
// linux-libc-dev package on Debian).
func buildCPeer(ctx context.Context, dir string) (string, error) {
	var cc string
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		return "", errors.New("no C compiler (cc, gcc or clang) on PATH")
	}
	src := filepath.Join(dir, "xskpeer.c")
	bin := filepath.Join(dir, "xskpeer")
	if err := os.WriteFile(src, cPeerSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, cc, "-O2", "-pthread", "-o", bin, src).CombinedOutput()
	if err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return "", fmt.Errorf("%s: %w: %s (are the kernel headers, linux/if_xdp.h, installed?)", filepath.Base(cc), err, first)
	}
	return bin, nil
}

// Offsets in the control page shared with the C peer (struct ctl in
// c/xskpeer.c).
const (
	ctlReady    = 0
	ctlQuit     = 4
	ctlFrameLen = 12
	ctlFDs      = 16
	ctlTIDs     = 80
	ctlErr      = 144
	ctlErrLen   = 96
	ctlCounters = 256 // per queue, 64 bytes apart: packets, then polls (uint64)
	ctlTemplate = 2048
	ctlSize     = 4096
	ctlQueues   = 16
)

// cPeer runs the C peer as a child process in the namespace of the host
// under test, as an rxdrop receiver (its sockets registered in an XDP
// program this process attaches) or a txonly sender.
type cPeer struct {
	bin    string // the program, for a child process
	inproc bool   // run in this process through cgo instead
	nap    bool   // rxdrop with xdpio's RXNap policy (Options.Nap)
	group  bool   // rxdrop: one thread for every socket
	tx     bool
	rx     *trafficgen.Counter // txonly: the counter at the peer
	prog   *xsk.Program
	mem    []byte
	cmd    *exec.Cmd
	done   chan error
	errb   bytes.Buffer
	pid    int
	n      int
	cpu    *cpuMeter
	// started: the in-process peer's threads run until cPeerStop.
	started bool
}

func (c *cPeer) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&c.mem[off])) }

func (c *cPeer) start(h *vethpair.Host, o *Options) (err error) {
	if o.Queues > ctlQueues {
		return fmt.Errorf("c peer: at most %d queues", ctlQueues)
	}
	c.n = o.Queues
	c.cpu = o.cpu
	if c.inproc {
		return c.startInProcess(h, o)
	}
	fd, err := unix.MemfdCreate("xskpeer-ctl", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("c peer: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "xskpeer-ctl")
	defer f.Close() // the mapping and the child keep what they need
	if err := unix.Ftruncate(fd, ctlSize); err != nil {
		return fmt.Errorf("c peer: ftruncate: %w", err)
	}
	c.mem, err = unix.Mmap(fd, 0, ctlSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("c peer: mmap: %w", err)
	}
	if c.tx {
		*c.u32(ctlFrameLen) = uint32(len(o.frame))
		copy(c.mem[ctlTemplate:], o.frame)
	} else {
		err := h.Do(func() (err error) {
			c.prog, err = xsk.NewProgram(h.Ifindex, xsk.ProgramConfig{Queues: o.Queues})
			return err
		})
		if err != nil {
			return fmt.Errorf("c peer: %w", err)
		}
	}
	mode := modeRX
	if c.tx {
		mode = modeTX
	}
	args := []string{mode, strconv.Itoa(h.Ifindex), strconv.Itoa(o.Queues), strconv.Itoa(o.RingSize),
		strconv.Itoa(o.NumFrames), strconv.Itoa(o.FrameSize), strconv.Itoa(o.Batch), strconv.Itoa(o.TXBatch), strconv.Itoa(o.TXBudget),
		strconv.FormatInt(c.napFor(o).Nanoseconds(), 10), strconv.Itoa(btoi(c.group))}
	// ip netns exec switches namespace and execs the peer in place, so
	// the child's PID is the peer's.
	c.cmd = h.Command(context.Background(), c.bin, args...)
	c.cmd.ExtraFiles = []*os.File{f} // fd 3
	c.cmd.Stderr = &c.errb
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("c peer: %w", err)
	}
	c.pid = c.cmd.Process.Pid
	c.done = make(chan error, 1)
	go func() { c.done <- c.cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		switch atomic.LoadUint32(c.u32(ctlReady)) {
		case 1:
			goto ready
		case 2:
			msg := unix.ByteSliceToString(c.mem[ctlErr : ctlErr+ctlErrLen])
			return fmt.Errorf("c peer: %s", msg)
		}
		select {
		case err := <-c.done:
			c.done <- err
			return fmt.Errorf("c peer exited before it was ready: %v: %s", err, strings.TrimSpace(c.errb.String()))
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("c peer: not ready after 10 s")
		}
	}
ready:
	c.cpu.pids = append(c.cpu.pids, c.pid)
	if c.tx {
		return nil
	}
	// Register the child's sockets in our XSKMAP: duplicate each
	// descriptor out of the child (pidfd_getfd), register the copy, drop it.
	pidfd, err := unix.PidfdOpen(c.pid, 0)
	if err != nil {
		return fmt.Errorf("c peer: pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	for q := 0; q < o.Queues; q++ {
		child := int(int32(atomic.LoadUint32(c.u32(ctlFDs + 4*q))))
		dup, err := unix.PidfdGetfd(pidfd, child, 0)
		if err != nil {
			return fmt.Errorf("c peer: pidfd_getfd of queue %d's socket: %w", q, err)
		}
		err = c.prog.RegisterFD(q, dup)
		unix.Close(dup)
		if err != nil {
			return fmt.Errorf("c peer: %w", err)
		}
	}
	return nil
}

// startInProcess runs the C peer's code inside this process (cgo): the
// control page is anonymous shared memory, the sockets are created in h's
// namespace on a locked thread, and the threads are the C code's own.
func (c *cPeer) startInProcess(h *vethpair.Host, o *Options) (err error) {
	c.mem, err = unix.Mmap(-1, 0, ctlSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("c peer: mmap: %w", err)
	}
	c.pid = os.Getpid()
	if c.tx {
		*c.u32(ctlFrameLen) = uint32(len(o.frame))
		copy(c.mem[ctlTemplate:], o.frame)
	}
	err = h.Do(func() (err error) {
		if !c.tx {
			if c.prog, err = xsk.NewProgram(h.Ifindex, xsk.ProgramConfig{Queues: o.Queues}); err != nil {
				return err
			}
		}
		return cPeerStart(c.mem, c.tx, h.Ifindex, o, c.napFor(o), c.group)
	})
	if err != nil {
		return fmt.Errorf("c peer: %w", err)
	}
	c.started = true
	if c.tx {
		return nil
	}
	for q := 0; q < o.Queues; q++ {
		fd := int(int32(atomic.LoadUint32(c.u32(ctlFDs + 4*q))))
		if err := c.prog.RegisterFD(q, fd); err != nil {
			return fmt.Errorf("c peer: %w", err)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// napFor is the RX nap the peer uses: Options.Nap for c-nap, else none.
func (c *cPeer) napFor(o *Options) time.Duration {
	if c.nap && !c.tx {
		return o.Nap
	}
	return 0
}

// packets sums the peer's per-queue counters.
func (c *cPeer) packets() uint64 {
	var n uint64
	for q := 0; q < c.n; q++ {
		n += atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.mem[ctlCounters+64*q])))
	}
	return n
}

// stats reports the peer's blocking waits, and for the in-process peer
// the kernel's XDP_STATISTICS of its sockets, for -v.
func (c *cPeer) stats() map[string]uint64 {
	m := map[string]uint64{}
	for q := 0; q < c.n; q++ {
		m["polls"] += atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.mem[ctlCounters+64*q+8])))
		if !c.inproc || !c.started {
			continue
		}
		fd := int(int32(atomic.LoadUint32(c.u32(ctlFDs + 4*q))))
		var st unix.XDPStatistics
		l := uint32(unsafe.Sizeof(st))
		if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0); e == 0 {
			m["rx_dropped"] += st.Rx_dropped
			m["rx_ring_full"] += st.Rx_ring_full
			m["fill_ring_empty"] += st.Rx_fill_ring_empty_descs
		}
	}
	return m
}

func (c *cPeer) count() (uint64, error) {
	if c.tx {
		return c.rx.Count()
	}
	return c.packets(), nil
}

func (c *cPeer) sent() uint64 { return c.packets() }

// appCPU is the CPU time of the peer's packet threads.
func (c *cPeer) appCPU() time.Duration {
	var d time.Duration
	for q := 0; q < c.n; q++ {
		tid := atomic.LoadUint32(c.u32(ctlTIDs + 4*q))
		if tid != 0 {
			d += schedstat(fmt.Sprintf("/proc/%d/task/%d/schedstat", c.pid, tid))
		}
	}
	return d
}

// appSys is the system time of the peer's packet threads.
func (c *cPeer) appSys() time.Duration {
	var d time.Duration
	for q := 0; q < c.n; q++ {
		tid := atomic.LoadUint32(c.u32(ctlTIDs + 4*q))
		if tid != 0 {
			d += threadSys(fmt.Sprintf("/proc/%d/task/%d/stat", c.pid, tid))
		}
	}
	return d
}

func (c *cPeer) stop() error {
	var err error
	if c.started {
		cPeerStop()
		c.started = false
	}
	if c.mem != nil {
		atomic.StoreUint32(c.u32(ctlQuit), 1)
	}
	if c.done != nil {
		select {
		case werr := <-c.done:
			if werr != nil {
				err = fmt.Errorf("c peer: %w: %s", werr, strings.TrimSpace(c.errb.String()))
			}
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
			err = errors.New("c peer: did not stop within 5 s; killed")
		}
	}
	if c.cpu != nil {
		c.cpu.pids = nil
	}
	if c.prog != nil {
		err = errors.Join(err, c.prog.Close())
	}
	if c.mem != nil {
		unix.Munmap(c.mem)
		c.mem = nil
	}
	return err
}

// schedstat reads the first field of a schedstat file: nanoseconds on CPU.
// threadSys reads a thread's system time (stime, field 15 of
// /proc/PID/task/TID/stat, in clock ticks of 10 ms).
func threadSys(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ticks, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ticks) * 10 * time.Millisecond
}

func schedstat(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}
