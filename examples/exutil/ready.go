package exutil

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// Ready prints the line that says the program is ready: dev's sockets are
// bound, their fill rings full, and its XDP program (if it has one) is
// attached, so what is sent from now on reaches them. The examples'
// recipes wait for it before they send:
//
//	ready: veth-b, queues 0-1, copy mode, driver attach; the runner
//
// what, if not empty, follows the semicolon: what the program does.
func Ready(w io.Writer, dev *xsk.Device, what string) {
	socks := dev.Sockets()
	queues := make([]int, len(socks))
	zc := make([]bool, len(socks))
	for i, s := range socks {
		queues[i], zc[i] = s.Queue(), s.ZeroCopy()
	}
	attach := "no XDP program"
	if p := dev.Program(); p != nil {
		attach = p.Mode().String() + " attach"
	}
	fmt.Fprintln(w, ReadyLine(dev.Name(), queues, zc, attach, what))
}

// ReadyConn is Ready for an xdpnet conn, whose sockets and program are in
// place once ListenUDP or DialUDP returns: the same line, from the conn's
// Info.
func ReadyConn(w io.Writer, c *xdpnet.UDPConn, what string) {
	line := "ready: " + c.Info().String()
	if what != "" {
		line += "; " + what
	}
	fmt.Fprintln(w, line)
}

// ReadyLine returns the ready line (without its newline) of a program on
// iface with sockets on queues, zc[i] saying whether queue i's socket is
// in zero-copy mode, and the XDP program's attach mode ("driver attach",
// "no XDP program"): "ready: vb, queues 0-1, copy mode, driver attach",
// then "; " and what, if what is not empty. It reads as xdpnet.Info's
// String does, and says which queues are in which mode when they differ.
func ReadyLine(iface string, queues []int, zc []bool, attach, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ready: %s, %s, %s, %s", iface, QueueList(queues), modes(queues, zc), attach)
	if what != "" {
		b.WriteString("; " + what)
	}
	return b.String()
}

// modes says which queues are in zero-copy mode: "zero-copy mode", "copy
// mode", or, when they differ, "zero-copy mode on queue 0, copy mode on
// queues 1-3".
func modes(queues []int, zc []bool) string {
	var on, off []int
	for i, q := range queues {
		if i < len(zc) && zc[i] {
			on = append(on, q)
		} else {
			off = append(off, q)
		}
	}
	switch {
	case len(off) == 0 && len(on) > 0:
		return "zero-copy mode"
	case len(on) == 0:
		return "copy mode"
	}
	return "zero-copy mode on " + QueueList(on) + ", copy mode on " + QueueList(off)
}

// QueueList names queue numbers the way -q takes them, runs of consecutive
// numbers as ranges, as xdpnet.Info does: "queues 3", "queues 0-3",
// "queues 0,2,5-7", "queues none".
func QueueList(queues []int) string {
	return "queues " + xsk.FormatQueues(queues)
}

// Drain ends dev's receiving for good, so that its sockets' counters hold
// every frame that reached them: it takes the sockets out of the XDP
// program (what arrives from now on goes to the kernel), then takes what
// is left on their RX rings and gives it back, counted as received but
// not handled. Call it once the goroutines that used the sockets are done,
// before the last Stats. It waits a few milliseconds for frames the
// program redirected just before, which the kernel puts on the ring when
// its poll ends. A device without a program (NoProgram) has nothing to
// drain.
func Drain(dev *xsk.Device, batch int) error {
	p := dev.Program()
	if p == nil {
		return nil
	}
	for _, s := range dev.Sockets() {
		if err := p.Unregister(s.Queue()); err != nil {
			return err
		}
	}
	settle := time.Now().Add(5 * time.Millisecond)
	for _, s := range dev.Sockets() {
		b := s.NewBatch(batch)
		for s.Err() == nil {
			if s.Receive(b) > 0 {
				s.Release(b)
				continue
			}
			if time.Now().After(settle) {
				break
			}
			if _, err := s.Wait(time.Millisecond, false); err != nil {
				break
			}
		}
		s.Free(b)
	}
	return nil
}
