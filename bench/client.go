package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/plane"
)

// BitrateUnlimited as Client.Bitrate sends as fast as the data plane can.
const BitrateUnlimited = math.MaxUint64

// tailGrace is how long a sending Client waits between its last datagram
// (in a TCP test: the server's acknowledgement of its last byte) and
// TEST_END, so that the receiver (iperf3 counts only until TEST_END) has
// read what was in flight.
const tailGrace = 100 * time.Millisecond

// Client runs the client end of an iperf3 test, TCP (iperf3's default)
// or UDP, against a real iperf3 server or a Server. Set Server; the zero
// value of every other field is iperf3's default.
type Client struct {
	// Server is the server's control address (iperf3's port is 5201).
	Server netip.AddrPort
	// UDP runs iperf3's UDP test (-u) instead of its TCP test.
	UDP bool
	// DataPlane carries a UDP test's streams; nil means kernel sockets.
	DataPlane plane.DataPlane
	// TCPPlane carries a TCP test's data connections; nil means the
	// kernel's TCP (dialed with Dial).
	TCPPlane plane.TCPPlane
	// Dial opens the control connection, and a TCP test's data
	// connections on the kernel's TCP; nil uses a net.Dialer. Set it to
	// dial from another network namespace.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Streams is the number of parallel streams (-P); 0 means 1.
	Streams int
	// Duration is the test length (-t), whole seconds; 0 means 10 s.
	Duration time.Duration
	// Length is the UDP payload length, or a TCP test's bytes per read
	// or write (-l). 0 means iperf3's choice: in a UDP test the control
	// connection's TCP MSS (1448 on a 1500-byte MTU link with
	// timestamps), or 1460 when that is unknown; in a TCP test 128 KiB.
	Length int
	// Bitrate is the target per stream in bits/s (-b); 0 means 1 Mbit/s
	// in a UDP test and no limit in a TCP test (iperf3's defaults),
	// BitrateUnlimited no limit.
	Bitrate uint64
	// Reverse makes the server send (-R).
	Reverse bool
	// Counters32 uses iperf3's default 32-bit sequence numbers instead of
	// the 64-bit ones (--udp-counters-64bit) this client asks for.
	Counters32 bool
	// Interval is the reporting period; 0 means one second, negative none.
	Interval time.Duration
	// OnInterval, if set, is called with each interval's figures.
	OnInterval func(Interval)
	// SetupTimeout bounds each protocol step outside the test; 0 means 10 s.
	SetupTimeout time.Duration
}

func (c *Client) params() (iperf3.Params, error) {
	p := iperf3.Params{UDP: true, Parallel: c.Streams, Len: c.Length, Reverse: c.Reverse, ClientVersion: Version}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	if p.Len == 0 {
		p.Len = DefaultBlksize
	}
	d := c.Duration
	if d == 0 {
		d = 10 * time.Second
	}
	if d < time.Second || d%time.Second != 0 {
		return p, fmt.Errorf("invalid duration %v: must be whole seconds", d)
	}
	p.Time = int(d / time.Second)
	switch c.Bitrate {
	case 0:
		p.Bandwidth = 1 << 20
	case BitrateUnlimited:
	default:
		p.Bandwidth = c.Bitrate
	}
	if !c.Counters32 {
		p.UDPCounters64Bit = 1
	}
	if p.Len < iperf3.HeaderLen(!c.Counters32) || p.Len > 65507 {
		return p, fmt.Errorf("invalid length %d: must be %d..65507", p.Len, iperf3.HeaderLen(!c.Counters32))
	}
	if p.Parallel < 1 || p.Parallel > 128 {
		return p, fmt.Errorf("invalid streams %d: must be 1..128", p.Parallel)
	}
	return p, nil
}

// Run runs one test and returns its report: also, with what was measured
// so far, when it fails. Cancelling ctx ends the test early (the server is
// sent CLIENT_TERMINATE).
func (c *Client) Run(ctx context.Context) (rep *Report, err error) {
	var ph clientPhase = &tcpClientPhase{c: c}
	if c.UDP {
		ph = &udpClientPhase{c: c}
	}
	rep = &Report{}
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	p, err := ph.params()
	if err != nil {
		return rep, err
	}
	if !p.Reverse {
		// Tell an xdpio server that TEST_END comes tailGrace after the
		// last datagram (iperf3 ignores it).
		p.TailMS = int(tailGrace / time.Millisecond)
	}
	conn, stopClose, err := c.connect(ctx)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	defer stopClose()
	cookie := iperf3.NewCookie()
	ph.connected(conn, &p, cookie)
	rep.Start = c.reportStart(p, cookie)
	setup := orDefault(c.SetupTimeout, 10*time.Second)
	conn.SetDeadline(time.Now().Add(setup))
	if _, err := conn.Write(cookie[:]); err != nil {
		return rep, fmt.Errorf("send cookie: %w", err)
	}
	defer ph.close()
	cs := &clientSession{c: c, ctx: ctx, conn: conn, ph: ph, p: p, setup: setup, rep: rep}
	return rep, cs.loop()
}

