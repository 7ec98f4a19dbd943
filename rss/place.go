package rss

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// PortField selects the port that flow placement varies.
type PortField uint8

const (
	// SourcePort varies the source port: a client choosing the local port
	// of each connection it opens (bind before connect). The default.
	SourcePort PortField = iota
	// DestinationPort varies the destination port: a server listening on
	// several ports, or a client that may pick the server port.
	DestinationPort
)

// String returns "source" or "destination".
func (f PortField) String() string {
	switch f {
	case SourcePort:
		return "source"
	case DestinationPort:
		return "destination"
	}
	return fmt.Sprintf("PortField(%d)", uint8(f))
}

// Linux's default ip_local_port_range, the ports PlaceOptions searches
// when it names none.
const (
	EphemeralMin = 32768
	EphemeralMax = 60999
)

// PlaceOptions configures PlacePorts and Spread. The zero value searches
// source ports of Linux's default ephemeral range from its start.
type PlaceOptions struct {
	// Port is the port that varies (default SourcePort).
	Port PortField
	// Min and Max bound the ports tried, inclusive. Both zero means the
	// ephemeral range EphemeralMin..EphemeralMax. Port 0 is never returned.
	Min, Max uint16
	// Start is the first port tried; the search wraps from Max to Min and
	// ends before Start again. Zero (or a port outside the range) means
	// Min. Vary it (e.g. randomly) so that repeated calls do not hand out
	// the same ports.
	Start uint16
}

// ErrUnplaceable reports that no port in the allowed range puts the flow on
// the wanted queue (or on enough distinct queues).
var ErrUnplaceable = errors.New("flow cannot be placed")

// Placement is one port found by Spread, with the queue and hash of the
// flow that uses it.
type Placement struct {
	Port  uint16
	Queue uint32
	Hash  uint32
}

// portScan is one search over the ports of a flow.
type portScan struct {
	p        *Predictor
	k        FlowKey
	field    PortField
	min, max uint16
	start    uint16
	// Linear transformations (none, symmetric-xor): the hash of the flow
	// with port v is base ^ hi[v>>8] ^ lo[v&0xff].
	linear bool
	base   uint32
	hi, lo [256]uint32
	// basis spans the low-bits indexes the port can reach (IndexLowBits).
	basis []uint32
}

func (p *Predictor) newScan(op string, k FlowKey, o PlaceOptions) (*portScan, error) {
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if !k.Ports {
		return nil, fmt.Errorf("%s: flow %v is hashed without ports (FlowKey.Ports is false), so no port moves it: %w", op, k, ErrUnplaceable)
	}
	if o.Port > DestinationPort {
		return nil, fmt.Errorf("%s: Port %v: unknown: %w", op, o.Port, ErrUnplaceable)
	}
	s := &portScan{p: p, k: k, field: o.Port, min: o.Min, max: o.Max, start: o.Start}
	if s.min == 0 && s.max == 0 {
		s.min, s.max = EphemeralMin, EphemeralMax
	}
	if s.min == 0 {
		s.min = 1
	}
	if s.min > s.max {
		return nil, fmt.Errorf("%s: port range %d-%d is empty: %w", op, o.Min, o.Max, ErrUnplaceable)
	}
	if s.start < s.min || s.start > s.max {
		s.start = s.min
	}
	// The Toeplitz hash is linear over GF(2) in its input, and so is the
	// symmetric-xor transformation: hash(port v) = hash(port 0) ^ H(v),
	// where H is the hash of an input whose only set bits are the port's.
	// Build H from the 16 single-bit ports, as NewToeplitz builds its tables.
	s.linear = p.sym != SymmetricOrXOR
	if s.linear {
		s.base = p.Hash(s.with(0))
		var e [16]uint32 // e[b]: H of port bit b (bit 0 = least significant)
		for b := range e {
			e[b] = p.Hash(s.with(1<<b)) ^ s.base
		}
		for v := 1; v < 256; v++ {
			low := v & -v
			b := bitIndex(low)
			s.lo[v] = s.lo[v^low] ^ e[b]
			s.hi[v] = s.hi[v^low] ^ e[8+b]
		}
		if p.rule == IndexLowBits {
			mask := p.size - 1
			for _, v := range e {
				s.addBasis(v & mask)
			}
		}
	}
	return s, nil
}

// with returns the flow with the varied port set to v.
func (s *portScan) with(v uint16) FlowKey {
	k := s.k
	if s.field == SourcePort {
		k.SrcPort = v
	} else {
		k.DstPort = v
	}
	return k
}

// hash returns the hash of the flow with port v.
func (s *portScan) hash(v uint16) uint32 {
	if s.linear {
		return s.base ^ s.hi[v>>8] ^ s.lo[v&0xff]
	}
	return s.p.Hash(s.with(v))
}

// addBasis adds v to the GF(2) basis, kept with distinct leading bits in
// descending order, so that reducing by each vector in turn clears its
// leading bit for good.
func (s *portScan) addBasis(v uint32) {
	if v = s.reduce(v); v != 0 {
		s.basis = append(s.basis, v)
		slices.SortFunc(s.basis, func(a, b uint32) int { return cmp.Compare(b, a) })
	}
}

// reduce clears from v the leading bit of every basis vector.
func (s *portScan) reduce(v uint32) uint32 {
	for _, b := range s.basis {
		v = min(v, v^b) // XOR b in exactly when v has b's leading bit
	}
	return v
}

