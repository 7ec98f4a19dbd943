package xsk

// txRing is the TX ring: we produce, the kernel consumes. Each entry is a
// descriptor of a packet to send from a frame of the TX pool; the frame
// comes back on the completion ring once sent. Socket.submit writes it.
type txRing struct{ ringOf[Desc] }

func newTXRing(mem []byte, off ringOffsets, entries uint32) *txRing {
	return &txRing{newRingOf[Desc](mem, off, entries, true)}
}

// unsent reports whether the kernel has not yet consumed every descriptor
// we published: its consumer index, loaded atomically, is behind ours.
func (r *txRing) unsent() bool {
	return r.cachedProd != r.consumer.Load()
}
