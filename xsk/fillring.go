package xsk

// fillRing is the fill ring: we produce, the kernel consumes. Each entry
// is the UMEM address of a frame we lend the kernel to receive a packet
// into; the frame comes back on the RX ring. Socket.feed and
// Socket.release write it, from the RX pool and from released batches.
type fillRing struct{ ringOf[uint64] }

func newFillRing(mem []byte, off ringOffsets, entries uint32) *fillRing {
	return &fillRing{newRingOf[uint64](mem, off, entries, true)}
}
