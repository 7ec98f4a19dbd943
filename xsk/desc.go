package xsk

// Desc is one descriptor of an RX or TX ring: where a frame's bytes sit in
// the UMEM, how many there are, and option bits. Its memory layout is the
// kernel's struct xdp_desc.
//
// For a received frame Addr points at the first byte of packet data (the
// kernel has already added the headroom; in unaligned-chunk mode the offset
// has been folded in by the socket). Resolve it to bytes with UMEM.Frame or
// Batch.Frame.
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Option bits of Desc.Options.
const (
	// OptContinues marks a fragment that the next descriptor continues
	// (XDP_PKT_CONTD): multi-buffer packets span several descriptors and end
	// with one that lacks it.
	OptContinues = 1 << 0
	// OptTXMetadata asks the kernel to honour the TX metadata in front of
	// the frame (XDP_TX_METADATA): checksum offload, timestamps.
	OptTXMetadata = 1 << 1
)

// MaxFragments is the most descriptors one multi-buffer packet can span:
// the kernel's MAX_SKB_FRAGS (17) plus the head.
const MaxFragments = 18

// More reports whether the next descriptor continues this packet.
func (d Desc) More() bool { return d.Options&OptContinues != 0 }
