package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/xdpio/xdpio/offload"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// DispatchOptions configures a Dispatcher. The zero value is a good
// default: one worker per CPU, backpressure, the default key.
type DispatchOptions struct {
	// Workers is the number of worker goroutines; zero means
	// runtime.GOMAXPROCS(0). At most 4096.
	Workers int
	// QueueLen bounds the frames waiting for or being handled by one worker
	// (rounded up to whole batches); zero means 4096.
	QueueLen int
	// BatchSize is the most frames handed to the handler in one call; zero
	// means 64.
	BatchSize int
	// Key is the Toeplitz key; nil means DefaultKey.
	Key []byte
	// Symmetric transforms the flow before hashing. SymmetricXOR sends
	// both directions of a connection to the same worker.
	Symmetric Symmetric
	// Indirection, if set, maps hashes to workers like an RSS indirection
	// table maps them to queues: a frame goes to worker
	// Indirection[(hash * len(Indirection)) >> 32]. Every entry must be
	// below Workers. Weights(size, w...) gives workers unequal shares (a
	// worker that also does other work can take fewer flows). Without it,
	// each worker gets an equal share.
	Indirection []uint32
	// Drop makes Dispatch drop (and count) a frame whose worker queue is
	// full instead of waiting for room (backpressure, the default).
	Drop bool
	// OnDrop, if set, is called for every frame Dispatch drops or refuses
	// (queue full with Drop, or the Dispatcher closed), on Dispatch's
	// goroutine, so the caller can recycle its buffer. It must not call
	// Dispatch.
	OnDrop func(frame []byte)
}

// Handler processes a batch of frames of one worker. The frames of one
// flow reach the same worker, in the order Dispatch accepted them. The
// frames slice is reused after the handler returns; the frame bytes are
// the caller's, as passed to Dispatch. A handler must not call Dispatch or
// Close of its own Dispatcher (with backpressure that could wait forever).
type Handler func(worker int, frames [][]byte)

// ErrDispatcherClosed is returned by Dispatch after Close.
var ErrDispatcherClosed = errors.New("dispatcher closed")

// ErrDispatchOptions reports invalid DispatchOptions.
var ErrDispatchOptions = errors.New("invalid dispatch options")

// Dispatcher spreads frames from one source over worker goroutines by
// flow hash, in software, for devices without RSS or with fewer RX queues
// than cores (what RPS does in the kernel). Each worker has a bounded queue;
// every frame is accounted for in Stats.
//
// A frame goes to worker (hash * Workers) >> 32 (or through the
// Indirection option), where hash is the Toeplitz hash of its flow key
// (see ParseFlowKey). That takes the hash's high bits,
// while RSS hardware picks the queue by its low bits, so behind one RX
// queue of an RSS device (same key) the flows still spread evenly. Frames without an IP header go
// by a hash of their MAC addresses; frames too short or inconsistent to
// parse go to worker 0. Both are counted.
//
// Dispatch and Stats are safe for concurrent use; Close unblocks a Dispatch
// that waits for room.
type Dispatcher struct {
	t       *Toeplitz
	sym     Symmetric
	drop    bool
	onDrop  func([]byte)
	handler Handler
	batch   int
	workers []*dworker
	indir   []uint32 // empty: worker = (hash * workers) >> 32

	mu     sync.Mutex // held by Dispatch and Close
	cur    []*frameBatch
	closed bool
	quit   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	frames, refused, nonIP, malformed, noPorts atomic.Uint64
}

type frameBatch struct{ frames [][]byte }

// dworker is one worker: its queues and counters. Producer-side and
// worker-side counters sit on different cache lines.
type dworker struct {
	work, free chan *frameBatch

	enqueued, dropped, batches atomic.Uint64
	_                          [64]byte
	delivered                  atomic.Uint64
	_                          [64]byte
}

