package plane

import (
	"errors"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/coalesce"
)

// Message is one UDP datagram in a batch: the payload (without IP and UDP
// headers) and the peer's address.
type Message struct {
	// Buf holds the payload: on write the first N bytes are sent; on read
	// the datagram is copied into it and N set.
	Buf []byte
	N   int
	// Addr is the peer: the destination on write (ignored by a connected
	// PacketConn), the source on read.
	Addr netip.AddrPort
}

// PacketConn is one endpoint of the data plane: UDP datagrams in batches.
// A PacketConn is used by one goroutine at a time, except Close, which
// unblocks a blocked call.
type PacketConn interface {
	// ReadBatch receives up to len(msgs) datagrams, blocking until at
	// least one arrives or the read deadline passes (an error satisfying
	// os.ErrDeadlineExceeded).
	ReadBatch(msgs []Message) (int, error)
	// WriteBatch sends msgs in order and returns how many were sent. A
	// full queue returns the count so far with a nil error or
	// ErrBackpressure, and the caller retries the rest later; or the call
	// waits until there is room (xskplane.DataPlane), which Close ends.
	WriteBatch(msgs []Message) (int, error)
	// SetReadDeadline bounds ReadBatch calls; the zero time removes it.
	SetReadDeadline(t time.Time) error
	// LocalAddr is the endpoint's own address.
	LocalAddr() netip.AddrPort
	// Close releases the endpoint.
	Close() error
}

// BufferedConn is a PacketConn over a kernel socket, which can tell its
// socket buffers: what it asked for and what the kernel gave (a report's
// sock_bufsize, sndbuf_actual and rcvbuf_actual, as iperf3 reports
// them). An AF_XDP conn has no socket buffer on its path and does not
// implement it.
type BufferedConn interface {
	PacketConn
	// SocketBuffers returns the buffer size the conn asked for (0 for
	// none) and the send and receive buffer sizes the kernel reports
	// (SO_SNDBUF, SO_RCVBUF: twice what it granted, as the kernel counts
	// its bookkeeping in).
	SocketBuffers() (requested, send, receive int, err error)
}

// DataPlane opens the endpoints a test's UDP streams run on. The kernel
// socket implementation is kernelplane.DataPlane; an AF_XDP one plugs in here.
// Placer chooses the source port of each stream a client dials, so that
// the server NIC's RSS sends it to a chosen RX queue; package place
// implements it with a software model of the NIC's hash.
type Placer interface {
	// Port chooses the source port of the next stream from src to
	// remote among lo..hi (both zero: Linux's ephemeral range), and
	// returns it with the server queue it places the stream on.
	Port(src netip.Addr, remote netip.AddrPort, lo, hi uint16) (port uint16, queue uint32, err error)
}

type DataPlane interface {
	// Listen opens the server's endpoint on local (the port of the
	// control connection). All streams of a test arrive on it and are
	// told apart by their source address.
	Listen(local netip.AddrPort) (PacketConn, error)
	// Dial opens a client stream's endpoint towards remote, with its own
	// source port.
	Dial(remote netip.AddrPort) (PacketConn, error)
}

// MultiQueueConn is a PacketConn whose datagrams arrive on several
// receive queues that can each be read on their own, without copying:
// AF_XDP, with one socket per RX queue. A receiving end runs one goroutine
// per reader over it instead of one ReadBatch loop, so the queues are read
// in parallel and each datagram is looked at where the kernel put it.
// ReadBatch reads the same readers (copying), so that a conn can be read
// with ReadBatch first (stream setup) and with its QueueReaders then.
type MultiQueueConn interface {
	PacketConn
	// QueueReaders returns the conn's readers: one per receive queue, in
	// queue order, and after them, if the conn has one, the reader of
	// its kernel socket (KernelSocketQueue); or a single reader of
	// everything (Queue -1). Every reader must be read: datagrams of one
	// that is not are not received.
	QueueReaders() []QueueReader
}

// KernelSocketQueue is QueueReader.Queue of the reader of the kernel UDP
// socket an AF_XDP endpoint holds on its address (package xdpnet's): the
// datagrams that reach the kernel instead of an AF_XDP socket (IPv4
// fragments, which the kernel reassembles; datagrams on queues without a
// socket) are read from it.
const KernelSocketQueue = -2

// QueueReader reads the datagrams of one receive queue in place. It is
// used by one goroutine.
type QueueReader interface {
	// Queue is the receive queue's number, -1 for a reader of every
	// queue, or KernelSocketQueue.
	Queue() int
	// ReadView fills msgs with up to len(msgs) datagrams, blocking up to
	// timeout until one arrives (0 datagrams and a nil error when it
	// passes). Buf of each message aliases the receive ring's frame: it
	// stays valid until the next ReadView or Done call on this reader,
	// which give the frames back to the kernel. After the conn is closed
	// it returns an error matching net.ErrClosed.
	ReadView(msgs []Message, timeout time.Duration) (int, error)
	// Done gives back the frames of the last ReadView. The frames a
	// reader holds stay valid, also across the conn's Close, until Done
	// or the next ReadView.
	Done()
}

// QueueCount is what one RX queue's socket received during a test.
type QueueCount struct {
	Queue int `json:"queue"`
	// Packets and Bytes are the frames the socket took from its RX ring
	// (what RSS and the XDP filter steered to the queue), delivered or
	// not.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Dropped is what the kernel could not deliver to the socket
	// (rx_dropped + rx_ring_full).
	Dropped uint64 `json:"dropped"`
	// Refused is the frames the socket took that carried no datagram for
	// the endpoint and were not delivered (package xdpnet's Drops: bad
	// or unfinished checksums, malformed frames, other ports), when the
	// data plane checks them.
	Refused uint64 `json:"refused,omitempty"`
	// Coalesce is the queue's software coalescing counters (batches,
	// frames per batch, wake-ups, the delay frames waited), when the data
	// plane coalesced.
	Coalesce *coalesce.RXStats `json:"coalesce,omitempty"`
}

// BatchSize is the engine's batch: the datagrams it reads or writes in
// one call, and what a data plane sizes its own batches to.
const BatchSize = 64

// ErrBackpressure reports that a send queue is full.
var ErrBackpressure = errors.New("send queue full")