// inSpan reports whether v is a combination of the basis vectors.
func (s *portScan) inSpan(v uint32) bool { return s.reduce(v) == 0 }

// reachable reports whether some port value (ignoring the range) can put
// the flow on queue. It is exact for linear transformations under
// IndexLowBits and otherwise only checks that the table has the queue.
func (s *portScan) reachable(queue uint32) bool {
	p := s.p
	exact := s.linear && p.rule == IndexLowBits
	mask := p.size - 1
	for i, q := range p.indir {
		if q != queue {
			continue
		}
		if !exact || s.inSpan((uint32(i)^s.base)&mask) {
			return true
		}
	}
	return false
}

// ranges returns the port intervals in search order: Start..Max, then
// Min..Start-1 (the second may be empty).
func (s *portScan) ranges() [2][2]int {
	return [2][2]int{{int(s.start), int(s.max)}, {int(s.min), int(s.start) - 1}}
}

// PlacePorts returns up to n ports (in search order, see PlaceOptions) that
// put flow k on RX queue queue when used as the port o.Port selects; the
// other port in k is kept. It returns fewer than n ports only with an error
// wrapping ErrUnplaceable (together with the ports it found): the queue is
// not in the table, no port value can reach it (the port bits do not span
// the table index bits it needs), or the range holds fewer than n.
//
// The search does not hash every candidate flow: Toeplitz is linear, so a
// candidate costs two table loads and XORs (except under symmetric-or-xor,
// which is not linear and hashes each candidate). Each port is tried
// once, so the ports returned are distinct.
func (p *Predictor) PlacePorts(k FlowKey, queue uint32, n int, o PlaceOptions) ([]uint16, error) {
	const op = "place ports"
	if n < 1 {
		return nil, fmt.Errorf("%s: asked for %d ports: %w", op, n, ErrUnplaceable)
	}
	s, err := p.newScan(op, k, o)
	if err != nil {
		return nil, err
	}
	if !s.reachable(queue) {
		return nil, fmt.Errorf("%s: %v cannot land on queue %d with any %v port: %s: %w", op, k, queue, s.field, p.unreachableWhy(queue), ErrUnplaceable)
	}
	ports := make([]uint16, 0, min(n, 64))
	if s.linear && p.rule == IndexLowBits {
		// The hot case: three loads per candidate, no hashing.
		hit := make([]bool, p.size)
		for i, q := range p.indir {
			hit[i] = q == queue
		}
		mask := p.size - 1
		for _, r := range s.ranges() {
			for v := r[0]; v <= r[1] && len(ports) < n; v++ {
				if hit[(s.base^s.hi[v>>8&0xff]^s.lo[v&0xff])&mask] {
					ports = append(ports, uint16(v))
				}
			}
		}
	} else {
		for _, r := range s.ranges() {
			for v := r[0]; v <= r[1] && len(ports) < n; v++ {
				if p.QueueOfHash(s.hash(uint16(v))) == queue {
					ports = append(ports, uint16(v))
				}
			}
		}
	}
	if len(ports) < n {
		return ports, fmt.Errorf("%s: %v: found %d of %d %v ports in %d-%d for queue %d: %w", op, k, len(ports), n, s.field, s.min, s.max, queue, ErrUnplaceable)
	}
	return ports, nil
}

// unreachableWhy explains a failed reachability check.
func (p *Predictor) unreachableWhy(queue uint32) string {
	for _, q := range p.indir {
		if q == queue {
			return fmt.Sprintf("the %d port bits do not reach the table indexes of queue %d under the low-bits rule", 16, queue)
		}
	}
	return fmt.Sprintf("no entry of the %d-entry indirection table points to queue %d", p.size, queue)
}

// Spread returns n ports that put n flows, which differ from k only in the
// port o.Port selects, on as many distinct RX queues as possible: a client
// opening n connections binds them to these ports to use n queues of the
// server. With n up to the number of queues Q in the table every flow gets
// its own queue; with more, every queue gets n/Q or n/Q+1 flows. Queues
// are taken in the order the search finds them, and so are the ports.
// It fails, wrapping ErrUnplaceable, when the range cannot give that even
// spread (a queue unreachable, or too few ports); then it returns what it
// found.
func (p *Predictor) Spread(k FlowKey, n int, o PlaceOptions) ([]Placement, error) {
	const op = "spread flows"
	qs := p.Queues()
	if n < 1 {
		return nil, fmt.Errorf("%s: asked for %d flows: %w", op, n, ErrUnplaceable)
	}
	s, err := p.newScan(op, k, o)
	if err != nil {
		return nil, err
	}
	// Every queue takes base flows, and extra of them one more.
	base, extra := n/len(qs), n%len(qs)
	count := make(map[uint32]int, len(qs))
	out := make([]Placement, 0, min(n, 1024))
	for _, r := range s.ranges() {
		for v := r[0]; v <= r[1] && len(out) < n; v++ {
			h := s.hash(uint16(v))
			q := p.QueueOfHash(h)
			switch c := count[q]; {
			case c < base:
			case c == base && extra > 0:
				extra--
			default:
				continue
			}
			count[q]++
			out = append(out, Placement{Port: uint16(v), Queue: q, Hash: h})
		}
	}
	if len(out) < n {
		return out, fmt.Errorf("%s: %v: %v ports %d-%d spread only %d of %d flows evenly over the %d queues of the table (%d reached): %w", op, k, s.field, s.min, s.max, len(out), n, len(qs), len(count), ErrUnplaceable)
	}
	return out, nil
}
