package link

import (
	"net/netip"

	"github.com/xdpio/xdpio/bench/plane"
)

// inboxLimit is how many datagrams an Inbox queues for its stream before
// it drops them.
const inboxLimit = 8192

// datagram is a received UDP payload and its source.
type datagram struct {
	from netip.AddrPort
	b    []byte
}

// Inbox queues the datagrams routed to one client stream of an AF_XDP
// data plane (whose streams share one set of sockets) until its ReadBatch
// takes them, in buffers it reuses: no allocation per datagram once warm.
// Beyond inboxLimit it drops (and counts) datagrams; the receiver then
// sees them as lost, by their sequence numbers.
type Inbox struct {
	q       []datagram
	head    int
	free    [][]byte
	Dropped uint64 // datagrams pushed beyond inboxLimit
}

// Len is the number of datagrams queued.
func (ib *Inbox) Len() int { return len(ib.q) - ib.head }

// Push copies payload into the queue.
func (ib *Inbox) Push(from netip.AddrPort, payload []byte) {
	if ib.Len() >= inboxLimit {
		ib.Dropped++
		return
	}
	var b []byte
	if n := len(ib.free); n > 0 {
		b, ib.free = ib.free[n-1][:0], ib.free[:n-1]
	}
	ib.q = append(ib.q, datagram{from: from, b: append(b, payload...)})
}

// Pop copies up to len(msgs) queued datagrams into msgs.
func (ib *Inbox) Pop(msgs []plane.Message) int {
	n := 0
	for ; n < len(msgs) && ib.head < len(ib.q); n++ {
		d := &ib.q[ib.head]
		msgs[n].N = copy(msgs[n].Buf, d.b)
		msgs[n].Addr = d.from
		ib.free = append(ib.free, d.b)
		*d = datagram{}
		ib.head++
	}
	if ib.head == len(ib.q) {
		ib.q, ib.head = ib.q[:0], 0
	}
	return n
}
