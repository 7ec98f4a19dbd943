package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/cpustat"
)

// DefaultTCPBlksize is the bytes per read or write of a TCP test when the
// client names none (iperf3's DEFAULT_TCP_BLKSIZE, 128 KiB).
const DefaultTCPBlksize = 128 << 10

// maxTCPBlksize is iperf3's largest block (-l) of a TCP test
// (MAX_BLOCKSIZE).
const maxTCPBlksize = 1 << 20

// sample reads a TCP sender's connection figures into the stream, and
// what its intervals saw of them (a connection that is gone keeps its
// last figures).
func (s *stream) sample() {
	info, err := s.conn.Info()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
}

// tcpIntervalStream adds a TCP sender's figures to its interval: the
// retransmissions during it and the window, RTT and MTU at its end,
// which the stream's end summary keeps the extremes of.
func tcpIntervalStream(s *stream, sender bool, iv IntervalStream, prev, cur Counters) IntervalStream {
	iv.TCP, iv.Packets = true, 0
	if !sender {
		return iv
	}
	c := cur.TCP
	iv.TCPInterval = TCPInterval{TCP: true, HasTCPInfo: true, Retransmits: int64(c.Retransmits) - int64(prev.TCP.Retransmits),
		SndCwnd: c.SndCwnd, SndWnd: c.SndWnd, RTT: c.RTT.Microseconds(), RTTVar: c.RTTVar.Microseconds(), PMTU: c.PMTU}
	s.mu.Lock()
	s.agg.add(iv.TCPInterval)
	s.mu.Unlock()
	return iv
}

// sumTCPIntervals completes a TCP interval's sum: a sender's
// retransmissions.
func sumTCPIntervals(sum IntervalStream, ss []IntervalStream) IntervalStream {
	sum.TCP, sum.Packets = true, 0
	sum.HasTCPInfo = len(ss) > 0
	for _, s := range ss {
		sum.HasTCPInfo = sum.HasTCPInfo && s.HasTCPInfo
		sum.Retransmits += s.Retransmits
	}
	return sum
}

// tcpResults fills in a TCP test's results: a sender's stack tells its
// retransmissions, and each end its congestion control.
func (r *dataRun) tcpResults(res *iperf3.Results) {
	for _, s := range r.allStreams() {
		if r.sender {
			s.sample()
		}
		if res.CongestionUsed == "" {
			res.CongestionUsed = s.conn.Congestion()
		}
	}
	if r.sender {
		res.SenderHasRetransmits = 1
	}
}

// tcpRunEnd is a TCP test's End from this end's results and, when the
// exchange took place, the peer's.
func tcpRunEnd(run *dataRun, local iperf3.Results, remote *iperf3.Results) ReportEnd {
	agg := map[int]*tcpAgg{}
	if run.sender {
		for _, s := range run.allStreams() {
			s.mu.Lock()
			a := s.agg
			s.mu.Unlock()
			agg[s.id] = &a
		}
	}
	var other iperf3.Results
	if remote != nil {
		other = *remote
	} else {
		other.SenderHasRetransmits = -1
		for _, s := range local.Streams {
			other.Streams = append(other.Streams, iperf3.StreamResults{ID: s.ID})
		}
	}
	if run.sender {
		return buildTCPEnd(local, other, true, agg)
	}
	return buildTCPEnd(other, local, false, agg)
}

// beginTCP starts a TCP test's streams: a goroutine per connection that
// writes blksize bytes at a time (a sender, at rate if set) or reads them.
func (r *dataRun) beginTCP() {
	r.errMu.Lock()
	r.failed = make(chan struct{})
	r.errMu.Unlock()
	r.start = time.Now()
	r.cpu = cpustat.Start()
	for _, s := range r.allStreams() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			var err error
			if r.sender {
				err = r.tcpSend(s)
			} else {
				err = r.tcpRecv(s)
			}
			if err != nil {
				r.setErr(fmt.Errorf("stream %d: %w", SocketNumber(s.id), err))
			}
		}()
	}
}

