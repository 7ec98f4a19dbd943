package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// tcpReceiver is the server's data path in TCP mode (AF_XDP on Linux).
type tcpReceiver interface {
	// Port is the data port; MSS the largest segment payload the
	// interface's MTU allows.
	Port() uint16
	MSS() int
	// Register makes the announced flows known; sts[i] counts infos[i].
	Register(infos []TCPStreamInfo, sts []*stream)
	// Start begins counting.
	Start(start time.Time)
	// Stop reads what is still queued, stops and returns the figures.
	Stop() TCPReceiverStats
	Close() error
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

// serveTCP runs a TCP-mode test after the parameters were read.
func (s *Server) serveTCP(ctx context.Context, c net.Conn, rep *Report, p Params, tp *TCPParams, local netip.AddrPort, setup time.Duration) (_ *Report, err error) {
	switch {
	case p.Reverse || p.Bidirectional:
		writeServerError(c, ieUnimp, 0)
		return rep, fmt.Errorf("server: TCP mode in reverse: %w (client to server only)", ErrUnsupported)
	case p.Omit > 0:
		writeServerError(c, ieUnimp, 0)
		return rep, fmt.Errorf("server: omitting %d s (-O): %w", p.Omit, ErrUnsupported)
	case p.Time == 0 || p.Num != 0 || p.Blockcount != 0:
		writeServerError(c, ieUnimp, 0)
		return rep, fmt.Errorf("server: TCP mode needs a test time, not a byte or block count: %w", ErrUnsupported)
	}
	rcv, err := openTCPReceiver(s.dataPlane(), local, s.tcpDataPort(local))
	if err != nil {
		code := int32(ieStreamListen)
		if errors.Is(err, ErrUnsupported) {
			code = ieUnimp // not the AF_XDP data plane
		}
		writeServerError(c, code, 0)
		return rep, fmt.Errorf("server: %w", err)
	}
	defer rcv.Close()
	context.AfterFunc(ctx, func() { rcv.Close() })
	if err := WriteState(c, CreateStreams); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	acc := TCPAccept{Version: TCPProtocolVersion, DataPort: rcv.Port(), MSS: rcv.MSS()}
	if err := WriteMessage(c, &acc); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	var ann TCPStreams
	if err := ReadMessage(c, &ann); err != nil {
		return rep, fmt.Errorf("server: stream announcement: %w", err)
	}
	if len(ann.Streams) != p.Parallel || ann.MSS > rcv.MSS() {
		writeServerError(c, ieStreamAccept, 0)
		return rep, fmt.Errorf("server: %d streams of MSS %d announced, want %d of at most %d: %w", len(ann.Streams), ann.MSS, p.Parallel, rcv.MSS(), ErrProtocol)
	}
	run := &dataRun{sender: false, blksize: p.Len}
	g := &group{}
	for _, in := range ann.Streams {
		a, _ := netip.ParseAddr(in.Src)
		g.streams = append(g.streams, &stream{id: in.ID, peer: netAddrPort(a, in.SrcPort), local: netAddrPort(local.Addr(), rcv.Port())})
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: in.ID, LocalHost: local.Addr().String(), LocalPort: int(rcv.Port()),
			RemoteHost: a.String(), RemotePort: int(in.SrcPort)})
	}
	run.groups = []*group{g}
	rcv.Register(ann.Streams, g.streams)

	ctl := make(chan stateOrErr, 1)
	c.SetReadDeadline(time.Time{})
	go func() {
		st, err := ReadState(c)
		ctl <- stateOrErr{st, err}
	}()
	if err := WriteState(c, TestStart); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := WriteState(c, TestRunning); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	ir := newIntervalReporter(run, orDefault(s.Interval, time.Second), s.OnInterval)
	run.start = time.Now()
	run.cpu = startCPUMeter()
	rcv.Start(run.start)
	ir.begin()

	endErr := awaitTestEnd(ctx, c, ctl, nil, time.Duration(p.Time)*time.Second+orDefault(s.Slack, 10*time.Second), p.Time)
	rstats := rcv.Stop()
	run.cpu.thread(rstats.CPU.Total())
	run.end = time.Now()
	rep.Intervals = ir.finish()
	localRes := run.results()
	ooo := map[int]int64{}
	for _, st := range rstats.Streams {
		ooo[st.ID] = st.OutOfOrder + st.Late
	}
	if endErr != nil {
		rep.End = endFromOne(localRes, false, ooo)
		s.reportTCP(rep, newTCPReport(TCPSenderStats{TSO: tp.TSO, MSS: ann.MSS}, rstats))
		return rep, endErr
	}

	c.SetDeadline(time.Now().Add(setup))
	if err := WriteState(c, ExchangeResults); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	var remoteRes Results
	if err := ReadMessage(c, &remoteRes); err != nil {
		return rep, fmt.Errorf("server: client results: %w", err)
	}
	var sstats TCPSenderStats
	if err := ReadMessage(c, &sstats); err != nil {
		return rep, fmt.Errorf("server: sender figures: %w", err)
	}
	rep.End = buildEnd(remoteRes, localRes, false, ooo)
	s.reportTCP(rep, newTCPReport(sstats, rstats))
	if p.GetServerOutput != 0 {
		if b, err := json.Marshal(rep); err == nil {
			localRes.ServerOutputJSON = b
		}
	}
	if err := WriteMessage(c, &localRes); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := WriteMessage(c, &rstats); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := WriteState(c, DisplayResults); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	st, err := ReadState(c)
	switch {
	case err != nil:
		return rep, fmt.Errorf("server: waiting for IPERF_DONE: %w", err)
	case st != IperfDone:
		return rep, fmt.Errorf("server: got %v, want IPERF_DONE: %w", st, ErrProtocol)
	}
	return rep, nil
}

// reportTCP puts a TCP-mode test's figures in rep and hands them to
// OnTCPReport.
func (s *Server) reportTCP(rep *Report, r *TCPReport) {
	if rep != nil {
		rep.TCP = r
	}
	if s.OnTCPReport != nil {
		s.OnTCPReport(r)
	}
}
