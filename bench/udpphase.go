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
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
)

// udpServerPhase is the data phase of iperf3's UDP test at the server: one
// endpoint on the control address, a stream per client source address.
type udpServerPhase struct {
	dp            plane.DataPlane
	p             iperf3.Params
	local, remote netip.AddrPort // the control connection's ends
	pc            plane.PacketConn
	g             *group
}

func (u *udpServerPhase) open(ctx context.Context, c net.Conn, rep *Report, setup time.Duration) (*dataRun, <-chan stateOrErr, error) {
	p := u.p
	counters64 := p.UDPCounters64Bit != 0
	switch {
	case p.Bidirectional:
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("bidirectional test: %w", ErrNotSupported)
	case p.Omit > 0:
		// Counting the omitted seconds would make the totals disagree with
		// the client's; refuse rather than report wrong numbers.
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("omitting %d s (-O): %w", p.Omit, ErrNotSupported)
	case p.Len < iperf3.HeaderLen(counters64):
		iperf3.WriteServerError(c, iperf3.IEUnimp, 0)
		return nil, nil, fmt.Errorf("datagram length %d shorter than the %d-byte header: %w", p.Len, iperf3.HeaderLen(counters64), iperf3.ErrProtocol)
	}

	pc, err := u.dp.Listen(u.local)
	if err != nil {
		iperf3.WriteServerError(c, iperf3.IEStreamListen, 0)
		return nil, nil, err
	}
	u.pc = pc
	rep.Start.SocketBuffers = socketBuffers(pc)
	context.AfterFunc(ctx, func() { pc.Close() })
	if err := iperf3.WriteState(c, iperf3.CreateStreams); err != nil {
		return nil, nil, err
	}
	// From here the client sends a state only to end the test.
	ctl := watchControl(c)
	g, err := acceptStreams(pc, p.Parallel, time.Now().Add(setup), ctl)
	if err != nil {
		iperf3.WriteServerError(c, iperf3.IEStreamAccept, 0)
		return nil, nil, err
	}
	u.g = g
	for _, st := range g.streams {
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(st.id),
			LocalHost: u.local.Addr().String(), LocalPort: int(u.local.Port()),
			RemoteHost: st.peer.Addr().String(), RemotePort: int(st.peer.Port())})
	}
	return &dataRun{groups: []*group{g}, sender: p.Reverse, blksize: p.Len, rate: p.Bandwidth, counters64: counters64}, ctl, nil
}

func (u *udpServerPhase) start(run *dataRun)      { run.begin() }
func (u *udpServerPhase) stop(run *dataRun) error { return run.stop() }

func (u *udpServerPhase) settle(*dataRun, *iperf3.Results) error { return nil }
func (u *udpServerPhase) deliver(*dataRun) error                 { return nil }
func (u *udpServerPhase) readExtra(net.Conn) error               { return nil }
func (u *udpServerPhase) writeExtra(net.Conn) error              { return nil }
func (u *udpServerPhase) report(*Report, bool)                   {}

func (u *udpServerPhase) outOfOrder(run *dataRun) map[int]int64 { return streamsOutOfOrder(run) }

func (u *udpServerPhase) close() {
	if u.pc != nil {
		u.pc.Close()
	}
}

// streamsOutOfOrder is each stream's out-of-order count from its own
// receive counters.
func streamsOutOfOrder(run *dataRun) map[int]int64 {
	ooo := map[int]int64{}
	for _, st := range run.allStreams() {
		ooo[st.id] = st.counters().OutOfOrder
	}
	return ooo
}

// acceptStreams waits for n streams' setup datagrams on pc and answers each.
// A new source address is a new stream, numbered as iperf3 numbers them.
func acceptStreams(pc plane.PacketConn, n int, deadline time.Time, ctl <-chan stateOrErr) (*group, error) {
	g := &group{conn: pc, byPeer: map[netip.AddrPort]*stream{}}
	msgs := make([]plane.Message, 8)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 65536)
	}
	reply := []plane.Message{{Buf: iperf3.ConnectBytes(iperf3.UDPConnectReply), N: 4}}
	for len(g.streams) < n {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("accept streams: %d of %d set up before the timeout", len(g.streams), n)
		}
		select {
		case m := <-ctl:
			if m.err != nil {
				return nil, fmt.Errorf("accept streams: control connection: %w", m.err)
			}
			return nil, fmt.Errorf("accept streams: client sent %v: %w", m.st, iperf3.ErrProtocol)
		default:
		}
		pc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		k, err := pc.ReadBatch(msgs)
		for i := 0; i < k; i++ {
			m := msgs[i]
			if m.N != 4 {
				continue // not a setup message; nothing runs yet
			}
			if _, ok := g.byPeer[m.Addr]; !ok {
				st := &stream{id: iperf3.StreamID(len(g.streams)), peer: m.Addr, local: pc.LocalAddr()}
				g.streams = append(g.streams, st)
				g.byPeer[m.Addr] = st
			}
			reply[0].Addr = m.Addr
			if _, err := pc.WriteBatch(reply); err != nil {
				return nil, fmt.Errorf("accept streams: reply to %v: %w", m.Addr, err)
			}
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("accept streams: %w", err)
		}
	}
	return g, nil
}