// tcpSend writes to s's connection until the run stops.
func (r *dataRun) tcpSend(s *stream) error {
	buf := make([]byte, r.blksize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for !r.stopping.Load() {
		if r.rate > 0 {
			s.mu.Lock()
			sent := s.sentB
			s.mu.Unlock()
			due := r.start.Add(time.Duration(float64(sent+uint64(r.blksize)) * 8 / float64(r.rate) * 1e9))
			if d := time.Until(due); d > 0 {
				time.Sleep(min(d, 50*time.Millisecond))
				continue
			}
		}
		n, err := s.conn.Write(buf)
		s.mu.Lock()
		s.sentB += uint64(n)
		s.mu.Unlock()
		if err != nil {
			if r.stopping.Load() {
				return nil
			}
			return err
		}
	}
	return nil
}

// tcpRecv reads s's connection until the peer closes its sending or the
// run stops.
func (r *dataRun) tcpRecv(s *stream) error {
	buf := make([]byte, r.blksize)
	for {
		n, err := s.conn.Read(buf)
		s.mu.Lock()
		s.recv.Bytes += uint64(n)
		if errors.Is(err, io.EOF) {
			s.eof = true
		}
		s.mu.Unlock()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && r.stopping.Load():
			return nil
		case err != nil:
			return err
		}
	}
}

// stopTCP ends the streams' goroutines at once (a blocked read or write
// returns what it moved) and sets the end of the window.
func (r *dataRun) stopTCP() error {
	if r.stopping.CompareAndSwap(false, true) {
		r.end = r.stopTime()
		past := time.Now().Add(-time.Second)
		for _, s := range r.allStreams() {
			if r.sender {
				s.conn.SetWriteDeadline(past)
			} else {
				s.conn.SetReadDeadline(past)
			}
		}
	}
	r.wg.Wait()
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// drainTCP waits, at a receiver, until every stream has received what
// want gives it (nil: until its peer closes its sending), or its peer has
// closed, or deadline passes, or the run fails.
func (r *dataRun) drainTCP(want map[int]uint64, deadline time.Time) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		done := true
		for _, s := range r.allStreams() {
			s.mu.Lock()
			w, ok := want[s.id]
			done = done && (s.eof || want != nil && (!ok || s.recv.Bytes >= w))
			s.mu.Unlock()
		}
		if done {
			return
		}
		select {
		case <-r.failure():
			return
		case <-t.C:
		}
	}
}

// finishTimeout bounds how long a sending end waits for its data and FIN
// to be acknowledged after the test's time: longer than the setup
// timeout, because a TCP under loss may be in retransmission backoff
// (each timeout doubles the next; netstack over a link losing 1% took up
// to 12 timeouts in a 2 s test, and once more than 10 s to drain).
func finishTimeout(setup time.Duration) time.Duration { return max(setup, 30*time.Second) }

// finishAll finishes every stream's sending (plane.TCPConn.Finish), at
// once, within ctx, and returns the first error.
func (r *dataRun) finishAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.allStreams()))
	for i, s := range r.allStreams() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.conn.Finish(ctx); err != nil {
				errs[i] = fmt.Errorf("stream %d: %w", SocketNumber(s.id), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tcpConns are a TCP test's accepted data connections, found as iperf3's
// server finds them: each starts with the test's cookie; one with
// another cookie, or one more than the test has streams, is sent
// ACCESS_DENIED and closed.
type tcpConns struct {
	cookie  iperf3.Cookie
	n       int
	timeout time.Duration
	out     chan acceptedConn
	pending chan struct{}
	mu      sync.Mutex
	offered int
	taken   int
	closed  bool
}

// acceptedConn is a data connection with the test's cookie, and its
// place in the order the connections were accepted.
type acceptedConn struct {
	conn plane.TCPConn
	seq  int
}

func newTCPConns(cookie iperf3.Cookie, n int, timeout time.Duration) *tcpConns {
	return &tcpConns{cookie: cookie, n: n, timeout: timeout, out: make(chan acceptedConn, n), pending: make(chan struct{}, maxPendingCookies)}
}

// offer reads c's cookie in a goroutine and takes c as a stream or
// turns it away. The streams are numbered in the order they are offered
// (iperf3's client connects them one after the other), not in the order
// their cookies arrive.
func (a *tcpConns) offer(c plane.TCPConn) {
	a.mu.Lock()
	seq := a.offered
	a.offered++
	a.mu.Unlock()
	select {
	case a.pending <- struct{}{}:
	default:
		go deny(c)
		return
	}
	go func() {
		defer func() { <-a.pending }()
		c.SetReadDeadline(time.Now().Add(a.timeout))
		cookie, err := iperf3.ReadCookie(c)
		if err != nil || cookie != a.cookie || !a.take() {
			deny(c)
			return
		}
		c.SetReadDeadline(time.Time{})
		a.out <- acceptedConn{c, seq}
	}()
}

// take counts one more stream, or reports that the test has them all.
func (a *tcpConns) take() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.taken == a.n {
		return false
	}
	a.taken++
	return true
}

// full reports whether the test has its streams: later connections are
// turned away without a word read.
func (a *tcpConns) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed || a.taken == a.n
}

