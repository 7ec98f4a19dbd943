package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/tcpplane"
	"github.com/xdpio/xdpio/internal/cpustat"
)

// TCPAcceptTimeout is how long a TCP-mode client waits after
// CREATE_STREAMS for the server's TCPAccept before it concludes that the
// server does not speak xdpio's TCP mode.
const TCPAcceptTimeout = 3 * time.Second

// AddSent counts TCP segments the sender handed to its TX ring
// (tcpplane.Counter).
func (s *stream) AddSent(bytes uint64, segments int64) {
	s.mu.Lock()
	s.sentB += bytes
	s.sentP += segments
	s.mu.Unlock()
}

// SetReceived sets the stream's receiver figures from the TCP receiver's
// (tcpplane.Counter): bytes in order; segments as datagrams; gaps, late
// segments and bad checksums as lost; gaps and late segments as out of
// order.
func (s *stream) SetReceived(in iperf3.TCPReceiverStream) {
	s.mu.Lock()
	s.recv.Bytes = in.InOrderBytes
	s.recv.Datagrams = in.Segments
	s.recv.Packets = in.Segments
	s.recv.Lost = in.OutOfOrder + in.Late + in.BadChecksum
	s.recv.OutOfOrder = in.OutOfOrder + in.Late
	s.mu.Unlock()
}

// counters returns sts as the counters of a TCP sender's or receiver's
// flows.
func counters(sts []*stream) []tcpplane.Counter {
	cs := make([]tcpplane.Counter, len(sts))
	for i, st := range sts {
		cs[i] = st
	}
	return cs
}

// tcpParams checks the client's settings for TCP mode and returns the
// params message.
func (c *Client) tcpParams() (iperf3.Params, error) {
	p := iperf3.Params{TCP: true, Parallel: c.Streams, Len: c.Length, Reverse: c.Reverse, ClientVersion: Version}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	d := c.Duration
	if d == 0 {
		d = 10 * time.Second
	}
	switch {
	case d < time.Second || d%time.Second != 0:
		return p, fmt.Errorf("invalid duration %v: must be whole seconds", d)
	case p.Parallel < 1 || p.Parallel > 128:
		return p, fmt.Errorf("invalid streams %d: must be 1..128", p.Parallel)
	case c.Reverse:
		return p, fmt.Errorf("TCP mode sends from client to server only (no -R): %w", ErrNotSupported)
	case p.Len < 0 || p.Len > iperf3.MaxTCPMSS:
		return p, fmt.Errorf("invalid length %d: must be 1..%d bytes per write in TCP mode", p.Len, iperf3.MaxTCPMSS)
	}
	p.Time = int(d / time.Second)
	if c.Bitrate != BitrateUnlimited {
		p.Bandwidth = c.Bitrate // 0: unlimited, as iperf3's TCP default
	}
	return p, nil
}

// tcpClientPhase is the data phase of xdpio's TCP mode at the client: a
// sender of one flow per stream to the server's data port.
type tcpClientPhase struct {
	c       *Client
	mss     int // the local interface's
	v6      bool
	snd     tcpplane.Sender
	sstats  iperf3.TCPSenderStats
	rstats  iperf3.TCPReceiverStats
	serr    error
	stopped bool
}

func (t *tcpClientPhase) params() (iperf3.Params, error) {
	c := t.c
	p, err := c.tcpParams()
	if err != nil {
		return p, err
	}
	if t.mss, err = tcpplane.LocalMSS(c.DataPlane, c.Server.Addr()); err != nil {
		return p, err
	}
	t.v6 = c.Server.Addr().Unmap().Is6()
	if c.Length == 0 {
		// The server's report shows it; recomputed at CREATE_STREAMS if
		// the server's MSS is smaller.
		p.Len = tcpplane.MaxWrite(t.v6, t.mss)
	}
	return p, nil
}

func (t *tcpClientPhase) connected(net.Conn, *iperf3.Params) {}

func (t *tcpClientPhase) paramsMsg(p iperf3.Params) any {
	return &iperf3.TCPParamsMsg{Params: p, TCP: &iperf3.TCPParams{Version: iperf3.TCPProtocolVersion, TSO: t.c.TSO, MSS: t.mss}}
}

