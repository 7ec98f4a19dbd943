package nexthop

import (
	"net"
	"net/netip"
	"sync"
	"testing"
)

// The cache alone, without a kernel: copy-on-write shards read by many
// goroutines while one writer changes them.

func TestCacheCopyOnWrite(t *testing.T) {
	var c hopCache
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	nb := &neighRec{addr: netip.MustParseAddr("198.18.0.2")}
	nb.cur.Store(&neighState{mac: mac})
	var addrs []netip.Addr
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		addrs = append(addrs, a)
		c.put(keyOf(a), &entry{hop: Hop{Dst: a, Via: nb.addr}, nb: nb})
	}
	if n := c.len(); n != 1000 {
		t.Fatalf("%d entries, want 1000", n)
	}
	for _, a := range addrs {
		e := c.get(keyOf(a))
		if e == nil {
			t.Fatalf("%v missing", a)
		}
		if h, ok := e.current(); !ok || h.Dst != a || h.MAC.String() != mac.String() {
			t.Fatalf("%v: %v %v", a, h, ok)
		}
	}
	// IPv4-mapped and plain IPv4 are one key.
	if c.get(keyOf(netip.MustParseAddr("::ffff:198.19.0.5"))) == nil {
		t.Error("IPv4-mapped form not found")
	}
	// A neighbour that fails makes its hops unusable at once.
	nb.cur.Store(nil)
	if _, ok := c.get(keyOf(addrs[0])).current(); ok {
		t.Error("hop through a failed neighbour usable")
	}
	// sweep keeps what it is told to.
	c.sweep(func(e *entry) bool { return e.hop.Dst.As4()[3]%2 == 0 })
	if n := c.len(); n != 500 {
		t.Errorf("%d entries after sweep, want 500", n)
	}
	c.reset()
	if n := c.len(); n != 0 || c.get(keyOf(addrs[0])) != nil {
		t.Errorf("%d entries after reset", n)
	}
}

func TestCacheConcurrent(t *testing.T) {
	var c hopCache
	var mu sync.Mutex // the writers' lock (Resolver.mu)
	nb := &neighRec{}
	nb.cur.Store(&neighState{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}})
	a := netip.MustParseAddr("2001:db8::2")
	c.put(keyOf(a), &entry{hop: Hop{Dst: a}, nb: nb})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if e := c.get(keyOf(a)); e != nil {
					e.current()
				}
			}
		}()
	}
	for i := range 2000 {
		mu.Lock()
		b := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
		c.put(keyOf(b), &entry{hop: Hop{Dst: b}, nb: nb})
		if i%100 == 0 {
			c.sweep(func(e *entry) bool { return e.hop.Dst == a })
		}
		if i%7 == 0 {
			nb.cur.Store(&neighState{mac: net.HardwareAddr{2, 0, 0, 0, 0, byte(i)}})
		}
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
}

func TestCacheGetDoesNotAllocate(t *testing.T) {
	var c hopCache
	a := netip.MustParseAddr("198.18.0.2")
	c.put(keyOf(a), &entry{hop: Hop{Dst: a, MAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}})
	if n := testing.AllocsPerRun(1000, func() {
		if e := c.get(keyOf(a)); e != nil {
			e.current()
		}
	}); n != 0 {
		t.Errorf("%v allocations per get", n)
	}
}
