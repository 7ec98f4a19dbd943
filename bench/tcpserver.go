package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/internal/cpustat"
)

// tcpReceiver is the server's data path in TCP mode (AF_XDP on Linux).
type tcpReceiver interface {
	// Port is the data port; MSS the largest segment payload the
	// interface's MTU allows.
	Port() uint16
	MSS() int
	// Register makes the announced flows known; sts[i] counts infos[i].
	Register(infos []iperf3.TCPStreamInfo, sts []*stream)
	// Start begins counting.
	Start(start time.Time)
	// Stop reads what is still queued, stops and returns the figures.
	Stop() iperf3.TCPReceiverStats
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
func (s *Server) serveTCP(ctx context.Context, c net.Conn, rep *Report, p iperf3.Params, tp *iperf3.TCPParams, local netip.AddrPort, setup time.Duration) (_ *Report, err error) {
	switch {
	case p.Reverse || p.Bidirectional:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return rep, fmt.Errorf("server: TCP mode in reverse: %w (client to server only)", ErrUnsupported)
	case p.Omit > 0:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return rep, fmt.Errorf("server: omitting %d s (-O): %w", p.Omit, ErrUnsupported)
	case p.Time == 0 || p.Num != 0 || p.Blockcount != 0:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return rep, fmt.Errorf("server: TCP mode needs a test time, not a byte or block count: %w", ErrUnsupported)
	}
	rcv, err := openTCPReceiver(s.dataPlane(), local, s.tcpDataPort(local))
	if err != nil {
		code := int32(iperf3.IEStreamListen)
		if errors.Is(err, ErrUnsupported) {
			code = iperf3.IEUnimp // not the AF_XDP data plane
		}
		iperf3.WriteServerError(c, code, 0)
		return rep, fmt.Errorf("server: %w", err)
	}
	defer rcv.Close()
	context.AfterFunc(ctx, func() { rcv.Close() })
	if err := iperf3.WriteState(c, iperf3.CreateStreams); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	acc := iperf3.TCPAccept{Version: iperf3.TCPProtocolVersion, DataPort: rcv.Port(), MSS: rcv.MSS()}
	if err := iperf3.WriteMessage(c, &acc); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	var ann iperf3.TCPStreams
	if err := iperf3.ReadMessage(c, &ann); err != nil {
		return rep, fmt.Errorf("server: stream announcement: %w", err)
	}
	if len(ann.Streams) != p.Parallel || ann.MSS > rcv.MSS() {
		iperf3.WriteServerError(c, iperf3.IEStreamAccept, 0)
		return rep, fmt.Errorf("server: %d streams of MSS %d announced, want %d of at most %d: %w", len(ann.Streams), ann.MSS, p.Parallel, rcv.MSS(), iperf3.ErrProtocol)
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
		st, err := iperf3.ReadState(c)
		ctl <- stateOrErr{st, err}
	}()
	if err := iperf3.WriteState(c, iperf3.TestStart); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := iperf3.WriteState(c, iperf3.TestRunning); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	ir := newIntervalReporter(run, orDefault(s.Interval, time.Second), s.OnInterval)
	run.start = time.Now()
	run.cpu = cpustat.Start()
	rcv.Start(run.start)
	ir.begin()

	endErr := awaitTestEnd(ctx, c, ctl, nil, time.Duration(p.Time)*time.Second+orDefault(s.Slack, 10*time.Second), p.Time)
	rstats := rcv.Stop()
	run.cpu.Thread(rstats.CPU.Total())
	run.end = time.Now()
	rep.Intervals = ir.finish()
	localRes := run.results()
	ooo := map[int]int64{}
	for _, st := range rstats.Streams {
		ooo[st.ID] = st.OutOfOrder + st.Late
	}
	if endErr != nil {
		rep.End = endFromOne(localRes, false, ooo)
		rep.End.HostCPU = run.host
		s.reportTCP(rep, newTCPReport(iperf3.TCPSenderStats{TSO: tp.TSO, MSS: ann.MSS}, rstats))
		return rep, endErr
	}

	c.SetDeadline(time.Now().Add(setup))
	if err := iperf3.WriteState(c, iperf3.ExchangeResults); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	var remoteRes iperf3.Results
	if err := iperf3.ReadMessage(c, &remoteRes); err != nil {
		return rep, fmt.Errorf("server: client results: %w", err)
	}
	var sstats iperf3.TCPSenderStats
	if err := iperf3.ReadMessage(c, &sstats); err != nil {
		return rep, fmt.Errorf("server: sender figures: %w", err)
	}
	rep.End = buildEnd(remoteRes, localRes, false, ooo)
	rep.End.HostCPU = run.host
	s.reportTCP(rep, newTCPReport(sstats, rstats))
	if p.GetServerOutput != 0 {
		if b, err := json.Marshal(rep); err == nil {
			localRes.ServerOutputJSON = b
		}
	}
	if err := iperf3.WriteMessage(c, &localRes); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := iperf3.WriteMessage(c, &rstats); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	if err := iperf3.WriteState(c, iperf3.DisplayResults); err != nil {
		return rep, fmt.Errorf("server: %w", err)
	}
	st, err := iperf3.ReadState(c)
	switch {
	case err != nil:
		return rep, fmt.Errorf("server: waiting for IPERF_DONE: %w", err)
	case st != iperf3.IperfDone:
		return rep, fmt.Errorf("server: got %v, want IPERF_DONE: %w", st, iperf3.ErrProtocol)
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
