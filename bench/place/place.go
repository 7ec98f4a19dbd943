package place

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"

	"github.com/xdpio/xdpio/rss"
)

// Placer spreads a client's streams over the RX queues of the server's
// NIC: the i-th stream dialled goes to the i-th queue of the indirection
// table (round robin), on a source port the NIC's RSS hash sends there
// (rss.Predictor.PlacePorts). The kernel socket and AF_XDP data planes
// bind each stream to the port it gives. Build the Predictor from the
// server device's key and table (`xdpio rss show DEV` on the server).
type Placer struct {
	// Predictor models the server NIC's RSS: key, indirection table,
	// index rule.
	Predictor *rss.Predictor
	// AddressesOnly says the NIC hashes UDP by addresses alone (ethtool
	// -n DEV rx-flow-hash udp4 lists no L4 bytes): then no port moves a
	// flow and placement fails with rss.ErrUnplaceable.
	AddressesOnly bool

	mu     sync.Mutex
	used   map[uint16]bool
	placed []Placement
}

// Placement is one stream's source port and the server RX queue the
// Predictor puts it on.
type Placement struct {
	Stream int    `json:"stream"` // 0, 1, 2… in the order dialled
	Port   uint16 `json:"port"`
	Queue  uint32 `json:"queue"`
}

// Port chooses the source port of the next stream from src to remote
// among lo..hi (both zero: Linux's ephemeral range) and returns it with
// the queue it was placed on.
func (p *Placer) Port(src netip.Addr, remote netip.AddrPort, lo, hi uint16) (uint16, uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[uint16]bool{}
	}
	qs := p.Predictor.Queues()
	if len(qs) == 0 {
		return 0, 0, fmt.Errorf("place stream: the indirection table is empty: %w", rss.ErrUnplaceable)
	}
	q := qs[len(p.placed)%len(qs)]
	k := rss.FlowKey{Src: src.Unmap(), Dst: remote.Addr().Unmap(), DstPort: remote.Port(), Proto: 17, Ports: !p.AddressesOnly}
	if lo == 0 && hi == 0 {
		lo, hi = rss.EphemeralMin, rss.EphemeralMax
	}
	// Ask for enough candidates to step over the ports already taken,
	// starting at a random port so that two clients differ.
	o := rss.PlaceOptions{Min: lo, Max: hi, Start: lo + uint16(rand.IntN(int(hi-lo)+1))}
	ports, err := p.Predictor.PlacePorts(k, q, len(p.used)+1, o)
	for _, port := range ports {
		if !p.used[port] {
			p.used[port] = true
			p.placed = append(p.placed, Placement{Stream: len(p.placed), Port: port, Queue: q})
			return port, q, nil
		}
	}
	if err == nil {
		err = rss.ErrUnplaceable
	}
	return 0, 0, fmt.Errorf("place stream %d on server queue %d: %w", len(p.placed), q, err)
}

// Placements returns the ports given so far and their queues.
func (p *Placer) Placements() []Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Placement(nil), p.placed...)
}
