package xsk

// framePool is a LIFO stack of free frame addresses: O(1) get and put, no
// scanning. LIFO keeps recently used (cache-warm) frames in circulation.
// Its capacity is the whole UMEM, so frames forwarded between sockets that
// share a UMEM can come home to any of them.
type framePool struct {
	free []uint64
}

// newFramePool returns a pool holding frames, with room for every frame
// of u.
func newFramePool(u *UMEM, frames []uint64) *framePool {
	p := &framePool{free: make([]uint64, len(frames), u.cfg.NumFrames)}
	copy(p.free, frames)
	return p
}

func (p *framePool) len() int { return len(p.free) }

// get pops a frame; the caller checks len first.
func (p *framePool) get() uint64 {
	n := len(p.free) - 1
	a := p.free[n]
	p.free = p.free[:n]
	return a
}

func (p *framePool) put(addr uint64) {
	p.free = append(p.free, addr)
}
