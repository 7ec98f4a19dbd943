package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/internal/cpustat"
)

// TCPAcceptTimeout is how long a TCP-mode client waits after
// CREATE_STREAMS for the server's TCPAccept before it concludes that the
// server does not speak xdpio's TCP mode.
const TCPAcceptTimeout = 3 * time.Second

// tcpSender is the client's data path in TCP mode (AF_XDP on Linux).
type tcpSender interface {
	// Flows returns the flows to announce, in stream order.
	Flows() []iperf3.TCPStreamInfo
	// Start begins sending; sts[i] counts flow i.
	Start(sts []*stream, start time.Time)
	// Stop ends sending, waits until the TX rings are drained, and returns
	// the figures.
	Stop() (iperf3.TCPSenderStats, error)
	Close() error
}

// tcpSenderConfig describes the flows a client sends.
type tcpSenderConfig struct {
	server  netip.AddrPort // the data port's address
	streams int
	mss     int
	tso     bool
	wlen    int    // bytes per write
	rate    uint64 // bits/s per flow; 0 unlimited
	// corrupt, a test hook, may change a frame after its checksums were
	// filled (flow index, segment number from 0 within the flow).
	corrupt func(flow int, seg int64, frame []byte)
}

// tcpPlane is a data plane that carries TCP mode by other means than
// xskplane.DataPlane (the tests' fakes).
type tcpPlane interface {
	tcpMSS(dst netip.Addr) (int, error)
	openTCPSender(cfg tcpSenderConfig) (tcpSender, error)
	openTCPReceiver(local netip.AddrPort, port uint16) (tcpReceiver, error)
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
		return p, fmt.Errorf("TCP mode sends from client to server only (no -R): %w", ErrUnsupported)
	case p.Len < 0 || p.Len > iperf3.MaxTCPMSS:
		return p, fmt.Errorf("invalid length %d: must be 1..%d bytes per write in TCP mode", p.Len, iperf3.MaxTCPMSS)
	}
	p.Time = int(d / time.Second)
	if c.Bitrate != BitrateUnlimited {
		p.Bandwidth = c.Bitrate // 0: unlimited, as iperf3's TCP default
	}
	return p, nil
}

