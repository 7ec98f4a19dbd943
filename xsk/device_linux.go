//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Open binds an AF_XDP socket to each selected RX queue of the interface
// named ifname (in the caller's network namespace), loads and attaches the
// XDP program, and registers the sockets with it. The sockets are returned
// by Sockets in queue order. Close releases everything; if the process
// dies first, the kernel does.
func Open(ifname string, cfg Config) (_ *Device, err error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, &OpError{Op: "open", Ifname: ifname, Queue: -1, Err: fmt.Errorf("%w: %w", ErrNoDevice, err)}
	}
	d := &Device{name: ifname, ifindex: ifi.Index}
	restoreStaleNAPI(ifname, ifi.Index)
	defer func() {
		if err != nil {
			d.Close()
			var oe *OpError
			if errors.As(err, &oe) {
				oe.Ifname = ifname
			} else {
				err = &OpError{Op: "open", Ifname: ifname, Queue: -1, Err: err}
			}
		}
	}()
	nq, err := Queues(ifname)
	if err != nil {
		return nil, err
	}
	if !cfg.NoProgram && (cfg.Program.UserMap == nil || cfg.Program.UserProgram != nil) {
		// Before binding sockets: another XDP program on the interface
		// is the likelier conflict, and the more useful error.
		if err := checkFree(ifi.Index); err != nil {
			return nil, err
		}
	}
	queues := cfg.Queues
	if queues == nil {
		for q := 0; q < nq; q++ {
			queues = append(queues, q)
		}
	}
	seen := map[int]bool{}
	maxQ := 0
	for _, q := range queues {
		if q < 0 || q >= nq {
			return nil, invalid("queue", q, fmt.Sprintf("%s has RX queues 0-%d", ifname, nq-1))
		}
		if seen[q] {
			return nil, invalid("queue", q, "listed twice")
		}
		seen[q] = true
		maxQ = max(maxQ, q)
	}
	if len(queues) == 0 {
		return nil, invalid("queues", "[]", "no queue to bind")
	}
	if cfg.UMEM.NumFrames == 0 {
		// Left to us: 4096 per queue, or what fits the memory the process
		// may lock.
		perQueue := defaultFramesPerQueue(cfg.UMEM.FrameSize, len(queues))
		if cfg.SharedUMEM {
			cfg.UMEM.NumFrames = perQueue * len(queues)
		} else {
			cfg.UMEM.NumFrames = perQueue
		}
	}
	var shared *UMEM
	if cfg.SharedUMEM {
		uc := cfg.UMEM
		shared, err = NewUMEM(uc)
		if err != nil {
			return nil, err
		}
		d.umems = append(d.umems, shared)
		if cfg.Socket.Frames == 0 {
			cfg.Socket.Frames = uc.NumFrames / len(queues)
		}
	}
	for _, q := range queues {
		u := shared
		if u == nil {
			u, err = NewUMEM(cfg.UMEM)
			if err != nil {
				return nil, err
			}
			d.umems = append(d.umems, u)
		}
		s, err := NewSocket(u, ifi.Index, q, cfg.Socket)
		if err != nil {
			return nil, err
		}
		d.sockets = append(d.sockets, s)
	}
	if cfg.NAPIDeferral != nil {
		if d.napi, err = applyNAPIDeferral(ifname, ifi.Index, queues, *cfg.NAPIDeferral); err != nil {
			return nil, err
		}
	}
	if cfg.NoProgram {
		return d, nil
	}
	pc := cfg.Program
	if pc.Queues == 0 {
		pc.Queues = max(nq, maxQ+1)
	}
	d.prog, err = NewProgram(ifi.Index, pc)
	if err != nil {
		return nil, err
	}
	for _, s := range d.sockets {
		if err := d.prog.Register(s.Queue(), s); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// DefaultFrames returns how many UMEM frames of the default size (4096
// bytes) Open gives each of queues queues when UMEMConfig.NumFrames is 0:
// 4096, or fewer to fit RLIMIT_MEMLOCK when the process lacks
// CAP_IPC_LOCK.
func DefaultFrames(queues int) int { return defaultFramesPerQueue(4096, max(queues, 1)) }

// defaultFramesPerQueue is how many frames Open gives each queue when the
// caller leaves UMEMConfig.NumFrames 0: 4096, or, when the process lacks
// CAP_IPC_LOCK and its RLIMIT_MEMLOCK (the kernel charges UMEMs to it) is
// too small for queues UMEMs of that many frames, the largest power of two
// that fits — but no fewer than 256: below that, the kernel's refusal,
// which names the limit, is more useful than a socket that cannot buffer.
func defaultFramesPerQueue(frameSize, queues int) int {
	const want, least = 4096, 256
	if frameSize == 0 {
		frameSize = 4096
	}
	budget, limited := memlockBudget()
	if !limited {
		return want
	}
	per := budget / 4 * 3 / uint64(frameSize*queues) // room for the rest of the user's locked memory
	if per >= want {
		return want
	}
	if per < least {
		return want
	}
	return 1 << (bits.Len64(per) - 1)
}

// Queues returns the interface's current number of RX queues: what
// `ethtool -l` reports (RX plus combined channels), or, for drivers without
// channel reporting, the number of RX queues the device was created with.
func Queues(ifname string) (int, error) {
	ch, err := getChannels(ifname)
	if err == nil {
		n := int(ch.rxCount + ch.combinedCount)
		if n > 0 {
			return n, nil
		}
	}
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return 0, &OpError{Op: "count queues of", Ifname: ifname, Queue: -1, Err: fmt.Errorf("%w: %w", ErrNoDevice, err)}
	}
	if n := l.Attrs().NumRxQueues; n > 0 {
		return n, nil
	}
	return 1, nil
}

// maxQueues returns how many RX queues the device can have at most.
func maxQueues(ifindex int) (int, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	n := l.Attrs().NumRxQueues
	if ch, err := getChannels(l.Attrs().Name); err == nil {
		n = max(n, int(ch.maxRx+ch.maxCombined))
	}
	return max(n, 1), nil
}

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

const ethtoolGChannels = 0x3c

func getChannels(ifname string) (ethtoolChannels, error) {
	ch := ethtoolChannels{cmd: ethtoolGChannels}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ch, err
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], ifname)
	ifr.data = uintptr(unsafe.Pointer(&ch))
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return ch, e
	}
	return ch, nil
}
