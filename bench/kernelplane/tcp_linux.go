package kernelplane

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/plane"
)

// tcpInfo reads a TCP socket's TCP_INFO: iperf3's figures (the window
// in bytes, as iperf3 computes it: segments × the sending MSS), and
// whether its FIN was acknowledged.
func tcpInfo(fd uintptr) (plane.TCPInfo, bool, error) {
	ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return plane.TCPInfo{}, false, err
	}
	info := plane.TCPInfo{Retransmits: uint64(ti.Total_retrans), SndCwnd: uint64(ti.Snd_cwnd) * uint64(ti.Snd_mss),
		SndWnd: uint64(ti.Snd_wnd), RTT: time.Duration(ti.Rtt) * time.Microsecond, RTTVar: time.Duration(ti.Rttvar) * time.Microsecond,
		PMTU: int(ti.Pmtu)}
	switch ti.State {
	case unix.BPF_TCP_FIN_WAIT2, unix.BPF_TCP_TIME_WAIT, unix.BPF_TCP_CLOSE:
		return info, true, nil
	}
	return info, false, nil
}

// congestion reads a TCP socket's TCP_CONGESTION.
func congestion(fd uintptr) (string, error) {
	return unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
}
