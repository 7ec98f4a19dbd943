package xsk

// completionRing is the completion ring: the kernel produces, we consume.
// Each entry is the UMEM address of a frame the kernel has sent from the
// TX ring and gives back; Socket.complete returns it to the TX pool.
type completionRing struct{ ringOf[uint64] }

func newCompletionRing(mem []byte, off ringOffsets, entries uint32) *completionRing {
	return &completionRing{newRingOf[uint64](mem, off, entries, false)}
}