// udpClientPhase is the data phase of iperf3's UDP test at the client: one
// endpoint per stream, dialled on the data plane.
type udpClientPhase struct {
	c   *Client
	dp  plane.DataPlane
	run *dataRun
}

func (u *udpClientPhase) params() (iperf3.Params, error) {
	u.dp = u.c.DataPlane
	if u.dp == nil {
		u.dp = &kernelplane.DataPlane{}
	}
	return u.c.params()
}

func (u *udpClientPhase) connected(conn net.Conn, p *iperf3.Params, _ iperf3.Cookie) {
	if u.c.Length == 0 {
		// As iperf3 does: a datagram the size of a TCP segment on this
		// path fits the link's MTU.
		if mss := controlMSS(conn); mss >= iperf3.HeaderLen(!u.c.Counters32) && mss <= 65507 {
			p.Len = mss
		}
	}
}

func (u *udpClientPhase) paramsMsg(p iperf3.Params) any { return &p }

func (u *udpClientPhase) createStreams(_ net.Conn, rep *Report, p iperf3.Params, setup time.Duration, _ func()) (*dataRun, error) {
	server := u.c.Server
	u.run = &dataRun{sender: !p.Reverse, blksize: p.Len, rate: p.Bandwidth, counters64: p.UDPCounters64Bit != 0}
	for i := 0; i < p.Parallel; i++ {
		g, err := dialStream(u.dp, server, iperf3.StreamID(i), time.Now().Add(setup))
		if err != nil {
			return nil, fmt.Errorf("stream %d: %w", iperf3.StreamID(i), err)
		}
		u.run.groups = append(u.run.groups, g)
		if i == 0 {
			rep.Start.SocketBuffers = socketBuffers(g.conn)
		}
		l := g.conn.LocalAddr()
		rep.Start.Connected = append(rep.Start.Connected, Connected{Socket: SocketNumber(iperf3.StreamID(i)),
			LocalHost: l.Addr().String(), LocalPort: int(l.Port()),
			RemoteHost: server.Addr().String(), RemotePort: int(server.Port())})
	}
	return u.run, nil
}

func (u *udpClientPhase) start(run *dataRun) { run.begin() }

// stopSending stops a sender; the data plane's error, if any, comes from
// stop after TEST_END.
func (u *udpClientPhase) stopSending(run *dataRun) error {
	run.stop()
	return nil
}

func (u *udpClientPhase) stop(run *dataRun) error   { return run.stop() }
func (u *udpClientPhase) writeExtra(net.Conn) error { return nil }
func (u *udpClientPhase) readExtra(net.Conn) error  { return nil }
func (u *udpClientPhase) report(*Report, bool)      {}

func (u *udpClientPhase) outOfOrder(run *dataRun) map[int]int64 { return streamsOutOfOrder(run) }

func (u *udpClientPhase) close() {
	if u.run != nil {
		u.run.stop()
		for _, g := range u.run.groups {
			g.conn.Close()
		}
	}
}

// dialStream opens one stream's endpoint and does the setup exchange: the
// client's 4-byte message, the server's 4-byte reply.
func dialStream(dp plane.DataPlane, server netip.AddrPort, id int, deadline time.Time) (*group, error) {
	pc, err := dp.Dial(server)
	if err != nil {
		return nil, err
	}
	msg := []plane.Message{{Buf: iperf3.ConnectBytes(iperf3.UDPConnectMsg), N: 4}}
	if _, err := pc.WriteBatch(msg); err != nil {
		pc.Close()
		return nil, fmt.Errorf("send setup message: %w", err)
	}
	buf := []plane.Message{{Buf: make([]byte, 65536)}}
	pc.SetReadDeadline(deadline)
	for {
		n, err := pc.ReadBatch(buf)
		if err != nil {
			pc.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("no setup reply from %v: %w", server, err)
			}
			return nil, fmt.Errorf("read setup reply: %w", err)
		}
		if n == 1 && iperf3.IsConnectReply(buf[0].Buf[:buf[0].N]) {
			break
		}
	}
	pc.SetReadDeadline(time.Time{})
	st := &stream{id: id, peer: server, local: pc.LocalAddr()}
	return &group{conn: pc, streams: []*stream{st}}, nil
}
