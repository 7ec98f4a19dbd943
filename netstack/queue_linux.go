//go:build linux

package netstack

import (
	"context"
	"errors"
	"iter"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/xdpio/xdpio/coalesce"
	"github.com/xdpio/xdpio/offload"
	"github.com/xdpio/xdpio/xsk"
)

// queue is one RX queue's socket: its receive loop (one goroutine) and
// its TX side (under mu, for the stack's many writers).
type queue struct {
	e *Endpoint
	s *xsk.Socket

	// RX, owned by the receive loop.
	rb     *xsk.Batch
	nap    xsk.Napper
	rcv    *coalesce.Receiver
	gro    *offload.GRO // nil with Config.NoGRO
	groOut [][]byte     // what gro hands over, reused batch to batch

	// TX.
	mu      sync.Mutex
	tb      *xsk.Batch
	tx      *coalesce.Transmitter // with Config.TXCoalesce
	txDue   chan struct{}         // frames wait in tx: the poller's cue
	scratch []byte                // a GSO packet, made contiguous
	done    bool
}

func newQueue(e *Endpoint, s *xsk.Socket) (*queue, error) {
	q := &queue{e: e, s: s, rb: s.NewBatch(64), nap: xsk.NewNapper(0, s), tb: s.NewBatch(64)}
	if !e.cfg.NoTSO {
		q.scratch = make([]byte, header.EthernetMinimumSize+gsoMaxSize)
	}
	var err error
	if !e.cfg.NoGRO && !e.cfg.NoRXChecksumOffload {
		// GRO verifies the checksums of the TCP segments it takes as it
		// copies them (they are read once), and the stack takes what it
		// hands over as verified; a merged packet's checksum field holds
		// the pseudo-header sum, as the kernel's GRO leaves it.
		o := offload.GROOptions{PartialChecksum: true, Verify: true, AcceptPartialChecksum: e.cfg.AcceptPartialChecksum}
		if q.gro, err = offload.NewGRO(o); err != nil {
			return nil, err
		}
	}
	if p := e.cfg.Coalesce; p != nil {
		if q.rcv, err = coalesce.NewReceiver(s, *p, coalesce.Options{}); err != nil {
			return nil, err
		}
	}
	if p := e.cfg.TXCoalesce; p != nil {
		if q.tx, err = coalesce.NewTransmitter(s, *p, coalesce.Options{}); err != nil {
			return nil, err
		}
		q.txDue = make(chan struct{}, 1)
	}
	return q, nil
}

// receive hands the queue's frames to the stack until ctx ends or the
// socket fails.
func (q *queue) receive(ctx context.Context) error {
	if q.rcv != nil {
		return q.receiveCoalesced(ctx)
	}
	for ctx.Err() == nil {
		if n := q.s.Receive(q.rb); n > 0 {
			q.nap.Received(n)
			q.deliver(q.rb)
			q.s.Release(q.rb)
			continue
		}
		if d := q.nap.Idle(); d > 0 {
			if err := q.s.Sleep(d); err != nil {
				return err
			}
			continue
		}
		if _, err := q.s.Wait(-1, false); err != nil {
			return err
		}
	}
	return nil
}

// receiveCoalesced is receive through the queue's coalescing Receiver.
func (q *queue) receiveCoalesced(ctx context.Context) error {
	for {
		b, err := q.rcv.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		q.deliver(b)
		q.rcv.Release()
	}
}

// deliver hands the frames of b to the stack: each checked (the MAC, and
// unless the stack checks them itself, the checksums), the TCP segments of
// one flow merged by GRO, and copied into a packet buffer of its own, as
// the stack keeps packets beyond the batch. GRO is flushed at the end of
// the batch, as NAPI flushes it at the end of a poll: a segment never
// waits for a frame that may not come.
func (q *queue) deliver(b *xsk.Batch) {
	e := q.e
	d := e.deliverer()
	if d == nil {
		return
	}
	mac := e.LinkAddress()
	if b.Len() > 0 {
		e.ctr.rxBatches.Add(1)
	}
	for i := 0; i < b.Len(); i++ {
		f := b.Frame(i)
		if len(f) < header.EthernetMinimumSize {
			e.ctr.rxMalformed.Add(1)
			continue
		}
		eth := header.Ethernet(f)
		if dst := eth.DestinationAddress(); dst != mac && dst[0]&1 == 0 {
			e.ctr.rxNotForUs.Add(1) // another host's unicast frame
			continue
		}
		proto := eth.Type()
		if q.gro != nil && q.groTakes(f) {
			q.feedGRO(d, f)
			continue
		}
		validated := false
		if proto == header.IPv4ProtocolNumber || proto == header.IPv6ProtocolNumber {
			if !e.cfg.NoRXChecksumOffload {
				var ok bool
				if validated, ok = q.verify(f); !ok {
					continue
				}
			}
		} else if proto != header.ARPProtocolNumber {
			e.ctr.rxNotForUs.Add(1) // VLAN tags, other protocols: not the stack's
			continue
		}
		if e.neigh != nil {
			e.resolveSYN(f)
		}
		e.ctr.rxFrames.Add(1)
		e.ctr.rxBytes.Add(uint64(len(f)))
		q.push(d, f, validated)
	}
	if q.gro != nil && q.gro.Held() > 0 {
		q.groOut = q.gro.Flush(q.groOut[:0])
		for _, p := range q.groOut {
			q.push(d, p, true)
		}
	}
}

