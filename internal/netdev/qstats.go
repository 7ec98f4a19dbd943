package netdev

import "strconv"

// Counter is a qstats counter attribute (NETDEV_A_QSTATS_RX_PACKETS …).
type Counter uint16

// The counters netdev.yaml defines, in attribute order.
const (
	RXPackets          Counter = 8
	RXBytes            Counter = 9
	TXPackets          Counter = 10
	TXBytes            Counter = 11
	RXAllocFail        Counter = 12
	RXHWDrops          Counter = 13
	RXHWDropOverruns   Counter = 14
	RXCsumComplete     Counter = 15
	RXCsumUnnecessary  Counter = 16
	RXCsumNone         Counter = 17
	RXCsumBad          Counter = 18
	RXHWGROPackets     Counter = 19
	RXHWGROBytes       Counter = 20
	RXHWGROWirePackets Counter = 21
	RXHWGROWireBytes   Counter = 22
	RXHWDropRatelimits Counter = 23
	TXHWDrops          Counter = 24
	TXHWDropErrors     Counter = 25
	TXCsumNone         Counter = 26
	TXNeedsCsum        Counter = 27
	TXHWGSOPackets     Counter = 28
	TXHWGSOBytes       Counter = 29
	TXHWGSOWirePackets Counter = 30
	TXHWGSOWireBytes   Counter = 31
	TXHWDropRatelimits Counter = 32
	TXStop             Counter = 33
	TXWake             Counter = 34
	firstCounter               = RXPackets
	lastCounter                = TXWake
	numCounters                = int(lastCounter-firstCounter) + 1
)

var counterNames = [numCounters]string{
	"rx-packets", "rx-bytes", "tx-packets", "tx-bytes", "rx-alloc-fail", "rx-hw-drops",
	"rx-hw-drop-overruns", "rx-csum-complete", "rx-csum-unnecessary", "rx-csum-none",
	"rx-csum-bad", "rx-hw-gro-packets", "rx-hw-gro-bytes", "rx-hw-gro-wire-packets",
	"rx-hw-gro-wire-bytes", "rx-hw-drop-ratelimits", "tx-hw-drops", "tx-hw-drop-errors",
	"tx-csum-none", "tx-needs-csum", "tx-hw-gso-packets", "tx-hw-gso-bytes",
	"tx-hw-gso-wire-packets", "tx-hw-gso-wire-bytes", "tx-hw-drop-ratelimits", "tx-stop", "tx-wake",
}

// Counters lists every counter this package knows, in attribute order.
func Counters() []Counter {
	out := make([]Counter, numCounters)
	for i := range out {
		out[i] = firstCounter + Counter(i)
	}
	return out
}

// Known reports whether c is a counter this package knows.
func (c Counter) Known() bool { return c >= firstCounter && c <= lastCounter }

// String returns the spec's name of c ("rx-packets"), or "attr-N".
func (c Counter) String() string {
	if c.Known() {
		return counterNames[c-firstCounter]
	}
	return "attr-" + strconv.Itoa(int(c))
}

// QStats is one qstats-get row in queue scope: the counters one queue's
// driver reports. A counter the driver does not keep is absent, not 0: use
// Get or Has.
type QStats struct {
	Ifindex int
	// Type and ID name the queue.
	Type QueueType
	ID   uint32

	RXPackets, RXBytes, TXPackets, TXBytes                             uint64
	RXAllocFail, RXHWDrops, RXHWDropOverruns                           uint64
	RXCsumComplete, RXCsumUnnecessary, RXCsumNone, RXCsumBad           uint64
	RXHWGROPackets, RXHWGROBytes, RXHWGROWirePackets, RXHWGROWireBytes uint64
	RXHWDropRatelimits, TXHWDrops, TXHWDropErrors                      uint64
	TXCsumNone, TXNeedsCsum                                            uint64
	TXHWGSOPackets, TXHWGSOBytes, TXHWGSOWirePackets, TXHWGSOWireBytes uint64
	TXHWDropRatelimits, TXStop, TXWake                                 uint64

	// Present has bit (c - RXPackets) set for each known counter c the
	// kernel sent.
	Present uint64
	// Unknown holds counters this package does not know, by attribute.
	Unknown map[Counter]uint64
}

// field returns the struct field of a known counter.
func (s *QStats) field(c Counter) *uint64 {
	switch c {
	case RXPackets:
		return &s.RXPackets
	case RXBytes:
		return &s.RXBytes
	case TXPackets:
		return &s.TXPackets
	case TXBytes:
		return &s.TXBytes
	case RXAllocFail:
		return &s.RXAllocFail
	case RXHWDrops:
		return &s.RXHWDrops
	case RXHWDropOverruns:
		return &s.RXHWDropOverruns
	case RXCsumComplete:
		return &s.RXCsumComplete
	case RXCsumUnnecessary:
		return &s.RXCsumUnnecessary
	case RXCsumNone:
		return &s.RXCsumNone
	case RXCsumBad:
		return &s.RXCsumBad
	case RXHWGROPackets:
		return &s.RXHWGROPackets
	case RXHWGROBytes:
		return &s.RXHWGROBytes
	case RXHWGROWirePackets:
		return &s.RXHWGROWirePackets
	case RXHWGROWireBytes:
		return &s.RXHWGROWireBytes
	case RXHWDropRatelimits:
		return &s.RXHWDropRatelimits
	case TXHWDrops:
		return &s.TXHWDrops
	case TXHWDropErrors:
		return &s.TXHWDropErrors
	case TXCsumNone:
		return &s.TXCsumNone
	case TXNeedsCsum:
		return &s.TXNeedsCsum
	case TXHWGSOPackets:
		return &s.TXHWGSOPackets
	case TXHWGSOBytes:
		return &s.TXHWGSOBytes
	case TXHWGSOWirePackets:
		return &s.TXHWGSOWirePackets
	case TXHWGSOWireBytes:
		return &s.TXHWGSOWireBytes
	case TXHWDropRatelimits:
		return &s.TXHWDropRatelimits
	case TXStop:
		return &s.TXStop
	case TXWake:
		return &s.TXWake
	}
	return nil
}

// Set stores v as counter c (known or not) and marks it present.
func (s *QStats) Set(c Counter, v uint64) {
	if f := s.field(c); f != nil {
		*f = v
		s.Present |= 1 << (c - firstCounter)
		return
	}
	if s.Unknown == nil {
		s.Unknown = map[Counter]uint64{}
	}
	s.Unknown[c] = v
}

// Get returns counter c and whether the kernel reported it.
func (s *QStats) Get(c Counter) (uint64, bool) {
	if f := s.field(c); f != nil {
		return *f, s.Present&(1<<(c-firstCounter)) != 0
	}
	v, ok := s.Unknown[c]
	return v, ok
}

// Has reports whether the kernel reported counter c.
func (s *QStats) Has(c Counter) bool { _, ok := s.Get(c); return ok }

// Reported returns the counters the kernel reported, known ones in
// attribute order, then unknown ones in attribute order.
func (s *QStats) Reported() []Counter {
	var out []Counter
	for _, c := range Counters() {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	var unk []Counter
	for c := range s.Unknown {
		unk = append(unk, c)
	}
	for i := 1; i < len(unk); i++ { // insertion sort: a handful at most
		for j := i; j > 0 && unk[j] < unk[j-1]; j-- {
			unk[j], unk[j-1] = unk[j-1], unk[j]
		}
	}
	return append(out, unk...)
}
