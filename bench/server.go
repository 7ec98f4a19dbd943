package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
)

// Version is what this package reports as its version in reports and in
// the client_version parameter.
const Version = "xdpio bench 0.1 (iperf3 3.12 compatible)"

// DefaultCookieTimeout is how long the server waits, by default, for a
// new control connection's cookie (Server.CookieTimeout).
const DefaultCookieTimeout = 2 * time.Second

// maxPendingCookies bounds how many control connections Serve waits on
// for a cookie at once; it refuses more (ACCESS_DENIED) at once, so idle
// connections cannot pile up goroutines.
const maxPendingCookies = 16

// DefaultBlksize is the UDP payload length used when the client names none
// (iperf3's DEFAULT_UDP_BLKSIZE).
const DefaultBlksize = 1460

// Server runs the server end of iperf3 tests, TCP and UDP, one at a time,
// for real iperf3 clients and for Client. The control connection is the
// kernel's TCP; a UDP test's datagrams go through plane.DataPlane, a TCP
// test's data connections through TCPPlane. The zero value is ready to
// use.
type Server struct {
	// DataPlane carries the UDP streams; nil means kernel sockets
	// (&kernelplane.DataPlane{}).
	DataPlane plane.DataPlane
	// TCPPlane carries a TCP test's data connections; nil means the
	// kernel's TCP, as iperf3's: they come to the control port and Serve's
	// listener accepts them (a TCP test needs Serve then, not ServeConn).
	TCPPlane plane.TCPPlane
	// Interval is the reporting period; 0 means one second, negative none.
	Interval time.Duration
	// OnInterval, if set, is called with each interval's figures while a
	// test runs (from another goroutine).
	OnInterval func(Interval)
	// OnReport, if set, is called by Serve after each test with its report
	// and error.
	OnReport func(*Report, error)
	// SetupTimeout bounds each step before the test runs (parameters,
	// stream setup) and after it; 0 means 10 s.
	SetupTimeout time.Duration
	// CookieTimeout bounds the wait for a new control connection's
	// 37-byte cookie, the first thing a client sends; 0 means
	// DefaultCookieTimeout (2 s). A real client (iperf3 or Client) sends
	// it as soon as it is connected, so the wait can be short: a
	// connection that stays silent (a port scan, a stalled peer) is closed
	// when it expires. Serve reads the cookie before the connection takes
	// the server for a test, so such a connection never holds off a real
	// client; it gets no report.
	CookieTimeout time.Duration
	// Slack is how long past the announced test time the server waits for
	// TEST_END before giving up; 0 means 10 s.
	Slack time.Duration

	busy atomic.Bool
	// finishing is set while the running test waits for its client's
	// last word (IPERF_DONE): a client that connects then is the next
	// one, which that client's end makes way for, not one to turn away.
	finishing atomic.Bool
	// dpMu guards dpClosed, which is closed once the data plane endpoint
	// of the last test that opened one is closed: a test ends (busy is
	// cleared) before its endpoint is closed, which for AF_XDP takes tens
	// of milliseconds, and the next test waits for that only when it
	// opens its own.
	dpMu     sync.Mutex
	dpClosed chan struct{}
	// serving is set while Serve runs; kernel holds the TCP test that
	// waits for its data connections on Serve's listener.
	serving atomic.Bool
	kernel  atomic.Pointer[kernelStreams]
}

