package xsk

import "encoding/binary"

// Batch holds descriptors the application owns: frames received with
// Socket.Receive or allocated with Socket.Alloc. It is the unit of the hot
// path: receive a batch, look at its frames, then Release it (RX), Transmit
// it, or Free it. Each of those empties the batch, so a frame cannot be
// reached through it after it went back to the kernel.
//
// The byte slices Frame and Buffer return alias the UMEM and are valid only
// until the batch is released, transmitted or freed; copy what must live
// longer. A Batch must not be used concurrently, and belongs to the UMEM of
// the socket that made it: releasing it on a socket of another UMEM is a
// programming error and panics (transmitting it returns an error).
type Batch struct {
	descs []Desc
	umem  *UMEM
}

// Len returns the number of descriptors in the batch.
func (b *Batch) Len() int { return len(b.descs) }

// Cap returns how many descriptors the batch can hold.
func (b *Batch) Cap() int { return cap(b.descs) }

// Desc returns descriptor i.
func (b *Batch) Desc(i int) Desc { return b.descs[i] }

// Frame returns the bytes of descriptor i: the received packet (or
// fragment), or what was written so far to a TX frame.
func (b *Batch) Frame(i int) []byte {
	d := b.descs[i]
	return b.umem.mem[d.Addr : d.Addr+uint64(d.Len) : d.Addr+uint64(d.Len)]
}

// Buffer returns the whole writable room of descriptor i's frame, from its
// data start to the end of the frame: write a packet there, then SetLen.
func (b *Batch) Buffer(i int) []byte {
	d := b.descs[i]
	end := b.umem.frameBase(d.Addr) + b.umem.frameSize
	return b.umem.mem[d.Addr:end:end]
}

// SetLen sets the length of descriptor i. It is capped at the frame's room.
func (b *Batch) SetLen(i, n int) {
	d := &b.descs[i]
	room := int(b.umem.frameBase(d.Addr) + b.umem.frameSize - d.Addr)
	d.Len = uint32(max(0, min(n, room)))
}

// SetOptions sets the option bits of descriptor i (OptContinues to chain a
// multi-buffer packet, OptTXMetadata to use the TX metadata).
func (b *Batch) SetOptions(i int, opts uint32) { b.descs[i].Options = opts }

// Meta returns the metadata area the XDP program wrote in front of
// received packet i (see ProgramConfig.RXHash), or nil if there is no room
// for it. It is only meaningful when the program writes metadata.
func (b *Batch) Meta(i int, size int) []byte {
	d := b.descs[i]
	base := b.umem.frameBase(d.Addr)
	if d.Addr-base < uint64(size) {
		return nil
	}
	return b.umem.mem[d.Addr-uint64(size) : d.Addr : d.Addr]
}

// RXHash returns the RSS hash the NIC computed for received packet i and its
// type (enum xdp_rss_hash_type), as stored by a Program with RXHash set.
// ok is false when the driver gave no hash.
func (b *Batch) RXHash(i int) (hash uint32, hashType uint32, ok bool) {
	m := b.Meta(i, rxMetaLen)
	if m == nil {
		return 0, 0, false
	}
	flags := binary.NativeEndian.Uint32(m[8:])
	if flags&rxMetaHashValid == 0 {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(m[0:]), binary.NativeEndian.Uint32(m[4:]), true
}

// RequestChecksum asks the kernel (or the NIC) to compute an L4 checksum
// for TX frame i: the one's complement sum from byte start to the end of the
// packet, stored at start+offset (Linux CHECKSUM_PARTIAL semantics: the
// field must hold the pseudo-header sum). It needs a UMEM with TXMetadata;
// it reports false otherwise. In copy mode the UMEM needs
// TXSoftwareChecksum too.
func (b *Batch) RequestChecksum(i int, start, offset uint16) bool {
	if b.umem.txOffset < txMetadataLen {
		return false
	}
	d := &b.descs[i]
	md := b.umem.mem[d.Addr-txMetadataLen : d.Addr]
	binary.NativeEndian.PutUint64(md[0:], xdpTxmdFlagsChecksum)
	binary.NativeEndian.PutUint16(md[8:], start)
	binary.NativeEndian.PutUint16(md[10:], offset)
	d.Options |= OptTXMetadata
	return true
}

// xdpTxmdFlagsChecksum is XDP_TXMD_FLAGS_CHECKSUM.
const xdpTxmdFlagsChecksum = 1 << 1

// Reset forgets the batch's descriptors without giving them back. Frames it
// held are lost to the socket until it is closed: use Release, Transmit or
// Free instead unless the frames were handed on some other way.
func (b *Batch) Reset() { b.descs = b.descs[:0] }

// Append adds a descriptor the application owns (for example one taken
// from another batch with Desc) and reports whether it fit. Moving frames
// between batches does not change who owns them.
func (b *Batch) Append(d Desc) bool {
	if len(b.descs) == cap(b.descs) {
		return false
	}
	b.descs = append(b.descs, d)
	return true
}
