package xsk

import (
	"sync/atomic"
	"unsafe"
)

// ringHeader is the part every ring shares: the kernel-shared producer and
// consumer indices and flags word, plus our cached copies of the indices.
//
// Producer rings (fill, TX): we own the producer index and cache the
// kernel's consumer index. Consumer rings (RX, completion): we own the
// consumer index and cache the kernel's producer index. The far index is
// loaded with sync/atomic (acquire) only when the cached copy no longer
// answers the question; ours is stored with sync/atomic (release) once per
// batch, after the descriptors are written or read.
// ringOffsets locates a ring's fields in its mmap'd region.
type ringOffsets struct {
	producer, consumer, desc, flags uint64
}

// ringNeedWakeup is XDP_RING_NEED_WAKEUP.
const ringNeedWakeup = 1

type ringHeader struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
	size     uint32

	cachedProd uint32
	cachedCons uint32

	mem []byte // the mmap'd region, for munmap
}

// needWakeup reports whether the kernel asks for a syscall to make progress
// on this ring (XDP_RING_NEED_WAKEUP).
func (r *ringHeader) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&ringNeedWakeup != 0
}

// prodFree returns how many entries a producer ring can take, looking at the
// kernel's consumer index only when the cache says fewer than n are free.
func (r *ringHeader) prodFree(n uint32) uint32 {
	free := r.cachedCons - r.cachedProd
	if free >= n {
		return free
	}
	// cachedCons is kept as consumer + size, so free = cachedCons - prod.
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
	return r.cachedCons - r.cachedProd
}

// prodSubmit publishes everything reserved so far.
func (r *ringHeader) prodSubmit() {
	atomic.StoreUint32(r.producer, r.cachedProd)
}

// consAvail returns how many entries are ready to consume, refreshing the
// cached producer index only when the cache shows fewer than n.
func (r *ringHeader) consAvail(n uint32) uint32 {
	avail := r.cachedProd - r.cachedCons
	if avail >= n {
		return avail
	}
	r.cachedProd = atomic.LoadUint32(r.producer)
	return r.cachedProd - r.cachedCons
}

// consRelease hands consumed entries back to the kernel.
func (r *ringHeader) consRelease() {
	atomic.StoreUint32(r.consumer, r.cachedCons)
}

// addrRing is a fill or completion ring: entries are UMEM addresses.
type addrRing struct {
	ringHeader
	ring []uint64
}

// descRing is an RX or TX ring: entries are descriptors.
type descRing struct {
	ringHeader
	ring []Desc
}

func initHeader(h *ringHeader, mem []byte, off ringOffsets, entries uint32) {
	base := unsafe.Pointer(&mem[0])
	h.producer = (*uint32)(unsafe.Add(base, off.producer))
	h.consumer = (*uint32)(unsafe.Add(base, off.consumer))
	h.flags = (*uint32)(unsafe.Add(base, off.flags))
	h.mask = entries - 1
	h.size = entries
	h.mem = mem
}

func newAddrRing(mem []byte, off ringOffsets, entries uint32, producer bool) *addrRing {
	r := &addrRing{}
	initHeader(&r.ringHeader, mem, off, entries)
	r.ring = unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(&mem[0]), off.desc)), entries)
	r.init(producer)
	return r
}

func newDescRing(mem []byte, off ringOffsets, entries uint32, producer bool) *descRing {
	r := &descRing{}
	initHeader(&r.ringHeader, mem, off, entries)
	r.ring = unsafe.Slice((*Desc)(unsafe.Add(unsafe.Pointer(&mem[0]), off.desc)), entries)
	r.init(producer)
	return r
}

func (r *ringHeader) init(producer bool) {
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer)
	if producer {
		r.cachedCons += r.size
	}
}