func (s *Server) dataPlane() plane.DataPlane {
	if s.DataPlane != nil {
		return s.DataPlane
	}
	return &kernelplane.DataPlane{}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Serve accepts control connections on ln until ctx is done or ln fails,
// running one test at a time; a client that comes while a test runs is
// sent ACCESS_DENIED, as iperf3 does. A connection takes the server for a
// test only once its cookie is in (see CookieTimeout): until then others
// are served, and one that sends no cookie in time is closed without a
// report. Serve closes ln when it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	s.serving.Store(true)
	defer s.serving.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	pending := make(chan struct{}, maxPendingCookies)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept control connection: %w", err)
		}
		if s.offerKernelStream(c) {
			continue // a data connection of the running TCP test
		}
		if s.busy.Load() && !s.finishing.Load() {
			// Not a byte is read from it: that could hold up the test.
			deny(c)
			continue
		}
		select {
		case pending <- struct{}{}:
		default:
			deny(c)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cookie, err := s.readCookie(ctx, c)
			<-pending
			if err != nil {
				c.Close() // not a client: nothing to report
				return
			}
			if !s.take(ctx) {
				deny(c)
				return
			}
			// The server is free for the next client as soon as the
			// test is over; the report follows once its data plane
			// endpoint is closed too.
			rep, err := s.serveConn(ctx, c, cookie, sync.OnceFunc(s.release))
			if s.OnReport != nil {
				s.OnReport(rep, err)
			}
		}()
	}
}