// runTCP is Run in TCP mode. See TCPParamsKey for the protocol.
func (c *Client) runTCP(ctx context.Context) (rep *Report, err error) {
	rep = &Report{}
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	p, err := c.tcpParams()
	if err != nil {
		return rep, fmt.Errorf("client: %w", err)
	}
	mss, err := localTCPMSS(c.DataPlane, c.Server.Addr())
	if err != nil {
		return rep, fmt.Errorf("client: %w", err)
	}
	v6 := c.Server.Addr().Unmap().Is6()
	if c.Length == 0 {
		// The server's report shows it; recomputed below if the server's
		// MSS is smaller.
		p.Len = maxWrite(v6, mss)
	}
	conn, stopClose, err := c.connect(ctx)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	defer stopClose()
	setup := orDefault(c.SetupTimeout, 10*time.Second)

	cookie := iperf3.NewCookie()
	now := time.Now()
	rep.Start = ReportStart{Version: Version, Cookie: cookie.String(),
		Timestamp:    Timestamp{Time: now.UTC().Format(time.RFC1123), Timesecs: now.Unix()},
		ConnectingTo: &HostPort{Host: c.Server.Addr().String(), Port: int(c.Server.Port())},
		TestStart:    TestParams{Protocol: "TCP", NumStreams: p.Parallel, Blksize: p.Len, Duration: p.Time, TargetBitrate: p.Bandwidth}}
	conn.SetDeadline(time.Now().Add(setup))
	if _, err := conn.Write(cookie[:]); err != nil {
		return rep, fmt.Errorf("client: send cookie: %w", err)
	}
	terminate := func() {
		iperf3.WriteState(conn, iperf3.ClientTerminate)
	}

	var snd tcpSender
	defer func() {
		if snd != nil {
			snd.Close()
		}
	}()
	var run *dataRun
	var ir *intervalReporter
	var sstats iperf3.TCPSenderStats
	var pending *stateOrErr
	for {
		var st iperf3.State
		if pending != nil {
			st, err = pending.st, pending.err
			pending = nil
		} else {
			st, err = iperf3.ReadState(conn)
		}
		if err != nil {
			if ctx.Err() != nil {
				return rep, fmt.Errorf("client: %w", ctx.Err())
			}
			return rep, fmt.Errorf("client: control connection: %w", err)
		}
		switch st {
		case iperf3.ParamExchange:
			m := iperf3.TCPParamsMsg{Params: p, TCP: &iperf3.TCPParams{Version: iperf3.TCPProtocolVersion, TSO: c.TSO, MSS: mss}}
			if err := iperf3.WriteMessage(conn, &m); err != nil {
				return rep, fmt.Errorf("client: parameters: %w", err)
			}
		case iperf3.CreateStreams:
			if run != nil {
				return rep, fmt.Errorf("client: CREATE_STREAMS twice: %w", iperf3.ErrProtocol)
			}
			// An xdpio server answers at once; a real iperf3 server waits
			// for TCP connections that will not come.
			conn.SetReadDeadline(time.Now().Add(TCPAcceptTimeout))
			var acc iperf3.TCPAccept
			if err := iperf3.ReadMessage(conn, &acc); err != nil {
				terminate()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return rep, fmt.Errorf("client: no answer to TCP mode %v after CREATE_STREAMS: %w", TCPAcceptTimeout, iperf3.ErrNotXDPIO)
				}
				return rep, fmt.Errorf("client: TCP mode answer: %w", err)
			}
			conn.SetDeadline(time.Now().Add(setup))
			useMSS := min(mss, acc.MSS)
			wlen := p.Len
			if c.Length == 0 {
				wlen = maxWrite(v6, useMSS)
			}
			snd, err = openTCPSender(c.DataPlane, tcpSenderConfig{server: netAddrPort(c.Server.Addr(), acc.DataPort), streams: p.Parallel,
				mss: useMSS, tso: c.TSO, wlen: wlen, rate: p.Bandwidth, corrupt: c.tcpCorrupt})
			if err != nil {
				terminate()
				return rep, fmt.Errorf("client: %w", err)
			}
			rep.Start.TestStart.Blksize = wlen
			ann := iperf3.TCPStreams{MSS: useMSS, Streams: snd.Flows()}
			if err := iperf3.WriteMessage(conn, &ann); err != nil {
				return rep, fmt.Errorf("client: announce streams: %w", err)
			}
			run = &dataRun{sender: true, blksize: wlen}
			g := &group{}
			for _, in := range ann.Streams {
				g.streams = append(g.streams, &stream{id: in.ID, peer: netAddrPort(c.Server.Addr(), acc.DataPort)})
				rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: in.ID, LocalHost: in.Src, LocalPort: int(in.SrcPort),
					RemoteHost: c.Server.Addr().String(), RemotePort: int(acc.DataPort)})
			}
			run.groups = []*group{g}
		case iperf3.TestStart:
		case iperf3.TestRunning:
			if run == nil {
				return rep, fmt.Errorf("client: TEST_RUNNING before CREATE_STREAMS: %w", iperf3.ErrProtocol)
			}
			conn.SetDeadline(time.Time{})
			ctl := make(chan stateOrErr, 1)
			go func() {
				st, err := iperf3.ReadState(conn)
				ctl <- stateOrErr{st, err}
			}()
			ir = newIntervalReporter(run, orDefault(c.Interval, time.Second), c.OnInterval)
			run.start = time.Now()
			run.cpu = cpustat.Start()
			snd.Start(run.allStreams(), run.start)
			ir.begin()
			timer := time.NewTimer(time.Duration(p.Time) * time.Second)
			select {
			case <-timer.C:
			case m := <-ctl:
				timer.Stop()
				sstats, _ = snd.Stop()
				run.cpu.Thread(sstats.CPU.Total())
				run.end = time.Now()
				rep.Intervals = ir.finish()
				pending = &m
				continue
			case <-ctx.Done():
				timer.Stop()
				sstats, _ = snd.Stop()
				run.cpu.Thread(sstats.CPU.Total())
				run.end = time.Now()
				rep.Intervals = ir.finish()
				rep.End = endFromOne(run.results(), true, nil)
				rep.End.HostCPU = run.host
				c.reportTCP(rep, newTCPReport(sstats, iperf3.TCPReceiverStats{}))
				return rep, fmt.Errorf("client: %w", ctx.Err())
			}
			timer.Stop()
			var serr error
			sstats, serr = snd.Stop()
			run.cpu.Thread(sstats.CPU.Total())
			run.end = time.Now()
			rep.Intervals = ir.finish()
			if serr != nil {
				terminate()
				return rep, fmt.Errorf("client: data plane: %w", serr)
			}
			// Let the receiver take in what is in flight before TEST_END.
			drain := time.NewTimer(tailGrace)
			select {
			case <-drain.C:
			case <-ctx.Done():
			}
			drain.Stop()
			if err := iperf3.WriteState(conn, iperf3.TestEnd); err != nil {
				return rep, fmt.Errorf("client: %w", err)
			}
			m := <-ctl
			pending = &m
			conn.SetDeadline(time.Now().Add(setup))
		case iperf3.ExchangeResults:
			if run == nil || snd == nil {
				return rep, fmt.Errorf("client: EXCHANGE_RESULTS before the test: %w", iperf3.ErrProtocol)
			}
			localRes := run.results()
			if err := iperf3.WriteMessage(conn, &localRes); err != nil {
				return rep, fmt.Errorf("client: results: %w", err)
			}
			if err := iperf3.WriteMessage(conn, &sstats); err != nil {
				return rep, fmt.Errorf("client: sender figures: %w", err)
			}
			var remoteRes iperf3.Results
			if err := iperf3.ReadMessage(conn, &remoteRes); err != nil {
				return rep, fmt.Errorf("client: server results: %w", err)
			}
			var rstats iperf3.TCPReceiverStats
			if err := iperf3.ReadMessage(conn, &rstats); err != nil {
				return rep, fmt.Errorf("client: receiver figures: %w", err)
			}
			ooo := map[int]int64{}
			for _, s := range rstats.Streams {
				ooo[s.ID] = s.OutOfOrder + s.Late
			}
			rep.End = buildEnd(localRes, remoteRes, true, ooo)
			rep.End.HostCPU = run.host
			c.reportTCP(rep, newTCPReport(sstats, rstats))
		case iperf3.DisplayResults:
			if err := iperf3.WriteState(conn, iperf3.IperfDone); err != nil {
				return rep, fmt.Errorf("client: %w", err)
			}
			return rep, nil
		case iperf3.AccessDenied:
			return rep, fmt.Errorf("client: %w", iperf3.ErrAccessDenied)
		case iperf3.ServerErrorCode:
			return rep, fmt.Errorf("client: %w", iperf3.ReadServerError(conn))
		case iperf3.ServerTerminate:
			return rep, fmt.Errorf("client: %w", iperf3.ErrServerTerminated)
		default:
			return rep, fmt.Errorf("client: unexpected %v: %w", st, iperf3.ErrProtocol)
		}
	}
}

// reportTCP puts a TCP-mode test's figures in rep and hands them to
// OnTCPReport.
func (c *Client) reportTCP(rep *Report, r *TCPReport) {
	if rep != nil {
		rep.TCP = r
	}
	if c.OnTCPReport != nil {
		c.OnTCPReport(r)
	}
}