func (t *tcpClientPhase) createStreams(conn net.Conn, rep *Report, p iperf3.Params, setup time.Duration, terminate func()) (*dataRun, error) {
	c := t.c
	if t.snd != nil {
		return nil, fmt.Errorf("CREATE_STREAMS twice: %w", iperf3.ErrProtocol)
	}
	// An xdpio server answers at once; a real iperf3 server waits for TCP
	// connections that will not come.
	conn.SetReadDeadline(time.Now().Add(TCPAcceptTimeout))
	var acc iperf3.TCPAccept
	if err := iperf3.ReadMessage(conn, &acc); err != nil {
		terminate()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("no answer to TCP mode %v after CREATE_STREAMS: %w", TCPAcceptTimeout, iperf3.ErrNotXDPIO)
		}
		return nil, fmt.Errorf("TCP mode answer: %w", err)
	}
	conn.SetDeadline(time.Now().Add(setup))
	useMSS := min(t.mss, acc.MSS)
	wlen := p.Len
	if c.Length == 0 {
		wlen = tcpplane.MaxWrite(t.v6, useMSS)
	}
	snd, err := tcpplane.OpenSender(c.DataPlane, tcpplane.SenderConfig{Server: netAddrPort(c.Server.Addr(), acc.DataPort), Streams: p.Parallel,
		MSS: useMSS, TSO: c.TSO, Write: wlen, Rate: p.Bandwidth, Corrupt: c.tcpCorrupt})
	if err != nil {
		terminate()
		return nil, err
	}
	t.snd = snd
	rep.Start.TestStart.Blksize = wlen
	ann := iperf3.TCPStreams{MSS: useMSS, Streams: snd.Flows()}
	if err := iperf3.WriteMessage(conn, &ann); err != nil {
		return nil, fmt.Errorf("announce streams: %w", err)
	}
	run := &dataRun{sender: true, tcp: true, blksize: wlen}
	g := &group{}
	for _, in := range ann.Streams {
		g.streams = append(g.streams, &stream{id: in.ID, peer: netAddrPort(c.Server.Addr(), acc.DataPort)})
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(in.ID), LocalHost: in.Src, LocalPort: int(in.SrcPort),
			RemoteHost: c.Server.Addr().String(), RemotePort: int(acc.DataPort)})
	}
	run.groups = []*group{g}
	return run, nil
}

func (t *tcpClientPhase) start(run *dataRun) {
	run.start = time.Now()
	run.cpu = cpustat.Start()
	t.snd.Start(counters(run.allStreams()), run.start)
}

func (t *tcpClientPhase) stopSending(run *dataRun) error { return t.stop(run) }

// stop stops the sender once (waiting until its TX rings are drained).
func (t *tcpClientPhase) stop(run *dataRun) error {
	if !t.stopped {
		t.stopped = true
		t.sstats, t.serr = t.snd.Stop()
		run.cpu.Thread(t.sstats.CPU.Total())
		run.end = time.Now()
	}
	return t.serr
}

func (t *tcpClientPhase) writeExtra(conn net.Conn) error {
	if err := iperf3.WriteMessage(conn, &t.sstats); err != nil {
		return fmt.Errorf("sender figures: %w", err)
	}
	return nil
}

func (t *tcpClientPhase) readExtra(conn net.Conn) error {
	if err := iperf3.ReadMessage(conn, &t.rstats); err != nil {
		return fmt.Errorf("receiver figures: %w", err)
	}
	return nil
}

func (t *tcpClientPhase) outOfOrder(*dataRun) map[int]int64 { return tcpOutOfOrder(t.rstats) }

func (t *tcpClientPhase) report(rep *Report, complete bool) {
	r := t.rstats
	if !complete {
		r = iperf3.TCPReceiverStats{}
	}
	reportTCP(rep, newTCPReport(t.sstats, r), t.c.OnTCPReport)
}

func (t *tcpClientPhase) close() {
	if t.snd != nil {
		t.snd.Close()
	}
}

// tcpOutOfOrder is each flow's segments out of order or late, from the
// receiver's figures.
func tcpOutOfOrder(r iperf3.TCPReceiverStats) map[int]int64 {
	ooo := map[int]int64{}
	for _, s := range r.Streams {
		ooo[s.ID] = s.OutOfOrder + s.Late
	}
	return ooo
}

func netAddrPort(a netip.Addr, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(a.Unmap(), port)
}

// tcpDataPort returns the data port for a test on the control address.
func (s *Server) tcpDataPort(local netip.AddrPort) uint16 {
	if s.TCPDataPort != 0 {
		return s.TCPDataPort
	}
	if local.Port() == 65535 {
		return 65534
	}
	return local.Port() + 1
}

// tcpServerPhase is the data phase of xdpio's TCP mode at the server: a
// receiver on the data port for the flows the client announces.
type tcpServerPhase struct {
	dp       plane.DataPlane
	p        iperf3.Params
	tp       *iperf3.TCPParams
	local    netip.AddrPort // the control connection's
	port     uint16         // the data port
	onReport func(*TCPReport)
	rcv      tcpplane.Receiver
	mss      int // announced by the client
	rstats   iperf3.TCPReceiverStats
	sstats   iperf3.TCPSenderStats
}