// reportStart is the report's start block for a test with parameters p.
func (c *Client) reportStart(p iperf3.Params, cookie iperf3.Cookie) ReportStart {
	proto := "UDP"
	if p.TCP {
		proto = "TCP"
	}
	return ReportStart{Version: Version, SystemInfo: systemInfo(), Cookie: cookie.String(), TargetBitrate: p.Bandwidth,
		Timestamp:    newTimestamp(time.Now()),
		ConnectingTo: &HostPort{Host: c.Server.Addr().String(), Port: int(c.Server.Port())},
		TestStart: TestParams{Protocol: proto, NumStreams: p.Parallel, Blksize: p.Len, Duration: p.Time,
			Reverse: map[bool]int{false: 0, true: 1}[p.Reverse], TargetBitrate: p.Bandwidth}}
}

// clientSession is one test's control connection, from the cookie on:
// the loop over the server's states.
type clientSession struct {
	c     *Client
	ctx   context.Context
	conn  net.Conn
	ph    clientPhase
	p     iperf3.Params
	setup time.Duration
	rep   *Report
	run   *dataRun
}

func (cs *clientSession) terminate() { iperf3.WriteState(cs.conn, iperf3.ClientTerminate) }

// loop answers the server's states until DISPLAY_RESULTS, an error, or
// the server ending the test.
func (cs *clientSession) loop() error {
	var pending *stateOrErr
	for {
		var st iperf3.State
		var err error
		if pending != nil {
			st, err = pending.st, pending.err
			pending = nil
		} else {
			st, err = iperf3.ReadState(cs.conn)
		}
		if err != nil {
			if cs.ctx.Err() != nil {
				return cs.ctx.Err()
			}
			return fmt.Errorf("control connection: %w", err)
		}
		done, next, err := cs.state(st)
		if done || err != nil {
			return err
		}
		pending = next
	}
}

// state handles one state the server sent: done ends the session; next
// is the state the data phase already read (TEST_RUNNING's end).
func (cs *clientSession) state(st iperf3.State) (done bool, next *stateOrErr, err error) {
	conn, ph := cs.conn, cs.ph
	switch st {
	case iperf3.ParamExchange:
		if err := iperf3.WriteMessage(conn, ph.paramsMsg(cs.p)); err != nil {
			return false, nil, fmt.Errorf("parameters: %w", err)
		}
	case iperf3.CreateStreams:
		if cs.run, err = ph.createStreams(conn, cs.rep, cs.p, cs.setup, cs.terminate); err != nil {
			return false, nil, err
		}
	case iperf3.TestStart:
	case iperf3.TestRunning:
		if cs.run == nil {
			return false, nil, fmt.Errorf("TEST_RUNNING before CREATE_STREAMS: %w", iperf3.ErrProtocol)
		}
		m, err := cs.c.runTest(cs.ctx, conn, ph, cs.run, time.Duration(cs.p.Time)*time.Second, cs.setup, cs.rep, cs.terminate)
		if err != nil {
			return false, nil, err
		}
		return false, &m, nil
	case iperf3.ExchangeResults:
		return false, nil, cs.exchangeResults()
	case iperf3.DisplayResults:
		return true, nil, iperf3.WriteState(conn, iperf3.IperfDone)
	case iperf3.AccessDenied:
		return true, nil, iperf3.ErrAccessDenied
	case iperf3.ServerErrorCode:
		return true, nil, iperf3.ReadServerError(conn)
	case iperf3.ServerTerminate:
		return true, nil, iperf3.ErrServerTerminated
	default:
		return true, nil, fmt.Errorf("unexpected %v: %w", st, iperf3.ErrProtocol)
	}
	return false, nil, nil
}

// exchangeResults sends this end's results and reads the server's, and
// fills the report's end block.
func (cs *clientSession) exchangeResults() error {
	conn, ph, run := cs.conn, cs.ph, cs.run
	if run == nil {
		return fmt.Errorf("EXCHANGE_RESULTS before the test: %w", iperf3.ErrProtocol)
	}
	localRes := run.results()
	if err := iperf3.WriteMessage(conn, &localRes); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := ph.writeExtra(conn); err != nil {
		return err
	}
	var remoteRes iperf3.Results
	if err := iperf3.ReadMessage(conn, &remoteRes); err != nil {
		return fmt.Errorf("server results: %w", err)
	}
	if err := ph.readExtra(conn); err != nil {
		return err
	}
	cs.rep.End = runEnd(run, localRes, &remoteRes, ph.outOfOrder(run))
	ph.report(cs.rep, true)
	return nil
}

