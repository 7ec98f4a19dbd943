package xsk

// completionRing is the completion ring: the kernel produces, we consume.
// Each entry is the UMEM address of a frame the kernel has sent from the
// TX ring and gives back; Socket.complete returns it to the TX pool.
type completionRing struct {
	ringHeader
	ring []uint64
}

func newCompletionRing(mem []byte, off ringOffsets, entries uint32) *completionRing {
	r := &completionRing{ring: ringEntries[uint64](mem, off, entries)}
	r.initHeader(mem, off, entries, false)
	return r
}