// close turns every later connection away and closes the streams taken
// but not collected.
func (a *tcpConns) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	for {
		select {
		case c := <-a.out:
			c.conn.Close()
		default:
			return
		}
	}
}

// kernelStreams hands a TCP test on the kernel's TCP the connections
// Serve accepts while the test sets its streams up: iperf3's data
// connections come to the control port.
type kernelStreams struct {
	conns *tcpConns
}

// offerKernelStream gives c to the running TCP test that waits for its
// streams on the kernel's TCP, and reports whether there was one.
func (s *Server) offerKernelStream(c net.Conn) bool {
	k := s.kernel.Load()
	if k == nil {
		return false
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	k.conns.offer(kernelplane.TCPConn(tc))
	return true
}

// tcpServerPhase is the data phase of iperf3's TCP test at the server:
// the client's data connections, on a plane.TCPPlane's stack or on the
// kernel's TCP through Serve's listener.
type tcpServerPhase struct {
	s             *Server
	p             iperf3.Params
	cookie        iperf3.Cookie
	local, remote netip.AddrPort // the control connection's ends
	setup         time.Duration
	ln            plane.TCPListener
	conns         *tcpConns
	run           *dataRun
}

// refuseTCP sends SERVER_ERROR with IESTREAMLISTEN and Linux's errno
// "Protocol not supported" (what iperf3's client prints) and returns
// err.
func refuseTCP(c net.Conn, err error) error {
	iperf3.WriteServerError(c, iperf3.IEStreamListen, iperf3.LinuxEPROTONOSUPPORT)
	return err
}

func (t *tcpServerPhase) open(ctx context.Context, c net.Conn, rep *Report, setup time.Duration) (*dataRun, <-chan stateOrErr, error) {
	p := t.p
	switch {
	case p.SCTP:
		// Parameters without tcp, udp or sctp are a TCP test, as to
		// iperf3's server.
		return nil, nil, refuseTCP(c, fmt.Errorf("refused an iperf3 %s test from %v: this server runs TCP and UDP tests: %w", rep.Start.TestStart.Protocol, t.remote.Addr(), ErrNotSupported))
	case p.Bidirectional:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("bidirectional test: %w", ErrNotSupported)
	case p.Omit > 0:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("omitting %d s (-O): %w", p.Omit, ErrNotSupported)
	}
	t.setup = setup
	t.conns = newTCPConns(t.cookie, p.Parallel, orDefault(t.s.CookieTimeout, DefaultCookieTimeout))
	var stack plane.TCPStack
	if t.s.TCPPlane != nil {
		ln, err := t.s.TCPPlane.Listen(t.local, t.remote)
		if err != nil {
			if errors.Is(err, ErrNotSupported) {
				return nil, nil, refuseTCP(c, fmt.Errorf("refused an iperf3 TCP test from %v: %w", t.remote.Addr(), err))
			}
			iperf3.WriteServerError(c, iperf3.IEStreamListen, 0)
			return nil, nil, fmt.Errorf("data connections' listener: %w", err)
		}
		t.ln = ln
		stack = ln.Stack()
		stack.Counters = nil
		go func() {
			for {
				tc, err := ln.Accept()
				if err != nil {
					return
				}
				if t.conns.full() {
					go deny(tc)
					continue
				}
				t.conns.offer(tc)
			}
		}()
	} else {
		if !t.s.serving.Load() {
			return nil, nil, refuseTCP(c, fmt.Errorf("refused an iperf3 TCP test from %v: a TCP test on the kernel's TCP needs Serve, whose listener takes its data connections: %w", t.remote.Addr(), ErrNotSupported))
		}
		stack = plane.TCPStack{Name: "kernel", TSO: true, RXChecksumOffload: true}
		t.s.kernel.Store(&kernelStreams{conns: t.conns})
	}
	context.AfterFunc(ctx, t.abort)
	if err := iperf3.WriteState(c, iperf3.CreateStreams); err != nil {
		return nil, nil, err
	}
	// From here the client sends a state only to end the test.
	ctl := watchControl(c)
	run := &dataRun{sender: p.Reverse, blksize: p.Len, rate: p.Bandwidth, tcp: true}
	var accepted []acceptedConn
	timer := time.NewTimer(setup)
	defer timer.Stop()
	for len(accepted) < p.Parallel {
		select {
		case ac := <-t.conns.out:
			accepted = append(accepted, ac)
		case m := <-ctl:
			if m.err != nil {
				return nil, nil, fmt.Errorf("accept streams: control connection: %w", m.err)
			}
			return nil, nil, fmt.Errorf("accept streams: client sent %v: %w", m.st, iperf3.ErrProtocol)
		case <-timer.C:
			iperf3.WriteServerError(c, iperf3.IEStreamAccept, 0)
			return nil, nil, fmt.Errorf("accept streams: %d of %d connected with the test's cookie within %v", len(accepted), p.Parallel, setup)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	// As iperf3's server leaves CREATE_STREAMS: a client that connects
	// now is the next test's, told that the server is busy.
	t.s.kernel.Store(nil)
	slices.SortFunc(accepted, func(a, b acceptedConn) int { return a.seq - b.seq })
	g := &group{}
	for i, ac := range accepted {
		l, r := addrPort(ac.conn.LocalAddr()), addrPort(ac.conn.RemoteAddr())
		st := &stream{id: iperf3.StreamID(i), peer: r, local: l, conn: ac.conn}
		g.streams = append(g.streams, st)
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(st.id),
			LocalHost: l.Addr().String(), LocalPort: int(l.Port()), RemoteHost: r.Addr().String(), RemotePort: int(r.Port())})
	}
	run.groups = []*group{g}
	t.run = run
	mss := 0
	rep.Start.TCPMSSDefault = &mss
	rep.Start.TCPStack = &stack
	if b, ok := g.streams[0].conn.(interface {
		SocketBuffers() (int, int, int, error)
	}); ok {
		if req, snd, rcv, err := b.SocketBuffers(); err == nil {
			rep.Start.SocketBuffers = &SocketBuffers{SockBufsize: req, SndbufActual: snd, RcvbufActual: rcv}
		}
	}
	return run, ctl, nil
}

func (t *tcpServerPhase) start(run *dataRun) { run.beginTCP() }

// stop ends a sender's writing at TEST_END. A receiver goes on reading
// until settle.
func (t *tcpServerPhase) stop(run *dataRun) error {
	if !run.sender {
		run.end = run.stopTime()
		return nil
	}
	return run.stopTCP()
}

// deliver, at a sender whose test ran its course, closes each stream's
// sending (as iperf3's server closes its streams at TEST_END) and waits
// until the client has acknowledged all that was sent, FIN included
// (within the setup timeout), before EXCHANGE_RESULTS: the client reads
// what was in flight (iperf3's client drains it after TEST_END without
// counting it), and the stack has sent again all it lost before the
// results say how often.
func (t *tcpServerPhase) deliver(run *dataRun) error {
	if !run.sender {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout(t.setup))
	defer cancel()
	return run.finishAll(ctx)
}

// settle ends a receiver's reading once it has what the client says it
// sent on each stream (remote; nil when the test ended early), so that
// the two agree to the byte: the segments still in flight at TEST_END
// arrive after it. It waits up to the setup timeout.
func (t *tcpServerPhase) settle(run *dataRun, remote *iperf3.Results) error {
	if run.sender {
		return nil
	}
	if remote != nil {
		want := map[int]uint64{}
		for _, s := range remote.Streams {
			want[s.ID] = s.Bytes
		}
		run.drainTCP(want, time.Now().Add(t.setup))
	}
	end := run.end
	err := run.stopTCP()
	run.end = end
	return err
}

func (t *tcpServerPhase) outOfOrder(*dataRun) map[int]int64 { return nil }
func (t *tcpServerPhase) readExtra(net.Conn) error          { return nil }
func (t *tcpServerPhase) writeExtra(net.Conn) error         { return nil }

func (t *tcpServerPhase) report(rep *Report, complete bool) {
	if t.ln != nil {
		rep.End.TCPStackCounters = t.ln.Stack().Counters
	}
}

// abort, when the server is cancelled, closes the stack (its connections
// are reset) and turns later connections away.
func (t *tcpServerPhase) abort() {
	t.conns.close()
	if t.ln != nil {
		t.ln.Close()
	}
}

// close closes the connections and the listener with its stack, or
// takes the test off Serve's listener.
func (t *tcpServerPhase) close() {
	if t.conns == nil {
		return
	}
	if k := t.s.kernel.Load(); k != nil && k.conns == t.conns {
		t.s.kernel.CompareAndSwap(k, nil)
	}
	t.conns.close()
	if t.run != nil {
		for _, s := range t.run.allStreams() {
			s.conn.Close()
		}
	}
	if t.ln != nil {
		t.ln.Close()
	}
}

// tcpParams checks the client's settings for a TCP test and returns the
// parameters.
func (c *Client) tcpParams() (iperf3.Params, error) {
	p := iperf3.Params{TCP: true, Parallel: c.Streams, Len: c.Length, Reverse: c.Reverse, ClientVersion: Version}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	if p.Len == 0 {
		p.Len = DefaultTCPBlksize
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
	case p.Len < 1 || p.Len > maxTCPBlksize:
		return p, fmt.Errorf("invalid length %d: must be 1..%d bytes per read or write", p.Len, maxTCPBlksize)
	}
	p.Time = int(d / time.Second)
	if c.Bitrate != BitrateUnlimited {
		p.Bandwidth = c.Bitrate // 0: unlimited, iperf3's TCP default
	}
	return p, nil
}

// tcpClientPhase is the data phase of iperf3's TCP test at the client:
// one data connection per stream, from a plane.TCPPlane's stack or the
// kernel's TCP.
type tcpClientPhase struct {
	c      *Client
	cookie iperf3.Cookie
	local  netip.AddrPort // the control connection's
	mss    int
	dialer plane.TCPDialer
	run    *dataRun
	end    sync.Once
}

func (t *tcpClientPhase) params() (iperf3.Params, error) { return t.c.tcpParams() }

func (t *tcpClientPhase) connected(conn net.Conn, _ *iperf3.Params, cookie iperf3.Cookie) {
	t.cookie, t.local, t.mss = cookie, addrPort(conn.LocalAddr()), controlMSS(conn)
}

func (t *tcpClientPhase) paramsMsg(p iperf3.Params) any { return &p }

// dial opens one data connection and sends the cookie on it.
func (t *tcpClientPhase) dial(ctx context.Context) (plane.TCPConn, error) {
	var tc plane.TCPConn
	if t.dialer != nil {
		c, err := t.dialer.Dial(ctx)
		if err != nil {
			return nil, err
		}
		tc = c
	} else {
		c, err := t.c.dial(ctx, t.c.Server.String())
		if err != nil {
			return nil, err
		}
		k, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			return nil, fmt.Errorf("Client.Dial gave a %T, not a kernel TCP connection", c)
		}
		tc = kernelplane.TCPConn(k)
	}
	tc.SetWriteDeadline(time.Now().Add(orDefault(t.c.SetupTimeout, 10*time.Second)))
	if _, err := tc.Write(t.cookie[:]); err != nil {
		tc.Close()
		return nil, fmt.Errorf("send cookie: %w", err)
	}
	tc.SetWriteDeadline(time.Time{})
	return tc, nil
}

