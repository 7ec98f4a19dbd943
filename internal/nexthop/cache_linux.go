package nexthop

import (
	"encoding/binary"
	"maps"
	"net"
	"net/netip"
	"sync/atomic"
)

// The hop cache is read without locks: numShards atomic pointers to
// immutable maps. A writer (holding Resolver.mu) copies the one shard it
// changes and publishes the copy, so an insertion costs a copy of
// 1/numShards of the cache, not all of it.
const numShards = 256

// neighRec mirrors one entry of the kernel's neighbour table on the
// Resolver's interface, as the netlink notifications describe it. Hops
// through the neighbour point at its record, so that a changed MAC or a
// failed neighbour reaches every cached hop through it at once.
type neighRec struct {
	addr netip.Addr
	// cur is the link-layer address while the kernel's entry is usable
	// for sending (NUD_VALID: REACHABLE, STALE, DELAY, PROBE, PERMANENT,
	// NOARP), nil otherwise. Lookup reads it; the updater replaces it.
	cur atomic.Pointer[neighState]

	// The rest is guarded by Resolver.mu.

	state   uint16 // NUD state last reported, 0 (NUD_NONE) if none
	flags   uint32 // ndm_flags | NDA_FLAGS_EXT<<8, as the kernel keeps them
	version uint64 // changes with every report about this address
	// changed is closed at the next report about this address; nil until
	// a resolution waits for one.
	changed chan struct{}
	// used is set by the sweeper when a hop through the neighbour was
	// looked up since the previous sweep.
	used bool
}

type neighState struct {
	mac net.HardwareAddr
}

// wait returns a channel closed at the next change of rec. mu held.
func (rec *neighRec) wait() <-chan struct{} {
	if rec.changed == nil {
		rec.changed = make(chan struct{})
	}
	return rec.changed
}

// bump records a change of rec and wakes those waiting for one. mu held.
func (rec *neighRec) bump() {
	rec.version++
	if rec.changed != nil {
		close(rec.changed)
		rec.changed = nil
	}
}

// entry is one cached answer.
type entry struct {
	// hop is the answer; hop.MAC is only set when nb is nil (broadcast
	// and multicast destinations), else it is nb's current address.
	hop Hop
	nb  *neighRec
	// used is set by Lookup (only when clear, so that the cache line stays
	// shared between readers) and cleared by the sweeper.
	used atomic.Bool
	// idle counts sweeps without use. Guarded by Resolver.mu.
	idle int
}

// current returns the hop e stands for, if its neighbour is usable now,
// and marks e used.
func (e *entry) current() (h Hop, ok bool) {
	var mac net.HardwareAddr
	if e.nb != nil {
		st := e.nb.cur.Load()
		if st == nil {
			return h, false
		}
		mac = st.mac
	}
	if !e.used.Load() {
		e.used.Store(true)
	}
	h = e.hop
	if mac != nil {
		h.MAC = mac
	}
	return h, true
}

// key is the cache's key of an address: its 16-byte form, in which an
// IPv4 address and its IPv4-mapped IPv6 form are the same, without zone.
// (A [16]byte hashes and compares faster than a netip.Addr.)
type key = [16]byte

func keyOf(a netip.Addr) key { return a.As16() }

type shard struct {
	m map[key]*entry
}

type hopCache struct {
	shards [numShards]atomic.Pointer[shard]
}

func shardOf(k key) int {
	x := binary.LittleEndian.Uint64(k[:8]) ^ binary.LittleEndian.Uint64(k[8:])
	x *= 0x9e3779b97f4a7c15
	return int(x >> 56)
}

// get returns the entry of dst, or nil. Safe without locks.
func (c *hopCache) get(dst key) *entry {
	s := c.shards[shardOf(dst)].Load()
	if s == nil {
		return nil
	}
	return s.m[dst]
}

// put stores e as the entry of dst. Writers are serialized by the caller.
func (c *hopCache) put(dst key, e *entry) {
	p := &c.shards[shardOf(dst)]
	old := p.Load()
	n := &shard{}
	if old == nil {
		n.m = map[key]*entry{dst: e}
	} else {
		n.m = make(map[key]*entry, len(old.m)+1)
		maps.Copy(n.m, old.m)
		n.m[dst] = e
	}
	p.Store(n)
}

// reset drops every entry. Writers are serialized by the caller.
func (c *hopCache) reset() {
	for i := range c.shards {
		c.shards[i].Store(nil)
	}
}

// sweep calls keep for every entry and drops those it returns false for.
// Writers are serialized by the caller.
func (c *hopCache) sweep(keep func(*entry) bool) {
	for i := range c.shards {
		old := c.shards[i].Load()
		if old == nil {
			continue
		}
		var drop []key
		for k, e := range old.m {
			if !keep(e) {
				drop = append(drop, k)
			}
		}
		if len(drop) == 0 {
			continue
		}
		if len(drop) == len(old.m) {
			c.shards[i].Store(nil)
			continue
		}
		n := &shard{m: maps.Clone(old.m)}
		for _, k := range drop {
			delete(n.m, k)
		}
		c.shards[i].Store(n)
	}
}

// len counts the entries.
func (c *hopCache) len() int {
	n := 0
	for i := range c.shards {
		if s := c.shards[i].Load(); s != nil {
			n += len(s.m)
		}
	}
	return n
}
