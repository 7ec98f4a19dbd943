//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UMEMConfig describes a UMEM: one memory region split into equal frames
// that all sockets sharing it receive into and transmit from. The zero value
// is 4096 frames of 4096 bytes, aligned mode, no extra headroom.
type UMEMConfig struct {
	// FrameSize is the size of one frame (chunk) in bytes. Aligned mode: a
	// power of two from 2048 to the page size (4096 on x86-64). Unaligned
	// mode: any size from 2048 up. Default 4096.
	FrameSize int
	// NumFrames is the number of frames in the region. Default 4096.
	NumFrames int
	// Headroom is extra space the kernel leaves in front of every received
	// packet, on top of its own XDP_PACKET_HEADROOM (256 bytes), so the
	// application can prepend headers in place. Default 0.
	Headroom int
	// Unaligned selects unaligned-chunk mode (XDP_UMEM_UNALIGNED_CHUNK_FLAG):
	// frames need not be a power of two; RX addresses carry the data offset
	// in their upper 16 bits, which the socket decodes.
	Unaligned bool
	// HugePages backs the region with huge pages (MAP_HUGETLB). Needs
	// vm.nr_hugepages large enough; otherwise New fails with an error that
	// says so.
	HugePages bool
	// TxMetadata reserves room for struct xsk_tx_metadata in front of every
	// TX frame (XDP_UMEM_TX_METADATA_LEN), so a frame can ask the kernel for
	// checksum offload (see Batch.RequestChecksum). Needs Linux 6.8.
	TxMetadata bool
	// TxSoftwareChecksum makes copy mode honour checksum requests in TX
	// metadata by computing them in the kernel (XDP_UMEM_TX_SW_CSUM, Linux
	// 6.11). Implies TxMetadata.
	TxSoftwareChecksum bool
}

// txMetadataLen is sizeof(struct xsk_tx_metadata): u64 flags and a 16-byte
// union (request: csum_start, csum_offset, launch_time; completion:
// tx_timestamp).
const txMetadataLen = 24

func (c *UMEMConfig) setDefaults() {
	if c.FrameSize == 0 {
		c.FrameSize = 4096
	}
	if c.NumFrames == 0 {
		c.NumFrames = 4096
	}
	if c.TxSoftwareChecksum {
		c.TxMetadata = true
	}
}

func (c *UMEMConfig) validate() error {
	if c.FrameSize < 2048 || c.FrameSize > 1<<20 {
		return invalid("frame size", c.FrameSize, "must be between 2048 and 1048576")
	}
	if !c.Unaligned && c.FrameSize&(c.FrameSize-1) != 0 {
		return invalid("frame size", c.FrameSize, "must be a power of two between 2048 and the page size in aligned mode (set Unaligned for other sizes)")
	}
	if c.NumFrames <= 0 || c.NumFrames > 1<<24 {
		return invalid("number of frames", c.NumFrames, "must be between 1 and 16777216")
	}
	if c.Headroom < 0 || c.Headroom >= c.FrameSize-unix.XDP_PACKET_HEADROOM-64 {
		return invalid("headroom", c.Headroom, fmt.Sprintf("must be between 0 and %d for frame size %d (the kernel keeps 256 bytes of its own)", c.FrameSize-unix.XDP_PACKET_HEADROOM-65, c.FrameSize))
	}
	return nil
}

// UMEM is a registered packet-buffer region and the frames carved from it.
// Sockets created on the same UMEM share its memory (XDP_SHARED_UMEM); each
// socket keeps its own fill and completion rings and its own free-frame pool
// over a share of the frames.
//
// A UMEM is safe for concurrent use by the sockets that share it: its only
// mutable state is guarded, and the hot path does not touch it.
type UMEM struct {
	cfg       UMEMConfig
	mem       []byte
	size      uint64
	frameSize uint64
	frameMask uint64 // frameSize-1 in aligned mode, 0 in unaligned mode
	txOffset  uint64 // where TX data starts inside a frame

	mu       sync.Mutex
	fd       int // the socket the region is registered on
	fdUsed   bool
	nextFree int // next frame not yet handed to a socket's pool
	refs     int
	closed   bool
}

// NewUMEM maps and registers a region. The first socket created on it
// (NewSocket) uses the registration's file descriptor; later ones share it.
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
	}
	if cfg.TxMetadata {
		reg.Flags |= unix.XDP_UMEM_TX_METADATA_LEN
		reg.Tx_metadata_len = txMetadataLen
		u.txOffset = txMetadataLen
	}
	if cfg.TxSoftwareChecksum {
		reg.Flags |= unix.XDP_UMEM_TX_SW_CSUM
	}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		unix.Close(fd)
		unix.Munmap(mem)
		return nil, umemRegError(err, cfg)
	}
	return u, nil
}

func umemRegError(err error, cfg UMEMConfig) error {
	switch {
	case errors.Is(err, unix.EINVAL):
		if cfg.TxMetadata {
			return fmt.Errorf("register UMEM: %w (frame size %d, headroom %d, unaligned %v, TX metadata needs Linux 6.8 and TX software checksum 6.11): %w",
				ErrInvalidConfig, cfg.FrameSize, cfg.Headroom, cfg.Unaligned, err)
		}
		return fmt.Errorf("register UMEM: %w (the kernel refused frame size %d with headroom %d, unaligned %v; aligned frames must be a power of two no larger than the page size): %w",
			ErrInvalidConfig, cfg.FrameSize, cfg.Headroom, cfg.Unaligned, err)
	case errors.Is(err, unix.ENOMEM), errors.Is(err, unix.ENOBUFS):
		return fmt.Errorf("register UMEM of %d bytes: %w (raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited, or run with CAP_IPC_LOCK)", cfg.FrameSize*cfg.NumFrames, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("register UMEM: %w: %w", ErrPermission, err)
	}
	return fmt.Errorf("register UMEM: %w", err)
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

// FrameSize returns the size of one frame.
func (u *UMEM) FrameSize() int { return int(u.frameSize) }

// NumFrames returns the number of frames in the region.
func (u *UMEM) NumFrames() int { return u.cfg.NumFrames }

// Config returns the configuration the UMEM was created with, defaults
// filled in.
func (u *UMEM) Config() UMEMConfig { return u.cfg }

// Frame returns the bytes a descriptor describes. The slice aliases the
// UMEM: it is valid only while the descriptor is owned by the application
// (until it is released, transmitted or freed). Frame returns nil for a
// descriptor that does not lie inside the UMEM.
func (u *UMEM) Frame(d Desc) []byte {
	if d.Addr >= u.size || uint64(d.Len) > u.size-d.Addr {
		return nil
	}
	return u.mem[d.Addr : d.Addr+uint64(d.Len) : d.Addr+uint64(d.Len)]
}

// frameBase returns the start of the frame that holds addr.
func (u *UMEM) frameBase(addr uint64) uint64 {
	if u.frameMask != 0 {
		return addr &^ u.frameMask
	}
	return addr - addr%u.frameSize
}

// validRX reports whether a received descriptor (already decoded) lies
// inside the UMEM and inside one frame.
func (u *UMEM) validRX(addr uint64, length uint32) bool {
	if addr >= u.size {
		return false
	}
	end := u.frameBase(addr) + u.frameSize
	return uint64(length) <= end-addr
}

// takeFrames hands out n frames (their base addresses) for a new socket's
// pool, or fewer when the region is used up.
func (u *UMEM) takeFrames(n int) []uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	left := u.cfg.NumFrames - u.nextFree
	if n > left {
		n = left
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(u.nextFree+i) * u.frameSize
	}
	u.nextFree += n
	return out
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