func (t *tcpClientPhase) createStreams(_ net.Conn, rep *Report, p iperf3.Params, setup time.Duration, terminate func()) (*dataRun, error) {
	c := t.c
	if t.run != nil {
		return nil, fmt.Errorf("CREATE_STREAMS twice: %w", iperf3.ErrProtocol)
	}
	stack := plane.TCPStack{Name: "kernel", TSO: true, RXChecksumOffload: true}
	if c.TCPPlane != nil {
		d, err := c.TCPPlane.Dialer(t.local, c.Server)
		if err != nil {
			terminate()
			return nil, fmt.Errorf("data connections' stack: %w", err)
		}
		t.dialer = d
		stack = d.Stack()
		stack.Counters = nil
	}
	t.run = &dataRun{sender: !p.Reverse, blksize: p.Len, rate: p.Bandwidth, tcp: true}
	g := &group{}
	t.run.groups = []*group{g}
	ctx, cancel := context.WithTimeout(context.Background(), setup)
	defer cancel()
	for i := range p.Parallel {
		tc, err := t.dial(ctx)
		if err != nil {
			terminate()
			return nil, fmt.Errorf("stream %d: connect to %v: %w", SocketNumber(iperf3.StreamID(i)), c.Server, err)
		}
		l, r := addrPort(tc.LocalAddr()), addrPort(tc.RemoteAddr())
		g.streams = append(g.streams, &stream{id: iperf3.StreamID(i), peer: r, local: l, conn: tc})
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(iperf3.StreamID(i)),
			LocalHost: l.Addr().String(), LocalPort: int(l.Port()), RemoteHost: r.Addr().String(), RemotePort: int(r.Port())})
	}
	mss := t.mss
	rep.Start.TCPMSSDefault = &mss
	rep.Start.TCPStack = &stack
	if b, ok := g.streams[0].conn.(interface {
		SocketBuffers() (int, int, int, error)
	}); ok {
		if req, snd, rcv, err := b.SocketBuffers(); err == nil {
			rep.Start.SocketBuffers = &SocketBuffers{SockBufsize: req, SndbufActual: snd, RcvbufActual: rcv}
		}
	}
	return t.run, nil
}