func (t *tcpServerPhase) open(ctx context.Context, c net.Conn, rep *Report, setup time.Duration) (*dataRun, <-chan stateOrErr, error) {
	p := t.p
	switch {
	case p.Reverse || p.Bidirectional:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("TCP mode in reverse: %w (client to server only)", ErrNotSupported)
	case p.Omit > 0:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("omitting %d s (-O): %w", p.Omit, ErrNotSupported)
	case p.Time == 0 || p.Num != 0 || p.Blockcount != 0:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("TCP mode needs a test time, not a byte or block count: %w", ErrNotSupported)
	}
	rcv, err := tcpplane.OpenReceiver(t.dp, t.local, t.port)
	if err != nil {
		code := int32(iperf3.IEStreamListen)
		if errors.Is(err, ErrNotSupported) {
			code = iperf3.IEUnimp // not the AF_XDP data plane
		}
		iperf3.WriteServerError(c, code, 0)
		return nil, nil, err
	}
	t.rcv = rcv
	context.AfterFunc(ctx, func() { rcv.Close() })
	if err := iperf3.WriteState(c, iperf3.CreateStreams); err != nil {
		return nil, nil, err
	}
	acc := iperf3.TCPAccept{Version: iperf3.TCPProtocolVersion, DataPort: rcv.Port(), MSS: rcv.MSS()}
	if err := iperf3.WriteMessage(c, &acc); err != nil {
		return nil, nil, err
	}
	var ann iperf3.TCPStreams
	if err := iperf3.ReadMessage(c, &ann); err != nil {
		return nil, nil, fmt.Errorf("stream announcement: %w", err)
	}
	if len(ann.Streams) != p.Parallel || ann.MSS > rcv.MSS() {
		iperf3.WriteServerError(c, iperf3.IEStreamAccept, 0)
		return nil, nil, fmt.Errorf("%d streams of MSS %d announced, want %d of at most %d: %w", len(ann.Streams), ann.MSS, p.Parallel, rcv.MSS(), iperf3.ErrProtocol)
	}
	t.mss = ann.MSS
	run := &dataRun{sender: false, tcp: true, blksize: p.Len}
	g := &group{}
	for _, in := range ann.Streams {
		a, _ := netip.ParseAddr(in.Src)
		g.streams = append(g.streams, &stream{id: in.ID, peer: netAddrPort(a, in.SrcPort), local: netAddrPort(t.local.Addr(), rcv.Port())})
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(in.ID), LocalHost: t.local.Addr().String(), LocalPort: int(rcv.Port()),
			RemoteHost: a.String(), RemotePort: int(in.SrcPort)})
	}
	run.groups = []*group{g}
	rcv.Register(ann.Streams, counters(g.streams))
	return run, watchControl(c), nil
}

func (t *tcpServerPhase) start(run *dataRun) {
	run.start = time.Now()
	run.cpu = cpustat.Start()
	t.rcv.Start(run.start)
}

func (t *tcpServerPhase) stop(run *dataRun) error {
	t.rstats = t.rcv.Stop()
	run.cpu.Thread(t.rstats.CPU.Total())
	run.end = run.stopTime()
	if !run.endMark.IsZero() {
		// The receiver's window ends at TEST_END, as the UDP test's.
		t.rstats.Seconds = run.end.Sub(run.start).Seconds()
	}
	return nil
}

func (t *tcpServerPhase) outOfOrder(*dataRun) map[int]int64 { return tcpOutOfOrder(t.rstats) }

func (t *tcpServerPhase) readExtra(c net.Conn) error {
	if err := iperf3.ReadMessage(c, &t.sstats); err != nil {
		return fmt.Errorf("sender figures: %w", err)
	}
	return nil
}

func (t *tcpServerPhase) writeExtra(c net.Conn) error {
	if err := iperf3.WriteMessage(c, &t.rstats); err != nil {
		return err
	}
	return nil
}

func (t *tcpServerPhase) report(rep *Report, complete bool) {
	s := t.sstats
	if !complete {
		s = iperf3.TCPSenderStats{TSO: t.tp.TSO, MSS: t.mss}
	}
	reportTCP(rep, newTCPReport(s, t.rstats), t.onReport)
}

func (t *tcpServerPhase) close() {
	if t.rcv != nil {
		t.rcv.Close()
	}
}

// reportTCP puts a TCP-mode test's figures in rep and hands them to
// onReport, if set.
func reportTCP(rep *Report, r *TCPReport, onReport func(*TCPReport)) {
	if rep != nil {
		rep.TCP = r
	}
	if onReport != nil {
		onReport(r)
	}
}
