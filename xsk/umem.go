package xsk

import (
	"fmt"
	"sync"
)

// packetHeadroom is XDP_PACKET_HEADROOM: what the kernel keeps in front of
// every received packet, on top of UMEMConfig.Headroom.
const packetHeadroom = 256

const (
	// unalignedOffsetShift: in unaligned-chunk mode an RX address carries the
	// data offset in its upper 16 bits (XSK_UNALIGNED_BUF_OFFSET_SHIFT).
	unalignedOffsetShift = 48
	unalignedAddrMask    = 1<<unalignedOffsetShift - 1
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
	// TXMetadata reserves room for struct xsk_tx_metadata in front of every
	// TX frame (XDP_UMEM_TX_METADATA_LEN), so a frame can ask the kernel for
	// checksum offload (see Batch.RequestChecksum). Needs Linux 6.8.
	TXMetadata bool
	// TXSoftwareChecksum makes copy mode honour checksum requests in TX
	// metadata by computing them in the kernel (XDP_UMEM_TX_SW_CSUM, Linux
	// 6.11). Implies TXMetadata.
	TXSoftwareChecksum bool
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
	if c.TXSoftwareChecksum {
		c.TXMetadata = true
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
	if c.Headroom < 0 || c.Headroom >= c.FrameSize-packetHeadroom-64 {
		return invalid("headroom", c.Headroom, fmt.Sprintf("must be between 0 and %d for frame size %d (the kernel keeps 256 bytes of its own)", c.FrameSize-packetHeadroom-65, c.FrameSize))
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
	cfg        UMEMConfig
	mem        []byte
	size       uint64
	frameSize  uint64
	frameMask  uint64 // frameSize-1 in aligned mode, 0 in unaligned mode
	frameShift uint   // log2(frameSize) in aligned mode
	txOffset   uint64 // where TX data starts inside a frame

	mu       sync.Mutex
	fd       int // the socket the region is registered on
	fdUsed   bool
	nextFree int // next frame not yet handed to a socket's pool
	refs     int
	closed   bool
}

// FrameSize returns the size of one frame.
func (u *UMEM) FrameSize() int { return int(u.frameSize) }

// RXFrameLen returns the longest packet one frame holds on receive: the
// frame less the kernel's headroom (256 bytes) and UMEMConfig.Headroom.
// Longer packets need a multi-buffer socket (SocketConfig.MultiBuffer).
func (u *UMEM) RXFrameLen() int { return int(u.frameSize) - packetHeadroom - u.cfg.Headroom }

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

// frameIndex returns the number of the frame that holds addr.
func (u *UMEM) frameIndex(addr uint64) uint64 {
	if u.frameMask != 0 {
		return addr >> u.frameShift
	}
	return addr / u.frameSize
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

// validTX reports whether a descriptor the application puts on the TX
// ring lies inside the UMEM and inside one frame. In unaligned mode an
// address may carry an offset in its upper 16 bits, as the kernel reads it.
func (u *UMEM) validTX(addr uint64, length uint32) bool {
	if u.cfg.Unaligned {
		addr = addr&(1<<48-1) + addr>>48
	}
	return u.validRX(addr, length)
}

// takeFrames hands out n frames (their base addresses) for a new socket's
// pool, or fewer when the region is used up.
// framesLeft is how many frames no socket took yet.
func (u *UMEM) framesLeft() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cfg.NumFrames - u.nextFree
}

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
