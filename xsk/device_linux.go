//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"strings"
)

// Open binds an AF_XDP socket to each selected RX queue of the interface
// named ifname (in the caller's network namespace), loads and attaches the
// XDP program, and registers the sockets with it. The sockets are returned
// by Sockets in queue order. Close releases everything; if the process
// dies first, the kernel does.
func Open(ifname string, cfg Config) (_ *Device, err error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		// (net's error says only "no such network interface" again.)
		return nil, &OpError{Op: "open", Ifname: ifname, Queue: -1, Err: fmt.Errorf("%w in this network namespace (see ip link)", ErrNoDevice)}
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
	nq, err := rxQueues(ifname)
	if err != nil {
		return nil, err
	}
	if !cfg.NoProgram && (cfg.Program.UserMap == nil || cfg.Program.UserProgram != nil) {
		// Before binding sockets: another XDP program on the interface
		// is the likelier conflict, and the more useful error.
		share := cfg.Program.Share
		if cfg.Program.UserProgram != nil {
			share = ShareExclusive // a user's program does not join a dispatcher
		}
		if err := checkFree(ifi.Index, share); err != nil {
			return nil, err
		}
	}
	queues, maxQ, err := selectQueues(ifname, cfg.Queues, nq)
	if err != nil {
		return nil, err
	}
	if err := d.openSockets(cfg, ifi.Index, queues); err != nil {
		return nil, err
	}
	if cfg.NAPIDeferral != nil {
		if d.napi, err = applyNAPIDeferral(ifname, queues, *cfg.NAPIDeferral); err != nil {
			return nil, err
		}
	}
	if cfg.NoProgram {
		return d, nil
	}
	if err := d.attachProgram(cfg, ifi.Index, max(nq, maxQ+1)); err != nil {
		return nil, err
	}
	return d, nil
}

// selectQueues returns the queues to bind (every RX queue of the nq when
// none are asked for) and the highest, or an error naming a queue that
// does not exist or is listed twice.
func selectQueues(ifname string, asked []int, nq int) (_ []int, maxQ int, _ error) {
	queues := asked
	if queues == nil {
		for q := 0; q < nq; q++ {
			queues = append(queues, q)
		}
	}
	seen := map[int]bool{}
	for _, q := range queues {
		if q < 0 || q >= nq {
			return nil, 0, invalid("queue", q, fmt.Sprintf("%s has RX queues 0-%d", ifname, nq-1))
		}
		if seen[q] {
			return nil, 0, invalid("queue", q, "listed twice")
		}
		seen[q] = true
		maxQ = max(maxQ, q)
	}
	if len(queues) == 0 {
		return nil, 0, invalid("queues", "[]", "no queue to bind")
	}
	return queues, maxQ, nil
}

// openSockets makes the UMEMs (one per queue, or one shared) and binds a
// socket to each queue.
func (d *Device) openSockets(cfg Config, ifindex int, queues []int) error {
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
		var err error
		if shared, err = NewUMEM(cfg.UMEM); err != nil {
			return err
		}
		d.umems = append(d.umems, shared)
		if cfg.Socket.Frames == 0 {
			cfg.Socket.Frames = cfg.UMEM.NumFrames / len(queues)
		}
	}
	for _, q := range queues {
		u := shared
		if u == nil {
			var err error
			if u, err = NewUMEM(cfg.UMEM); err != nil {
				return err
			}
			d.umems = append(d.umems, u)
		}
		s, err := NewSocket(u, ifindex, q, cfg.Socket)
		if err != nil {
			return err
		}
		d.sockets = append(d.sockets, s)
	}
	return nil
}

// attachProgram loads and attaches the XDP program with the sockets
// registered in its map (before it is attached, so that no matching frame
// reaches the kernel stack while Open runs); mapSize is its XSKMAP's size
// unless ProgramConfig.Queues says.
func (d *Device) attachProgram(cfg Config, ifindex, mapSize int) error {
	pc := cfg.Program
	if pc.Queues == 0 {
		pc.Queues = mapSize
	}
	if pc.MaxFrame == 0 && !cfg.Socket.MultiBuffer && pc.UserMap == nil {
		// A longer frame would be dropped at the socket (counted in
		// RXDropped, nowhere else): the kernel's stack gets it instead.
		pc.MaxFrame = d.sockets[0].UMEM().RXFrameLen()
	}
	var err error
	d.prog, err = newProgram(ifindex, pc, func(p *Program) error {
		for _, s := range d.sockets {
			if err := p.Register(s.Queue(), s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if m := d.prog.member; m != nil && cfg.Socket.MultiBuffer && len(m.noFrags) > 0 {
		return &OpError{Op: "join the libxdp dispatcher on", Ifindex: ifindex, Queue: -1,
			Err: fmt.Errorf("%w: multi-buffer sockets need every program of the dispatcher to be frags-aware, and %s is not (load it from an \"xdp.frags\" section)", ErrNotSupported, strings.Join(m.noFrags, ", "))}
	}
	return nil
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
