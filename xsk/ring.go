package xsk

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// The four rings, each in its own file as the kernel names them: the fill
// ring (fillring.go) and RX ring (rxring.go) move frames to the kernel and
// back with packets; the TX ring (txring.go) and completion ring
// (completionring.go) move frames with packets to the kernel and back
// when sent. This file holds what they share.

// ringOffsets locates a ring's fields in its mmap'd region.
type ringOffsets struct {
	producer, consumer, desc, flags uint64
}

// ringNeedWakeup is XDP_RING_NEED_WAKEUP.
const ringNeedWakeup = 1

// ringHeader is the part every ring shares: the kernel-shared producer and
// consumer indices and flags word, plus our cached copies of the indices.
//
// Producer rings (fill, TX): we own the producer index and cache the
// kernel's consumer index. Consumer rings (RX, completion): we own the
// consumer index and cache the kernel's producer index. The far index is
// loaded atomically (acquire) only when the cached copy no longer answers
// the question; ours is stored atomically (release) once per batch, after
// the descriptors are written or read, so the kernel never sees an index
// ahead of the entries it covers.
//
// The indices live in memory mmap'd from the kernel; producer, consumer
// and flags are typed atomics laid over those addresses (the kernel
// aligns them to a cache line, checked in initHeader), never copied.
type ringHeader struct {
	producer *atomic.Uint32
	consumer *atomic.Uint32
	flags    *atomic.Uint32
	mask     uint32
	size     uint32

	cachedProd uint32
	cachedCons uint32

	mem []byte // the mmap'd region, for munmap
}

// sharedUint32 returns the typed atomic at offset off of the mmap'd region
// base. An unaligned offset is a broken kernel contract (the kernel
// aligns each field to a cache line): it panics rather than let atomic
// accesses tear.
func sharedUint32(base unsafe.Pointer, off uint64) *atomic.Uint32 {
	if off%uint64(unsafe.Alignof(atomic.Uint32{})) != 0 {
		panic(fmt.Sprintf("xsk: kernel ring offset %d is not aligned for a 32-bit index", off))
	}
	return (*atomic.Uint32)(unsafe.Add(base, off))
}

// initHeader points h at the indices in mem and reads their start values;
// a producer ring starts with entries free.
func (h *ringHeader) initHeader(mem []byte, off ringOffsets, entries uint32, producer bool) {
	base := unsafe.Pointer(&mem[0])
	h.producer = sharedUint32(base, off.producer)
	h.consumer = sharedUint32(base, off.consumer)
	h.flags = sharedUint32(base, off.flags)
	h.mask = entries - 1
	h.size = entries
	h.mem = mem
	h.init(producer)
}

// ringOf is a ring's header and its entries: UMEM addresses (uint64) on
// the fill and completion rings, descriptors on the RX and TX rings. The
// four ring types embed it.
type ringOf[T any] struct {
	ringHeader
	ring []T
}

// newRingOf maps a ring of entries of type T over mem; a producer ring
// (fill, TX) starts with every entry free.
func newRingOf[T any](mem []byte, off ringOffsets, entries uint32, producer bool) ringOf[T] {
	r := ringOf[T]{ring: unsafe.Slice((*T)(unsafe.Add(unsafe.Pointer(&mem[0]), off.desc)), entries)}
	r.initHeader(mem, off, entries, producer)
	return r
}

// init loads the indices into the cached copies.
func (r *ringHeader) init(producer bool) {
	r.cachedProd = r.producer.Load()
	r.cachedCons = r.consumer.Load()
	if producer {
		r.cachedCons += r.size
	}
}

// needWakeup reports whether the kernel asks for a syscall to make progress
// on this ring (XDP_RING_NEED_WAKEUP).
func (r *ringHeader) needWakeup() bool {
	return r.flags.Load()&ringNeedWakeup != 0
}

// prodFree returns how many entries a producer ring can take, looking at the
// kernel's consumer index only when the cache says fewer than n are free.
func (r *ringHeader) prodFree(n uint32) uint32 {
	free := r.cachedCons - r.cachedProd
	if free >= n {
		return free
	}
	// cachedCons is kept as consumer + size, so free = cachedCons - prod.
	r.cachedCons = r.consumer.Load() + r.size
	return r.cachedCons - r.cachedProd
}

// prodSubmit publishes everything reserved so far.
func (r *ringHeader) prodSubmit() {
	r.producer.Store(r.cachedProd)
}

// consAvail returns how many entries are ready to consume, refreshing the
// cached producer index only when the cache shows fewer than n.
func (r *ringHeader) consAvail(n uint32) uint32 {
	avail := r.cachedProd - r.cachedCons
	if avail >= n {
		return avail
	}
	r.cachedProd = r.producer.Load()
	return r.cachedProd - r.cachedCons
}

// consRelease hands consumed entries back to the kernel.
func (r *ringHeader) consRelease() {
	r.consumer.Store(r.cachedCons)
}

// unmap returns the ring's memory to the kernel; a nil ring or one already
// unmapped is left alone.
func (r *ringHeader) unmap(munmap func([]byte) error) {
	if r != nil && r.mem != nil {
		munmap(r.mem)
		r.mem = nil
	}
}