// groTakes reports whether GRO, verifying, is to take frame f: a TCP
// segment that is no fragment and carries data, or any TCP segment while
// GRO holds a packet, which may be of its flow and must go first.
func (q *queue) groTakes(f []byte) bool {
	var lo offload.Layout
	if lo.Parse(f) != offload.ReasonNone || lo.Proto != offload.ProtoTCP || lo.Fragment || lo.AH || lo.Payload == 0 {
		return false
	}
	return lo.End > lo.Payload || q.gro.Held() > 0
}

// feedGRO hands a TCP segment to GRO, which verifies its checksums as it
// copies it, and what GRO hands over (which may include packets it held
// from earlier frames) to the stack; a segment GRO drops is counted as
// the checks of verify count it.
func (q *queue) feedGRO(d stack.NetworkDispatcher, f []byte) {
	e := q.e
	before := q.gro.Stats()
	q.groOut = q.gro.Feed(q.groOut[:0], f)
	after := q.gro.Stats()
	partial := after.PartialChecksum != before.PartialChecksum
	switch {
	case partial && !e.cfg.AcceptPartialChecksum:
		e.ctr.rxPartialChecksum.Add(1) // dropped (GRO counts it bad too)
	case after.BadChecksum != before.BadChecksum:
		e.ctr.rxBadChecksum.Add(1)
	case after.Unverifiable != before.Unverifiable:
		e.ctr.rxMalformed.Add(1)
	default:
		if partial {
			e.ctr.rxPartialChecksum.Add(1) // accepted: a frame too
		}
		if e.neigh != nil {
			e.resolveSYN(f)
		}
		e.ctr.rxFrames.Add(1)
		e.ctr.rxBytes.Add(uint64(len(f)))
	}
	for _, p := range q.groOut {
		q.push(d, p, true)
	}
}

// push hands one frame, or a packet GRO merged, to the stack.
func (q *queue) push(d stack.NetworkDispatcher, f []byte, validated bool) {
	e := q.e
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
	pkt.RXChecksumValidated = validated
	if !e.ParseHeader(pkt) {
		pkt.DecRef()
		e.ctr.rxMalformed.Add(1) // shorter than an Ethernet header: deliver's check keeps them out
		return
	}
	d.DeliverNetworkPacket(header.Ethernet(f).Type(), pkt)
	pkt.DecRef()
	e.ctr.rxPackets.Add(1)
}

// resolveSYN has the kernel resolve the sender of a connection request
// (a TCP SYN) it has no neighbour entry for, while the stack builds its
// answer: a stack that shares the kernel's addresses sends through the
// kernel's neighbour table, and an answer with no next hop waits for it.
func (e *Endpoint) resolveSYN(f []byte) {
	lo, r := offload.Parse(f)
	if r != offload.ReasonNone || lo.Proto != offload.ProtoTCP || lo.L4+offload.TCPMinLen > len(f) {
		return
	}
	if flags := f[lo.L4+13]; flags&0x12 != 0x02 { // SYN without ACK
		return
	}
	src, ok := netip.AddrFromSlice(lo.Src(f))
	if !ok {
		return
	}
	e.neigh.resolveSYN(src)
}

