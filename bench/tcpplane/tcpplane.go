package tcpplane

import (
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
)

// Counter is where a Sender or Receiver counts one flow as it goes: the
// engine's stream, whose figures make the test's intervals. Its methods
// may be called from the data plane's goroutines while the engine reads.
type Counter interface {
	// AddSent counts segments handed to the TX ring: their payload bytes
	// and their number.
	AddSent(bytes uint64, segments int64)
	// SetReceived sets the flow's figures at the receiver so far.
	SetReceived(iperf3.TCPReceiverStream)
}

// Sender is the client's data path in TCP mode.
type Sender interface {
	// Flows returns the flows to announce, in stream order.
	Flows() []iperf3.TCPStreamInfo
	// Start begins sending; counters[i] counts flow i.
	Start(counters []Counter, start time.Time)
	// Stop ends sending, waits until the TX rings are drained, and returns
	// the figures.
	Stop() (iperf3.TCPSenderStats, error)
	// Close releases the sockets (after stopping, if Stop was not called).
	Close() error
}

// SenderConfig describes the flows a client sends.
type SenderConfig struct {
	Server  netip.AddrPort // the data port's address
	Streams int
	MSS     int
	TSO     bool   // software TSO: each write cut by offload.SegmentPayload
	Write   int    // bytes per write
	Rate    uint64 // bits/s per flow; 0 unlimited
	// Corrupt, a test hook, may change a frame after its checksums were
	// filled (flow index, segment number from 0 within the flow).
	Corrupt func(flow int, seg int64, frame []byte)
}

// Receiver is the server's data path in TCP mode.
type Receiver interface {
	// Port is the data port.
	Port() uint16
	// MSS is the largest segment payload the interface's MTU allows.
	MSS() int
	// Register makes the announced flows known; counters[i] counts
	// infos[i].
	Register(infos []iperf3.TCPStreamInfo, counters []Counter)
	// Start begins counting.
	Start(start time.Time)
	// Stop reads what is still queued, stops and returns the figures.
	Stop() iperf3.TCPReceiverStats
	// Close stops, if Stop was not called, and releases the sockets and
	// the data port.
	Close() error
}

// Plane is a data plane that carries TCP mode by other means than
// xskplane.DataPlane (the tests' fakes): the Open functions and LocalMSS
// hand over to it.
type Plane interface {
	// TCPMSS is LocalMSS for this data plane.
	TCPMSS(dst netip.Addr) (int, error)
	// OpenTCPSender is OpenSender for this data plane.
	OpenTCPSender(cfg SenderConfig) (Sender, error)
	// OpenTCPReceiver is OpenReceiver for this data plane.
	OpenTCPReceiver(local netip.AddrPort, port uint16) (Receiver, error)
}

// LocalMSS returns the largest MSS the interface of dp allows towards an
// address of dst's family: its MTU less the IP and TCP headers, and no
// more than a UMEM frame holds.
func LocalMSS(dp plane.DataPlane, dst netip.Addr) (int, error) {
	if p, ok := dp.(Plane); ok {
		return p.TCPMSS(dst)
	}
	return localMSS(dp, dst)
}

// OpenSender opens the sockets of cfg's flows on dp and builds their
// headers; Start sends.
func OpenSender(dp plane.DataPlane, cfg SenderConfig) (Sender, error) {
	if p, ok := dp.(Plane); ok {
		return p.OpenTCPSender(cfg)
	}
	return openSender(dp, cfg)
}

// OpenReceiver reserves the data port on the server's address local and
// opens the sockets with their XDP filter for it on dp.
func OpenReceiver(dp plane.DataPlane, local netip.AddrPort, port uint16) (Receiver, error) {
	if p, ok := dp.(Plane); ok {
		return p.OpenTCPReceiver(local, port)
	}
	return openReceiver(dp, local, port)
}