func (t *tcpClientPhase) start(run *dataRun) { run.beginTCP() }

// stopSending ends the writing and waits until the server's stack has
// acknowledged everything written, FIN included (within the setup
// timeout): what TEST_END then tells the server to count is all there.
func (t *tcpClientPhase) stopSending(run *dataRun) error {
	err := run.stopTCP()
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout(orDefault(t.c.SetupTimeout, 10*time.Second)))
	defer cancel()
	return errors.Join(err, run.finishAll(ctx))
}

// stop ends the data phase after TEST_END: a receiver reads until the
// server has closed every stream's sending (iperf3's server closes them
// at TEST_END; within the setup timeout), so that it counts all that
// was sent.
func (t *tcpClientPhase) stop(run *dataRun) error {
	if run.sender {
		return run.stopTCP()
	}
	var err error
	t.end.Do(func() {
		end := run.stopTime()
		run.drainTCP(nil, time.Now().Add(orDefault(t.c.SetupTimeout, 10*time.Second)))
		err = run.stopTCP()
		run.end = end
	})
	return err
}

func (t *tcpClientPhase) writeExtra(net.Conn) error         { return nil }
func (t *tcpClientPhase) readExtra(net.Conn) error          { return nil }
func (t *tcpClientPhase) outOfOrder(*dataRun) map[int]int64 { return nil }

func (t *tcpClientPhase) report(rep *Report, complete bool) {
	if t.dialer != nil {
		rep.End.TCPStackCounters = t.dialer.Stack().Counters
	}
}

func (t *tcpClientPhase) close() {
	if t.run != nil {
		t.run.stopTCP()
		for _, s := range t.run.allStreams() {
			s.conn.Close()
		}
	}
	if t.dialer != nil {
		t.dialer.Close()
	}
}
