//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewUMEM maps and registers a region, and reads each of its pages once,
// so that no first access traps on the data path (see prefault). The
// first socket created on it (NewSocket) uses the registration's file
// descriptor; later ones share it.
func NewUMEM(cfg UMEMConfig) (*UMEM, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	size := cfg.FrameSize * cfg.NumFrames
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_POPULATE
	if cfg.HugePages {
		flags |= unix.MAP_HUGETLB
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		if cfg.HugePages && (errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EINVAL)) {
			return nil, fmt.Errorf("map %d bytes of huge pages: %w (reserve more with sysctl vm.nr_hugepages, or turn HugePages off)", size, err)
		}
		return nil, fmt.Errorf("map %d-byte UMEM: %w", size, err)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Munmap(mem)
		return nil, socketError(err)
	}
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Len:      uint64(size),
		Size:     uint32(cfg.FrameSize),
		Headroom: uint32(cfg.Headroom),
	}
	if cfg.Unaligned {
		reg.Flags |= unix.XDP_UMEM_UNALIGNED_CHUNK_FLAG
	}
	u := &UMEM{
		cfg:       cfg,
		mem:       mem,
		size:      uint64(size),
		frameSize: uint64(cfg.FrameSize),
		fd:        fd,
	}
	if !cfg.Unaligned {
		u.frameMask = u.frameSize - 1
		u.frameShift = uint(bits.TrailingZeros64(u.frameSize))
	}
	if cfg.TXMetadata {
		reg.Flags |= unix.XDP_UMEM_TX_METADATA_LEN
		reg.Tx_metadata_len = txMetadataLen
		u.txOffset = txMetadataLen
	}
	if cfg.TXSoftwareChecksum {
		reg.Flags |= unix.XDP_UMEM_TX_SW_CSUM
	}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		unix.Close(fd)
		unix.Munmap(mem)
		return nil, umemRegError(err, cfg)
	}
	prefault(mem)
	return u, nil
}

// prefaulted keeps prefault's reads from being optimised away.
var prefaulted atomic.Uint64

// prefault reads one byte of every page of mem. MAP_POPULATE has the
// kernel map every page for the process, but a hypervisor that shadows
// the guest's page tables (PVM, as on this project's VMs; KVM without
// EPT) maps a page for it only at its first access, with a trap that
// costs 6–20 µs: 0.1–0.3 s for a 64 MiB UMEM. Left to the data path, those
// traps fall on the receiver's first pass over its frames, which then ran
// at a tenth of its speed while the kernel filled the RX ring and dropped
// the rest (bench demo lost 5–50% of its first half second). Paid here,
// before any socket or XDP program exists; elsewhere (a second pass, bare
// metal, EPT) a pass costs well under a millisecond. A read suffices:
// the shadow entry of a private page already written (populated) allows
// writes too.
func prefault(mem []byte) {
	var x byte
	for i := 0; i < len(mem); i += os.Getpagesize() {
		x |= mem[i]
	}
	prefaulted.Add(uint64(x))
}

func umemRegError(err error, cfg UMEMConfig) error {
	switch {
	case errors.Is(err, unix.EINVAL):
		if feature := missingUMEMFeature(cfg); feature != "" {
			return fmt.Errorf("register UMEM: this kernel does not know %s: %w: %w", feature, ErrNotSupported, err)
		}
		if cfg.TXMetadata {
			return fmt.Errorf("register UMEM: %w (frame size %d, headroom %d, unaligned %v, TX metadata needs Linux 6.8 and TX software checksum 6.11): %w",
				ErrInvalidConfig, cfg.FrameSize, cfg.Headroom, cfg.Unaligned, err)
		}
		return fmt.Errorf("register UMEM: %w (the kernel refused frame size %d with headroom %d, unaligned %v; aligned frames must be a power of two no larger than the page size): %w",
			ErrInvalidConfig, cfg.FrameSize, cfg.Headroom, cfg.Unaligned, err)
	case errors.Is(err, unix.ENOMEM), errors.Is(err, unix.ENOBUFS):
		limit := "unknown"
		if b, limited := memlockBudget(); limited {
			limit = fmt.Sprintf("%d KiB", b>>10)
		}
		return fmt.Errorf("register UMEM of %d frames × %d bytes: %w (without CAP_IPC_LOCK the kernel charges it to RLIMIT_MEMLOCK, %s here, with the user's other locked memory: raise it (ulimit -l), grant CAP_IPC_LOCK, or use fewer frames, UMEMConfig.NumFrames)",
			cfg.NumFrames, cfg.FrameSize, err, limit)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("register UMEM: %w: %w", ErrPermission, err)
	}
	return fmt.Errorf("register UMEM: %w", err)
}