// NewDispatcher starts the workers and returns a Dispatcher that hands
// frames to h. Close stops it.
func NewDispatcher(o DispatchOptions, h Handler) (*Dispatcher, error) {
	const op = "new dispatcher"
	if h == nil {
		return nil, fmt.Errorf("%s: handler is nil: %w", op, ErrDispatchOptions)
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.QueueLen == 0 {
		o.QueueLen = 4096
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
	switch {
	case o.Workers < 1 || o.Workers > 4096:
		return nil, fmt.Errorf("%s: Workers %d: must be between 1 and 4096: %w", op, o.Workers, ErrDispatchOptions)
	case o.BatchSize < 1 || o.BatchSize > 1<<16:
		return nil, fmt.Errorf("%s: BatchSize %d: must be between 1 and 65536: %w", op, o.BatchSize, ErrDispatchOptions)
	case o.QueueLen < 1 || o.QueueLen > 1<<24:
		return nil, fmt.Errorf("%s: QueueLen %d: must be between 1 and %d: %w", op, o.QueueLen, 1<<24, ErrDispatchOptions)
	case !o.Symmetric.valid():
		return nil, fmt.Errorf("%s: Symmetric %v: %w", op, o.Symmetric, ErrSymmetricInvalid)
	}
	if len(o.Indirection) > MaxTableSize {
		return nil, fmt.Errorf("%s: Indirection of %d entries: at most %d: %w", op, len(o.Indirection), MaxTableSize, ErrDispatchOptions)
	}
	for i, w := range o.Indirection {
		if w >= uint32(o.Workers) {
			return nil, fmt.Errorf("%s: Indirection[%d] = %d: only %d workers: %w", op, i, w, o.Workers, ErrDispatchOptions)
		}
	}
	t, err := NewToeplitz(o.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	d := &Dispatcher{
		t:       t,
		sym:     o.Symmetric,
		drop:    o.Drop,
		onDrop:  o.OnDrop,
		handler: h,
		batch:   o.BatchSize,
		indir:   slices.Clone(o.Indirection),
		quit:    make(chan struct{}),
		workers: make([]*dworker, o.Workers),
		cur:     make([]*frameBatch, o.Workers),
	}
	nbuf := (o.QueueLen + o.BatchSize - 1) / o.BatchSize
	for i := range d.workers {
		w := &dworker{work: make(chan *frameBatch, nbuf), free: make(chan *frameBatch, nbuf)}
		for range nbuf {
			w.free <- &frameBatch{frames: make([][]byte, 0, o.BatchSize)}
		}
		d.workers[i] = w
	}
	d.wg.Add(len(d.workers))
	for i, w := range d.workers {
		go d.run(i, w)
	}
	return d, nil
}

// run is worker i's loop: handle batches until Close, then return.
func (d *Dispatcher) run(i int, w *dworker) {
	defer d.wg.Done()
	for b := range w.work {
		d.handler(i, b.frames)
		w.delivered.Add(uint64(len(b.frames)))
		clear(b.frames) // do not keep the caller's buffers alive
		b.frames = b.frames[:0]
		w.free <- b // never blocks: free holds every batch of this worker
	}
}

// Worker returns the worker Dispatch sends frame to.
func (d *Dispatcher) Worker(frame []byte) int {
	w, _ := d.pick(frame)
	return w
}

// frame classes counted in Stats.
const (
	classPorts = iota
	classNoPorts
	classNonIP
	classMalformed
)

func (d *Dispatcher) pick(frame []byte) (int, int) {
	if h, ok := d.fastHash(frame); ok {
		return d.workerOf(h), classPorts
	}
	var lo offload.Layout
	fi, r := parseFlow(frame, &lo)
	var h uint32
	class := classPorts
	switch r {
	case flowOK:
		h = d.t.hashFrame(frame, fi, d.sym)
		if !fi.ports {
			class = classNoPorts
		}
	case flowNotIP, flowTooManyTags:
		// Keep the frames between two stations in order: hash the MACs.
		h = d.t.Hash(frame[:12])
		class = classNonIP
	default:
		return 0, classMalformed
	}
	return d.workerOf(h), class
}

// workerOf maps a hash to a worker, by the high bits of the hash.
func (d *Dispatcher) workerOf(h uint32) int {
	if len(d.indir) > 0 {
		return int(d.indir[uint64(h)*uint64(len(d.indir))>>32])
	}
	return int(uint64(h) * uint64(len(d.workers)) >> 32)
}

// fastHash hashes the most common frame, untagged IPv4 without options
// carrying TCP or UDP, not fragmented, with the checks parseFlow makes
// for it; ok is false for every other frame.
func (d *Dispatcher) fastHash(b []byte) (uint32, bool) {
	if d.sym != SymmetricNone || len(b) < 14+20+4 || b[12] != 0x08 || b[13] != 0x00 || b[14] != 0x45 {
		return 0, false
	}
	total := int(binary.BigEndian.Uint16(b[16:]))
	frag := binary.BigEndian.Uint16(b[20:]) & 0x3fff
	if proto := b[23]; frag != 0 || (proto != protoTCP && proto != protoUDP) || total < 20+4 || total > len(b)-14 {
		return 0, false
	}
	return d.t.HashIPv4Ports([4]byte(b[26:30]), [4]byte(b[30:34]), binary.BigEndian.Uint16(b[34:]), binary.BigEndian.Uint16(b[36:])), true
}

// Dispatch queues frames to the workers of their flows and returns how many
// it accepted. With backpressure it waits for room; with the Drop option
// it drops frames whose worker queue is full. Dropped frames are counted
// and passed to OnDrop. After Close (or when Close interrupts it) it
// returns ErrDispatcherClosed; the frames it did not accept are passed to
// OnDrop and counted as dropped.
//
// The frame bytes must stay valid and unchanged until the handler has
// returned for them (or OnDrop was called).
func (d *Dispatcher) Dispatch(frames ...[]byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frames.Add(uint64(len(frames)))
	if d.closed {
		d.refuse(frames)
		return 0, fmt.Errorf("dispatch %d frames: %w", len(frames), ErrDispatcherClosed)
	}
	var counts [4]uint64
	accepted := 0
	for i, f := range frames {
		wi, class := d.pick(f)
		counts[class]++
		b := d.cur[wi]
		if b == nil {
			var closing bool
			b, closing = d.acquire(wi)
			if closing {
				d.addClasses(counts)
				d.flush()
				d.refuse(frames[i:])
				return accepted, fmt.Errorf("dispatch: accepted %d of %d frames: %w", accepted, len(frames), ErrDispatcherClosed)
			}
			if b == nil {
				d.workers[wi].dropped.Add(1)
				if d.onDrop != nil {
					d.onDrop(f)
				}
				continue
			}
			d.cur[wi] = b
		}
		b.frames = append(b.frames, f)
		accepted++
		if len(b.frames) == d.batch {
			d.send(wi, b)
		}
	}
	d.addClasses(counts)
	d.flush()
	return accepted, nil
}

func (d *Dispatcher) addClasses(c [4]uint64) {
	if c[classNoPorts] > 0 {
		d.noPorts.Add(c[classNoPorts])
	}
	if c[classNonIP] > 0 {
		d.nonIP.Add(c[classNonIP])
	}
	if c[classMalformed] > 0 {
		d.malformed.Add(c[classMalformed])
	}
}

// acquire returns an empty batch of worker wi: nil when the queue is full
// and frames are dropped, closing true when Close interrupted the wait.
func (d *Dispatcher) acquire(wi int) (b *frameBatch, closing bool) {
	w := d.workers[wi]
	select {
	case b := <-w.free:
		return b, false
	default:
	}
	if d.drop {
		return nil, false
	}
	// About to wait for worker wi: hand the other workers what is batched
	// for them first, so they are not held up too.
	d.flush()
	select {
	case b := <-w.free:
		return b, false
	case <-d.quit:
		return nil, true
	}
}

// send queues batch b to worker wi. It never blocks: work has room for
// every batch of the worker.
func (d *Dispatcher) send(wi int, b *frameBatch) {
	w := d.workers[wi]
	w.enqueued.Add(uint64(len(b.frames)))
	w.batches.Add(1)
	w.work <- b
	d.cur[wi] = nil
}

// flush sends the partly filled batches, so no accepted frame waits for a
// later Dispatch.
func (d *Dispatcher) flush() {
	for wi, b := range d.cur {
		if b != nil { // never empty: a batch is taken for a frame
			d.send(wi, b)
		}
	}
}

// refuse counts frames as refused and hands them to OnDrop.
func (d *Dispatcher) refuse(frames [][]byte) {
	d.refused.Add(uint64(len(frames)))
	if d.onDrop != nil {
		for _, f := range frames {
			d.onDrop(f)
		}
	}
}

// Close stops accepting frames, interrupts a Dispatch waiting for room,
// lets the workers handle every frame already accepted, and waits for them
// to return. It is safe to call more than once.
func (d *Dispatcher) Close() error {
	d.once.Do(func() { close(d.quit) })
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		for _, w := range d.workers {
			close(w.work)
		}
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

// DispatchStats counts what a Dispatcher did with the frames it was given.
// Frames = Delivered + Dropped + Refused + Pending at every instant.
type DispatchStats struct {
	// Frames is the number of frames passed to Dispatch.
	Frames uint64 `json:"frames"`
	// Delivered counts frames whose handler call has returned.
	Delivered uint64 `json:"delivered"`
	// Dropped counts frames dropped because their worker's queue was full
	// (Drop option).
	Dropped uint64 `json:"dropped"`
	// Refused counts frames Dispatch did not accept because the Dispatcher
	// was closed.
	Refused uint64 `json:"refused"`
	// Pending counts frames accepted and not yet delivered.
	Pending uint64 `json:"pending"`
	// NoPorts, NonIP and Malformed classify the frames Dispatch looked at.
	//
	// NoPorts counts IP frames hashed on addresses alone (fragments, and
	// protocols other than TCP and UDP).
	NoPorts uint64 `json:"no_ports"`
	// NonIP counts frames without an IP header, dispatched by MAC addresses.
	NonIP uint64 `json:"non_ip"`
	// Malformed counts frames that did not parse, dispatched to worker 0.
	Malformed uint64 `json:"malformed"`
	// Workers has one entry per worker.
	Workers []WorkerStats `json:"workers"`
}

// WorkerStats counts one worker's frames.
type WorkerStats struct {
	// Enqueued counts frames queued to the worker.
	Enqueued uint64 `json:"enqueued"`
	// Delivered counts frames the worker's handler calls have returned for.
	Delivered uint64 `json:"delivered"`
	// Dropped counts frames for this worker dropped because its queue was
	// full.
	Dropped uint64 `json:"dropped"`
	// Batches counts handler calls queued.
	Batches uint64 `json:"batches"`
}

// Stats returns the counters. It may be called at any time, also after
// Close.
func (d *Dispatcher) Stats() DispatchStats {
	var s DispatchStats
	s.Workers = make([]WorkerStats, len(d.workers))
	// Read the outcomes before the total, so Pending never goes negative.
	for i, w := range d.workers {
		ws := WorkerStats{Delivered: w.delivered.Load(), Dropped: w.dropped.Load(), Batches: w.batches.Load(), Enqueued: w.enqueued.Load()}
		s.Workers[i] = ws
		s.Delivered += ws.Delivered
		s.Dropped += ws.Dropped
	}
	s.Refused = d.refused.Load()
	s.Frames = d.frames.Load()
	s.Pending = s.Frames - s.Delivered - s.Dropped - s.Refused
	s.NoPorts, s.NonIP, s.Malformed = d.noPorts.Load(), d.nonIP.Load(), d.malformed.Load()
	return s
}
