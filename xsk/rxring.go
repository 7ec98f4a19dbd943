package xsk

// rxRing is the RX ring: the kernel produces, we consume. Each entry is a
// descriptor of a received packet in a frame the fill ring lent; the
// frame stays ours until the batch holding it is released back to the
// fill ring. Socket.receive reads it.
type rxRing struct{ ringOf[Desc] }

func newRXRing(mem []byte, off ringOffsets, entries uint32) *rxRing {
	return &rxRing{newRingOf[Desc](mem, off, entries, false)}
}

// wholePackets returns how many of the n descriptors ready from the
// cached consumer index on end a packet, for multi-buffer sockets: a
// packet whose last descriptor has not arrived yet is left on the ring.
func (r *rxRing) wholePackets(n uint32) uint32 {
	idx := r.cachedCons
	for n > 0 && r.ring[(idx+n-1)&r.mask].Options&OptContinues != 0 {
		n--
	}
	return n
}