// take makes the server busy with a new test, or reports that it is
// busy. While the running test is finishing (its client's IPERF_DONE is
// on the way), it waits for that test to be over, for up to a second: a
// client run right after the previous one returned comes in that window.
func (s *Server) take(ctx context.Context) bool {
	deadline := time.Now().Add(time.Second)
	for {
		if s.busy.CompareAndSwap(false, true) {
			return true
		}
		if !s.finishing.Load() || ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// release makes the server free for the next test.
func (s *Server) release() {
	s.busy.Store(false)
	s.finishing.Store(false)
}

// deny sends ACCESS_DENIED on c and closes it.
func deny(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	iperf3.WriteState(c, iperf3.AccessDenied)
	c.Close()
}

// readCookie reads the cookie a new control connection starts with,
// within CookieTimeout, or until ctx ends (which closes c).
func (s *Server) readCookie(ctx context.Context, c net.Conn) (iperf3.Cookie, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	timeout := orDefault(s.CookieTimeout, DefaultCookieTimeout)
	c.SetReadDeadline(time.Now().Add(timeout))
	cookie, err := iperf3.ReadCookie(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return cookie, fmt.Errorf("no cookie within %v: %w", timeout, err)
	}
	if err != nil {
		return cookie, err
	}
	return cookie, nil
}

// ServeConn runs one test on an accepted control connection and closes it:
// it reads the cookie (within CookieTimeout) with the server taken, so a
// silent connection holds it for that long. It returns what was measured,
// also when the test failed.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) (*Report, error) {
	if !s.busy.CompareAndSwap(false, true) {
		iperf3.WriteState(c, iperf3.AccessDenied)
		c.Close()
		return nil, iperf3.ErrAccessDenied
	}
	free := sync.OnceFunc(s.release)
	defer free()
	cookie, err := s.readCookie(ctx, c)
	if err != nil {
		c.Close()
		return &Report{Error: err.Error()}, err
	}
	return s.serveConn(ctx, c, cookie, free)
}

// awaitDataPlane waits (up to timeout, or until ctx ends) until the data
// plane endpoint of the previous test is closed, and returns the function
// that says this test's is: call it once the endpoint is closed, or will
// not be opened. After a failed wait the next test waits for the
// previous endpoint still.
func (s *Server) awaitDataPlane(ctx context.Context, timeout time.Duration) (closed func(), err error) {
	s.dpMu.Lock()
	prev := s.dpClosed
	mine := make(chan struct{})
	s.dpClosed = mine
	s.dpMu.Unlock()
	closed = sync.OnceFunc(func() {
		if prev == nil {
			close(mine)
			return
		}
		select {
		case <-prev:
			close(mine)
		default:
			go func() { <-prev; close(mine) }()
		}
	})
	if prev == nil {
		return closed, nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-prev:
		return closed, nil
	case <-ctx.Done():
		closed()
		return nil, ctx.Err()
	case <-t.C:
		closed()
		return nil, fmt.Errorf("the previous test's data plane endpoint is still open after %v", timeout)
	}
}

func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// serveConn runs one test on c, whose cookie was read, and closes c. It
// calls free (which may be called more than once) when the test is over,
// before the data plane endpoint is closed, so that the next client is
// not turned away while that takes.
func (s *Server) serveConn(ctx context.Context, c net.Conn, cookie iperf3.Cookie, free func()) (rep *Report, err error) {
	rep = &Report{}
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	defer c.Close()
	defer free()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(ctx, func() { c.Close() })
	setup := orDefault(s.SetupTimeout, 10*time.Second)

	c.SetDeadline(time.Now().Add(setup))
	now := time.Now()
	remote, local := addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	rep.Start = ReportStart{Version: Version, SystemInfo: systemInfo(), Cookie: cookie.String(),
		Timestamp: newTimestamp(now),
		Accepted:  &HostPort{Host: remote.Addr().String(), Port: int(remote.Port())}}
	if err := iperf3.WriteState(c, iperf3.ParamExchange); err != nil {
		return rep, err
	}
	var p iperf3.Params
	err = iperf3.ReadMessage(c, &p)
	if err != nil {
		iperf3.WriteServerError(c, iperf3.IERecvParams, 0)
		return rep, fmt.Errorf("parameters: %w", err)
	}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	if p.Len == 0 {
		p.Len = DefaultBlksize
		if p.TCP {
			p.Len = DefaultTCPBlksize
		}
	}
	rev := 0
	if p.Reverse {
		rev = 1
	}
	proto := "TCP"
	switch {
	case p.UDP:
		proto = "UDP"
	case p.SCTP:
		proto = "SCTP"
	}
	rep.Start.TargetBitrate = p.Bandwidth
	rep.Start.TestStart = TestParams{Protocol: proto, NumStreams: p.Parallel, Blksize: p.Len, Omit: p.Omit, Duration: p.Time,
		Bytes: p.Num, Blocks: p.Blockcount, Reverse: rev, TOS: p.TOS, TargetBitrate: p.Bandwidth}
	// The previous test's endpoint may still be closing, on the same
	// queues.
	dpClosed, err := s.awaitDataPlane(ctx, setup)
	if err != nil {
		iperf3.WriteServerError(c, iperf3.IEStreamListen, 0)
		return rep, err
	}
	defer dpClosed()
	var ph serverPhase = &udpServerPhase{dp: s.dataPlane(), p: p, local: local, remote: remote}
	if !p.UDP {
		ph = &tcpServerPhase{s: s, p: p, cookie: cookie, local: local, remote: remote}
	}
	defer ph.close()
	defer free() // before the endpoint closes
	run, ctl, err := ph.open(ctx, c, rep, setup)
	if err != nil {
		return rep, err
	}
	if err := iperf3.WriteState(c, iperf3.TestStart); err != nil {
		return rep, err
	}
	if err := iperf3.WriteState(c, iperf3.TestRunning); err != nil {
		return rep, err
	}
	ir := newIntervalReporter(run, orDefault(s.Interval, time.Second), s.OnInterval)
	ph.start(run)
	ir.begin()

	limit := time.Duration(p.Time)*time.Second + orDefault(s.Slack, 10*time.Second)
	if p.Time == 0 || p.Num != 0 || p.Blockcount != 0 {
		limit = time.Hour
	}
	endErr := awaitTestEnd(ctx, c, ctl, run.failure(), limit, p.Time)
	if endErr == nil && !run.sender {
		// iperf3's receiver counts until TEST_END, which its client
		// sends as it stops; xdpio's client sends it p.TailMS later, or
		// later still on a loaded machine: a timed test's window ends
		// no later than its time after the start, as the sender's does.
		end := time.Now().Add(-time.Duration(p.TailMS) * time.Millisecond)
		if p.Time > 0 && p.TailMS > 0 {
			end = minTime(end, run.start.Add(time.Duration(p.Time)*time.Second))
		}
		run.markEnd(end)
	}
	derr := ph.stop(run)
	switch {
	case derr == nil:
	case endErr == nil || errors.Is(endErr, errDataPlaneFailed):
		// The data plane failed (a device that went away, say): that is
		// what ended the test, or what spoilt it. The client is told, as
		// iperf3 tells it about a stream it cannot read or write.
		endErr = fmt.Errorf("data plane: %w", derr)
		code := int32(iperf3.IEStreamRead)
		if run.sender {
			code = iperf3.IEStreamWrite
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		iperf3.WriteServerError(c, code, 0)
	case !errors.Is(derr, net.ErrClosed):
		// The test ended otherwise (the control connection, a
		// cancelled server), and the data plane had failed too.
		endErr = fmt.Errorf("%w (data plane: %w)", endErr, derr)
	}
	if endErr != nil {
		ph.settle(run, nil)
		rep.Intervals = ir.finish()
		rep.End = runEnd(run, run.results(), nil, ph.outOfOrder(run))
		ph.report(rep, false)
		return rep, endErr
	}

	return rep, s.exchangeResults(c, ph, run, ir, p, setup, rep)
}

// exchangeResults ends a test that ran its course: the results both ways
// (the data phase settles in between, and the report's intervals and End
// are filled in), DISPLAY_RESULTS and the client's IPERF_DONE.
func (s *Server) exchangeResults(c net.Conn, ph serverPhase, run *dataRun, ir *intervalReporter, p iperf3.Params, setup time.Duration, rep *Report) error {
	if err := ph.deliver(run); err != nil {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		iperf3.WriteServerError(c, iperf3.IEStreamWrite, 0)
		rep.Intervals = ir.finish()
		rep.End = runEnd(run, run.results(), nil, ph.outOfOrder(run))
		ph.report(rep, false)
		return fmt.Errorf("data plane: %w", err)
	}
	c.SetDeadline(time.Now().Add(setup))
	if err := iperf3.WriteState(c, iperf3.ExchangeResults); err != nil {
		return err
	}
	var remoteRes iperf3.Results
	if err := iperf3.ReadMessage(c, &remoteRes); err != nil {
		return fmt.Errorf("client results: %w", err)
	}
	if err := ph.readExtra(c); err != nil {
		return err
	}
	if err := ph.settle(run, &remoteRes); err != nil {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		iperf3.WriteServerError(c, iperf3.IEStreamRead, 0)
		rep.Intervals = ir.finish()
		rep.End = runEnd(run, run.results(), &remoteRes, ph.outOfOrder(run))
		return fmt.Errorf("data plane: %w", err)
	}
	c.SetDeadline(time.Now().Add(setup))
	rep.Intervals = ir.finish()
	localRes := run.results()
	rep.End = runEnd(run, localRes, &remoteRes, ph.outOfOrder(run))
	ph.report(rep, true)
	if p.GetServerOutput != 0 {
		if b, err := json.Marshal(rep); err == nil {
			localRes.ServerOutputJSON = b
		}
	}
	if err := iperf3.WriteMessage(c, &localRes); err != nil {
		return err
	}
	if err := ph.writeExtra(c); err != nil {
		return err
	}
	// The client answers DISPLAY_RESULTS with its last word and may run
	// its next test at once.
	s.finishing.Store(true)
	if err := iperf3.WriteState(c, iperf3.DisplayResults); err != nil {
		return err
	}
	st, err := iperf3.ReadState(c)
	switch {
	case err != nil:
		return fmt.Errorf("waiting for IPERF_DONE: %w", err)
	case st != iperf3.IperfDone:
		return fmt.Errorf("got %v, want IPERF_DONE: %w", st, iperf3.ErrProtocol)
	}
	return nil
}

// serverPhase is the data phase of a server's test, the UDP test's
// streams (udpServerPhase):
// serveConn runs the control protocol around it, the same for both.
type serverPhase interface {
	// open refuses (with SERVER_ERROR) a test it cannot run, opens the
	// data endpoint, sends CREATE_STREAMS and sets the streams up. It
	// returns the run, ready to start, and from then on the client's
	// states arrive on ctl.
	open(ctx context.Context, c net.Conn, rep *Report, setup time.Duration) (run *dataRun, ctl <-chan stateOrErr, err error)
	// start begins taking in data.
	start(run *dataRun)
	// stop ends the data at the end of the test and returns the data
	// plane's error; a TCP receiver goes on reading until settle.
	stop(run *dataRun) error
	// deliver waits, after a test that ran its course, until what this
	// end sent has arrived, before the results exchange; settle ends the
	// data of a test stopped, once the client's results (remote; nil for
	// a test that ended early) are in.
	deliver(run *dataRun) error
	settle(run *dataRun, remote *iperf3.Results) error
	// outOfOrder gives each stream's datagrams or segments out of order.
	outOfOrder(run *dataRun) map[int]int64
	// readExtra reads what the client sends after its results, and
	// writeExtra what the server sends after its own.
	readExtra(c net.Conn) error
	writeExtra(c net.Conn) error
	// report adds the phase's own figures to rep (complete: with the
	// client's).
	report(rep *Report, complete bool)
	// close closes the data endpoint, if one was opened.
	close()
}

// watchControl reads, in a goroutine, the one state the peer sends while
// a test runs (the client's TEST_END, or a state that ends the test
// early) and returns where it arrives: after that the connection carries
// the results exchange, which the caller reads itself.
func watchControl(c net.Conn) <-chan stateOrErr {
	ctl := make(chan stateOrErr, 1)
	c.SetReadDeadline(time.Time{})
	go func() {
		st, err := iperf3.ReadState(c)
		ctl <- stateOrErr{st, err}
	}()
	return ctl
}

// errDataPlaneFailed is awaitTestEnd's answer when the data plane
// failed: the error itself is the data run's.
var errDataPlaneFailed = errors.New("the data plane failed")

// awaitTestEnd waits while a test runs for the client's TEST_END on the
// control connection c (its states arrive on ctl), for at most limit, and
// returns why the test ended early, or nil. A data plane that fails
// (failed is closed) ends the test at once, with errDataPlaneFailed.
func awaitTestEnd(ctx context.Context, c net.Conn, ctl <-chan stateOrErr, failed <-chan struct{}, limit time.Duration, secs int) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-failed:
		if ctx.Err() == nil {
			return errDataPlaneFailed
		}
		// Cancelling ctx closes the endpoint, which fails the reads.
		iperf3.WriteState(c, iperf3.ServerTerminate)
		return ctx.Err()
	case m := <-ctl:
		switch {
		case m.err != nil:
			return fmt.Errorf("control connection: %w", m.err)
		case m.st == iperf3.TestEnd:
			return nil
		case m.st == iperf3.ClientTerminate:
			return iperf3.ErrClientTerminated
		default:
			return fmt.Errorf("unexpected %v while running: %w", m.st, iperf3.ErrProtocol)
		}
	case <-timer.C:
		c.Close()
		return fmt.Errorf("no TEST_END %v after the test's %d s", limit, secs)
	case <-ctx.Done():
		iperf3.WriteState(c, iperf3.ServerTerminate)
		return ctx.Err()
	}
}

// runEnd is the report's End of run from this end's results and, when
// the exchange took place, the peer's (nil: a test that ended early),
// with this end's machine figures.
func runEnd(run *dataRun, local iperf3.Results, remote *iperf3.Results, ooo map[int]int64) ReportEnd {
	var e ReportEnd
	switch {
	case run.tcp:
		e = tcpRunEnd(run, local, remote)
	case remote == nil:
		e = endFromOne(local, run.sender, ooo)
	case run.sender:
		e = buildEnd(local, *remote, true, ooo)
	default:
		e = buildEnd(*remote, local, false, ooo)
	}
	e.HostCPU = run.host
	return e
}

// endFromOne summarises a test that ended without the results exchange.
func endFromOne(local iperf3.Results, sender bool, ooo map[int]int64) ReportEnd {
	other := iperf3.Results{}
	for _, s := range local.Streams {
		other.Streams = append(other.Streams, iperf3.StreamResults{ID: s.ID, StartTime: s.StartTime, EndTime: s.EndTime})
	}
	if sender {
		return buildEnd(local, other, true, ooo)
	}
	return buildEnd(other, local, false, ooo)
}

type stateOrErr struct {
	st  iperf3.State
	err error
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