// missingUMEMFeature names the TX metadata feature cfg asks for that the
// kernel does not know, or returns "": a small UMEM of the same shape is
// registered with the features added one at a time, so that a kernel that
// lacks one is told apart from a configuration it refuses.
func missingUMEMFeature(cfg UMEMConfig) string {
	if !cfg.TXMetadata && !cfg.TXSoftwareChecksum {
		return ""
	}
	probe := func(meta, csum bool) bool {
		c := cfg
		c.NumFrames, c.TXMetadata, c.TXSoftwareChecksum = 4, meta, csum
		u, err := NewUMEM(c)
		if err != nil {
			return false
		}
		u.Close()
		return true
	}
	switch {
	case !probe(false, false):
		return "" // the shape itself is refused
	case cfg.TXMetadata && !probe(true, false):
		return "TX metadata (XDP_UMEM_TX_METADATA_LEN, Linux 6.8)"
	case cfg.TXSoftwareChecksum && !probe(cfg.TXMetadata, true):
		return "TX software checksums (XDP_UMEM_TX_SW_CSUM, Linux 6.11)"
	}
	return ""
}

// memlockBudget returns how many bytes of UMEM the kernel lets the
// process register, and whether there is a limit at all: none with
// CAP_IPC_LOCK or an infinite RLIMIT_MEMLOCK. The user's other locked
// memory counts against the same limit, so the budget is an upper bound.
func memlockBudget() (uint64, bool) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) == nil && data[unix.CAP_IPC_LOCK/32].Effective&(1<<(unix.CAP_IPC_LOCK%32)) != 0 {
		return 0, false
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	return lim.Cur, true
}

func socketError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("create AF_XDP socket: %w: %w", ErrPermission, err)
	case errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("create AF_XDP socket: kernel built without CONFIG_XDP_SOCKETS: %w: %w", ErrNotSupported, err)
	}
	return fmt.Errorf("create AF_XDP socket: %w", err)
}

// socketFD returns the registration's descriptor for the first socket, or -1
// with shared=true for later sockets, which open their own and bind with
// XDP_SHARED_UMEM.
func (u *UMEM) socketFD() (fd int, shared bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return -1, false, fmt.Errorf("UMEM: %w", ErrClosed)
	}
	u.refs++
	if !u.fdUsed {
		u.fdUsed = true
		return u.fd, false, nil
	}
	fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		u.refs--
		return -1, false, socketError(err)
	}
	return fd, true, nil
}

func (u *UMEM) release() {
	u.mu.Lock()
	u.refs--
	done := u.refs == 0 && u.closed
	u.mu.Unlock()
	if done {
		u.free()
	}
}

// Close releases the region once every socket on it is closed. The sockets
// must be closed first or together; the memory stays mapped until the last
// one is.
func (u *UMEM) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	done := u.refs == 0
	u.mu.Unlock()
	if done {
		u.free()
	}
	return nil
}

func (u *UMEM) free() {
	if !u.fdUsed {
		unix.Close(u.fd)
	}
	if u.mem != nil {
		unix.Munmap(u.mem)
		u.mem = nil
	}
}