// runTest runs the test from TEST_RUNNING for secs: it moves the data,
// sends TEST_END (or is cut short by the server or ctx) and returns the
// state the server sent next, which ends the data phase.
func (c *Client) runTest(ctx context.Context, conn net.Conn, ph clientPhase, run *dataRun, secs, setup time.Duration, rep *Report, terminate func()) (stateOrErr, error) {
	conn.SetDeadline(time.Time{})
	ctl := watchControl(conn)
	ir := newIntervalReporter(run, orDefault(c.Interval, time.Second), c.OnInterval)
	ph.start(run)
	ir.begin()
	timer := time.NewTimer(secs)
	select {
	case <-timer.C:
	case m := <-ctl:
		// The server spoke first: an error or termination.
		timer.Stop()
		ph.stop(run)
		rep.Intervals = ir.finish()
		return m, nil
	case <-ctx.Done():
		// CLIENT_TERMINATE has gone out; report what was measured.
		timer.Stop()
		ph.stop(run)
		rep.Intervals = ir.finish()
		rep.End = runEnd(run, run.results(), nil, nil)
		ph.report(rep, false)
		return stateOrErr{}, ctx.Err()
	}
	timer.Stop()
	if run.sender {
		if err := ph.stopSending(run); err != nil {
			rep.Intervals = ir.finish()
			terminate()
			return stateOrErr{}, fmt.Errorf("data plane: %w", err)
		}
		// iperf3 stops counting at TEST_END: let the receiver read what is
		// still queued for it first.
		drain := time.NewTimer(tailGrace)
		select {
		case <-drain.C:
		case <-ctx.Done():
		}
		drain.Stop()
	}
	if !run.sender {
		// As iperf3's: a receiver's window ends at TEST_END. What is
		// still in flight is counted (in the last interval) until the
		// server says it has stopped sending.
		run.markEnd(time.Now())
	}
	if err := iperf3.WriteState(conn, iperf3.TestEnd); err != nil {
		return stateOrErr{}, err
	}
	// A receiver keeps counting what is in flight until the server has
	// stopped sending, which it says with EXCHANGE_RESULTS.
	m := <-ctl
	derr := ph.stop(run)
	rep.Intervals = ir.finish()
	if derr != nil {
		return m, fmt.Errorf("data plane: %w", derr)
	}
	conn.SetDeadline(time.Now().Add(setup))
	return m, nil
}

// clientPhase is the data phase of a client's test, the UDP test's
// streams (udpClientPhase): Run
// drives the control protocol around it, the same for both.
type clientPhase interface {
	// params checks the Client's settings and returns the parameters;
	// connected may adjust them once the control connection is up.
	params() (iperf3.Params, error)
	connected(conn net.Conn, p *iperf3.Params, cookie iperf3.Cookie)
	// paramsMsg is what the client sends at PARAM_EXCHANGE.
	paramsMsg(p iperf3.Params) any
	// createStreams sets the streams up at CREATE_STREAMS (calling
	// terminate when the server must be told that the test is off) and
	// returns the run, ready to start.
	createStreams(conn net.Conn, rep *Report, p iperf3.Params, setup time.Duration, terminate func()) (*dataRun, error)
	// start begins moving data; stopSending ends a sender's data before
	// TEST_END; stop ends all of it and returns the data plane's error
	// (it may be called again).
	start(run *dataRun)
	stopSending(run *dataRun) error
	stop(run *dataRun) error
	// writeExtra sends what follows the client's results, readExtra
	// reads what follows the server's.
	writeExtra(conn net.Conn) error
	readExtra(conn net.Conn) error
	// outOfOrder gives each stream's datagrams or segments out of order.
	outOfOrder(run *dataRun) map[int]int64
	// report adds the phase's own figures to rep (complete: with the
	// server's).
	report(rep *Report, complete bool)
	// close closes the data endpoints.
	close()
}

// connect opens the control connection (within SetupTimeout) and arranges
// that ctx ending sends CLIENT_TERMINATE and closes it; the returned stop
// undoes that arrangement.
func (c *Client) connect(ctx context.Context) (net.Conn, func() bool, error) {
	dctx, dcancel := context.WithTimeout(ctx, orDefault(c.SetupTimeout, 10*time.Second))
	conn, err := c.dial(dctx, c.Server.String())
	dcancel()
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			// "dial tcp ADDR: connect: " says again what this error says.
			err = rootText{err}
		}
		return nil, nil, fmt.Errorf("connect to %v: %w", c.Server, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	stop := context.AfterFunc(ctx, func() {
		iperf3.WriteState(conn, iperf3.ClientTerminate)
		conn.Close()
	})
	return conn, stop, nil
}

// dial opens a kernel TCP connection to address with Dial, or a
// net.Dialer.
func (c *Client) dial(ctx context.Context, address string) (net.Conn, error) {
	if c.Dial != nil {
		return c.Dial(ctx, "tcp", address)
	}
	return (&net.Dialer{}).DialContext(ctx, "tcp", address)
}

// rootText is an error that says only what its innermost cause says
// ("connection refused"), for a caller that names the operation and
// address itself; it wraps the whole error.
type rootText struct{ err error }

func (e rootText) Error() string {
	c := e.err
	for u := errors.Unwrap(c); u != nil; u = errors.Unwrap(c) {
		c = u
	}
	return c.Error()
}

func (e rootText) Unwrap() error { return e.err }