// verify checks a frame's checksums (offload.VerifyRX) and counts the
// frames it refuses; validated says the transport checksum was checked
// (a fragment's covers the reassembled packet: the stack checks that one
// itself).
func (q *queue) verify(f []byte) (validated, ok bool) {
	c := &q.e.ctr
	v := offload.VerifyRX(f)
	switch {
	case v.L3 == offload.VerdictBad:
		c.rxBadChecksum.Add(1)
		return false, false
	case v.L4 == offload.VerdictBad && offload.PartialChecksum(f):
		c.rxPartialChecksum.Add(1)
		return true, q.e.cfg.AcceptPartialChecksum
	case v.L4 == offload.VerdictBad:
		c.rxBadChecksum.Add(1)
		return false, false
	case v.L3 == offload.VerdictMalformed:
		c.rxMalformed.Add(1)
		return false, false
	}
	return v.L4 == offload.VerdictOK, true
}

// WritePackets implements stack.LinkWriter: each packet goes out through
// the TX ring of the queue its flow hashes to, cut into MSS-sized frames
// when it is a GSO segment. It returns how many packets it took; a packet
// that finds no free frame (after a millisecond of waiting for the kernel
// to complete earlier ones) is dropped and counted, and the stack's
// retransmission recovers it.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		q := e.queues[int(pkt.Hash)%len(e.queues)]
		if err := q.write(pkt); err != nil {
			if n == 0 {
				return 0, err
			}
			break
		}
		n++
	}
	return n, nil
}

// writeHeld writes a packet that waited for its next hop (write counts
// what it cannot send).
func (q *queue) writeHeld(pkt *stack.PacketBuffer) { q.write(pkt) }

// write puts one packet's frames on the TX ring.
func (q *queue) write(pkt *stack.PacketBuffer) tcpip.Error {
	e := q.e
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return &tcpip.ErrClosedForSend{}
	}
	if e.neigh != nil && tcpip.LinkAddress(pkt.LinkHeader().Slice()[:header.EthernetAddressSize]) == noMAC {
		// Counted when it goes out, or as TXNoNeighbour.
		if !e.neigh.hold(pkt, q.writeHeld) {
			e.ctr.txPackets.Add(1)
			e.ctr.txNoNeighbour.Add(1)
		}
		return nil
	}
	e.ctr.txPackets.Add(1)
	size := pkt.Size()
	var err error
	if pkt.GSOOptions.Type != stack.GSONone && size > int(e.mtu)+header.EthernetMinimumSize && q.scratch != nil {
		err = q.segment(pkt, size)
	} else {
		err = q.single(pkt, size)
	}
	if err != nil {
		if errors.Is(err, errNoFrame) {
			e.ctr.txDropped.Add(1)
			return &tcpip.ErrWouldBlock{}
		}
		e.ctr.txErrors.Add(1)
		return &tcpip.ErrInvalidEndpointState{}
	}
	return q.flush()
}

var errNoFrame = errors.New("no free TX frame")

// single copies a packet into one frame and fills its checksums (the
// stack leaves them to the endpoint: CapabilityTXChecksumOffload).
func (q *queue) single(pkt *stack.PacketBuffer, size int) error {
	if err := q.alloc(1); err != nil {
		return err
	}
	i := q.tb.Len() - 1
	buf := q.tb.Buffer(i)
	if size > len(buf) {
		q.s.FreeTail(q.tb, i)
		return errors.New("packet larger than a frame")
	}
	copyPacket(buf, pkt)
	if _, err := offload.FillChecksum(buf[:size]); err != nil && !errors.Is(err, offload.ErrMalformed) {
		q.s.FreeTail(q.tb, i)
		return err
	}
	q.tb.SetLen(i, size)
	q.e.ctr.txFrames.Add(1)
	q.e.ctr.txBytes.Add(uint64(size))
	return nil
}

// segment cuts a GSO packet (a TCP segment of up to 64 KiB) into MSS-sized
// frames, each with its own headers and checksums: software TSO. The
// payload is cut straight from the stack's buffer when it lies in one
// piece there, as it mostly does (the headers are copied apart); else
// the packet is first made contiguous in scratch.
func (q *queue) segment(pkt *stack.PacketBuffer, size int) error {
	hdr, payload := q.split(pkt, size)
	start := q.tb.Len()
	var allocErr error
	n, err := offload.SegmentPayload(hdr, payload, offload.SegmentOptions{MSS: int(pkt.GSOOptions.MSS)}, func(n int) []byte {
		if allocErr = q.alloc(1); allocErr != nil {
			return nil
		}
		i := q.tb.Len() - 1
		q.tb.SetLen(i, n)
		q.e.ctr.txBytes.Add(uint64(n))
		return q.tb.Buffer(i)
	})
	if err != nil {
		q.s.FreeTail(q.tb, start)
		if allocErr != nil {
			return allocErr
		}
		return err
	}
	q.e.ctr.txFrames.Add(uint64(n))
	q.e.ctr.txSegmented.Add(1)
	return nil
}

// split returns a GSO packet's headers and its payload: the payload's
// own bytes in the stack's buffer when they are one piece, and the
// headers copied into the start of scratch (otherwise both are copied
// there, one after the other).
func (q *queue) split(pkt *stack.PacketBuffer, size int) (hdr, payload []byte) {
	hlen := pkt.HeaderSize()
	n := 0
	for s := range packetBytes(pkt) {
		if n < hlen {
			c := copy(q.scratch[n:hlen], s)
			n += c
			s = s[c:]
			if len(s) == 0 {
				continue
			}
		}
		if n == hlen && len(s) == size-hlen {
			return q.scratch[:hlen], s // the whole payload in one view
		}
		n += copy(q.scratch[n:], s)
	}
	return q.scratch[:hlen], q.scratch[hlen:n]
}

// alloc takes n frames onto tb, flushing what is pending and waiting up
// to a millisecond for completions when the pool is empty.
func (q *queue) alloc(n int) error {
	if q.tb.Cap()-q.tb.Len() < n {
		if err := q.flush(); err != nil {
			return errNoFrame
		}
	}
	var deadline time.Time // set when the pool is first found empty
	for {
		start := q.tb.Len()
		if q.s.Alloc(q.tb, n) == n {
			return nil
		}
		q.s.FreeTail(q.tb, start)
		if q.s.Complete() == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Millisecond)
			} else if time.Now().After(deadline) {
				return errNoFrame
			}
			q.s.Kick()
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// flush puts tb's frames on the TX ring: submitted to the coalescing
// Transmitter, or transmitted (and the kernel kicked) at once.
func (q *queue) flush() tcpip.Error {
	if q.tb.Len() == 0 {
		return nil
	}
	var err error
	if q.tx != nil {
		_, err = q.tx.Submit(q.tb)
		if q.tx.Pending() > 0 {
			select {
			case q.txDue <- struct{}{}:
			default:
			}
		}
	} else {
		_, err = q.s.Transmit(q.tb)
		q.s.Complete()
	}
	if q.tb.Len() > 0 { // the ring was full
		q.e.ctr.txDropped.Add(uint64(q.tb.Len()))
		q.s.Free(q.tb)
	}
	if err != nil && !errors.Is(err, xsk.ErrLinkDown) {
		return &tcpip.ErrClosedForSend{}
	}
	return nil
}

// pollTX flushes the coalesced frames whose tx-usecs have passed when no
// write comes to do it (the last segment of a burst, a lone ACK): it
// sleeps until the oldest pending frame is due, and between bursts until
// a write leaves frames pending. It ends with ctx.
func (q *queue) pollTX(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.txDue:
		}
		for {
			q.mu.Lock()
			if q.done {
				q.mu.Unlock()
				return nil
			}
			d, err := q.tx.Poll()
			q.mu.Unlock()
			if err != nil && !errors.Is(err, xsk.ErrLinkDown) {
				return err
			}
			if d < 0 {
				break // nothing pending: wait for the next write
			}
			// In the kernel, to the microsecond: a Go timer under a
			// millisecond sleeps a whole one when the process is idle.
			if err := q.s.Sleep(max(d, time.Microsecond)); err != nil {
				if errors.Is(err, xsk.ErrClosed) {
					return nil
				}
				return err
			}
		}
	}
}

// closeTX stops writes: Close is under way.
func (q *queue) closeTX() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.done = true
	if q.tx != nil {
		q.tx.Flush()
	}
}

// copyPacket copies pkt's bytes, headers first, into b.
func copyPacket(b []byte, pkt *stack.PacketBuffer) {
	n := 0
	for s := range packetBytes(pkt) {
		n += copy(b[n:], s)
	}
}

// packetBytes yields pkt's bytes, headers first, in the pieces its views
// hold them.
func packetBytes(pkt *stack.PacketBuffer) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		views, off := pkt.AsViewList()
		for v := views.Front(); v != nil; v = v.Next() {
			s := v.AsSlice()
			if off >= len(s) {
				off -= len(s)
				continue
			}
			if !yield(s[off:]) {
				return
			}
			off = 0
		}
	}
}
